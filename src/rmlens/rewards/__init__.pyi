"""Type stub of ``rmlens.rewards``: its lazily loaded names (``rmlens._lazy.attach``) as
imports an IDE or a type checker follows to their code; tests/test_stubs.py keeps it
in step with ``__all__``."""

from ._config import ExportConfig as ExportConfig
from ._config import HeadConfig as HeadConfig
from ._config import ObjectiveConfig as ObjectiveConfig
from ._config import ScoreConfig as ScoreConfig
from ._config import TrainConfig as TrainConfig
from ._ensemble import EnsembleRM as EnsembleRM
from ._export import export_rm as export_rm
from ._formatting import use_format as use_format
from ._head import HeadRM as HeadRM
from ._load import RM_PRESETS as RM_PRESETS
from ._load import load_rm as load_rm
from ._reward_function import RewardFunction as RewardFunction
from ._reward_function import reward_function as reward_function
from ._saved import ExplicitHeadRM as ExplicitHeadRM
from ._saved import RewardModel as RewardModel
from ._saved import SequenceClassifierRM as SequenceClassifierRM
from ._saved import save_head_rm as save_head_rm
from ._train_rm import train as train
from ._trainer_base import Trainer as Trainer
from ._tuned import TunedRM as TunedRM
from .finetune import ExplicitRMTrainer as ExplicitRMTrainer
from .finetune import ImplicitRMTrainer as ImplicitRMTrainer
from .finetune import make_trainer as make_trainer
from .frozen import FrozenHeadTrainer as FrozenHeadTrainer
from .losses import ObjectiveModule as ObjectiveModule
from .losses import bradley_terry_loss as bradley_terry_loss
from .losses import centering_loss as centering_loss
from .losses import plackett_luce_loss as plackett_luce_loss
from .objectives import OBJECTIVES as OBJECTIVES
from .objectives import BradleyTerry as BradleyTerry
from .objectives import Complementary as Complementary
from .objectives import Curate as Curate
from .objectives import GroupDRO as GroupDRO
from .objectives import LabelSmoothing as LabelSmoothing
from .objectives import LowMargin as LowMargin
from .objectives import Objective as Objective
from .objectives import ProductOfExperts as ProductOfExperts
from .objectives import Reweight as Reweight
from .objectives import objective_of as objective_of
