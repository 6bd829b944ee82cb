"""Type stub of ``rmlens.memorization``: its lazily loaded names (``rmlens._lazy.attach``) as
imports an IDE or a type checker follows to their code; tests/test_stubs.py keeps it
in step with ``__all__``."""

from ._checkpoint import audit_rm as audit_rm
from ._config import EXECUTION_FIELDS as EXECUTION_FIELDS
from ._config import AuditConfig as AuditConfig
from ._damping import damping_sentence as damping_sentence
from ._estimate import ESTIMATE_COLUMNS as ESTIMATE_COLUMNS
from ._estimate import estimate as estimate
from ._estimate import memorization_scores as memorization_scores
from ._execute import default_trainer as default_trainer
from ._finish import plot_memorization_map as plot_memorization_map
from ._notes import checkpoint_sentence as checkpoint_sentence
from ._plans import make_plan as make_plan
from ._plans import runs_per_repeat as runs_per_repeat
from ._quality import CHANCE as CHANCE
from ._quality import NEAR_CHANCE as NEAR_CHANCE
from ._quality import WEAK_ACCURACY as WEAK_ACCURACY
from ._quality import WEAK_MARGIN as WEAK_MARGIN
from ._quality import WEAK_NOT_LEARNED as WEAK_NOT_LEARNED
from ._quality import shortcut_sentence as shortcut_sentence
from ._quality import strongest_shortcut as strongest_shortcut
from ._regime import plan_validation as plan_validation
from ._regime import validation_words as validation_words
from ._reliability import complete_repeats as complete_repeats
from ._reliability import run_sides as run_sides
from ._reliability import same_partition as same_partition
from ._reliability import side_means as side_means
from ._run_folders import load_matrices as load_matrices
from ._runner import audit as audit
from ._sentences import AuditSentences as AuditSentences
from ._sentences import Sentence as Sentence
from ._sentences import audit_sentences as audit_sentences
from ._summary import WITHHELD as WITHHELD
from ._summary import accuracy_interval as accuracy_interval
from ._summary import categorize as categorize
from ._summary import cm_links as cm_links
from ._summary import memorized_note as memorized_note
from ._summary import summarize_audit as summarize_audit
