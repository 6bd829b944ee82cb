"""Type stub of ``rmlens.hub``: its lazily loaded names (``rmlens._lazy.attach``) as imports
an IDE or a type checker follows to their code; tests/test_stubs.py keeps it in step with
``__all__``."""

from ._classifier import SequenceClassifierRM as SequenceClassifierRM
from ._ensemble import EnsembleRM as EnsembleRM
from ._ensemble import member_pair_scores as member_pair_scores
from ._ensemble import member_scores as member_scores
from ._export import TRAINING_RECORD as TRAINING_RECORD
from ._export import export_rm as export_rm
from ._formatting import use_format as use_format
from ._load import RM_PRESETS as RM_PRESETS
from ._load import load_rm as load_rm
from ._reward_function import RewardFunction as RewardFunction
from ._reward_function import reward_function as reward_function
from ._train import train as train
