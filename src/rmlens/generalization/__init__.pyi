"""Type stub of ``rmlens.generalization``: its lazily loaded names (``rmlens._lazy.attach``) as
imports an IDE or a type checker follows to their code; tests/test_stubs.py keeps it
in step with ``__all__``."""

from ._config import GeneralizeConfig as GeneralizeConfig
from ._generalize import generalize as generalize
from ._persona import SHIFT_TOKENS as SHIFT_TOKENS
from ._persona import TRAIN_TOKENS as TRAIN_TOKENS
from ._persona import persona_pairs as persona_pairs
from ._persona import persona_splits as persona_splits
from ._plots import plot_generalization as plot_generalization
from ._shifts import REWRITES as REWRITES
from ._shifts import rewrite_pairs as rewrite_pairs
from ._shifts import swap_synonyms as swap_synonyms
from ._shifts import synonym_table as synonym_table
