"""Reward models: heads, losses, training, metrics."""

from rmlens.rewards._config import TrainConfig
from rmlens.rewards._ensemble import EnsembleRM
from rmlens.rewards._finetune import ExplicitRMTrainer, ImplicitRMTrainer, make_trainer
from rmlens.rewards._head import HeadConfig, HeadRM, RewardHead
from rmlens.rewards._implicit import implicit_reward, response_logps
from rmlens.rewards._losses import bradley_terry_loss, centering_loss, plackett_luce_loss
from rmlens.rewards._metrics import pairwise_accuracy, reward_stats
from rmlens.rewards._params import check_params
from rmlens.rewards._saved import (
    LOADERS,
    ExplicitHeadRM,
    RewardModel,
    SequenceClassifierRM,
    load_rm,
)
from rmlens.rewards._train import train_rm
from rmlens.rewards._trainer import FrozenHeadTrainer, PairTrainer, RunScores
from rmlens.rewards._tuned import TunedRM

__all__ = [
    "EnsembleRM",
    "ExplicitRMTrainer",
    "ImplicitRMTrainer",
    "TrainConfig",
    "TunedRM",
    "implicit_reward",
    "make_trainer",
    "response_logps",
    "train_rm",
    "LOADERS",
    "ExplicitHeadRM",
    "RewardModel",
    "SequenceClassifierRM",
    "load_rm",
    "FrozenHeadTrainer",
    "HeadConfig",
    "HeadRM",
    "PairTrainer",
    "RewardHead",
    "RunScores",
    "bradley_terry_loss",
    "centering_loss",
    "check_params",
    "pairwise_accuracy",
    "plackett_luce_loss",
    "reward_stats",
]
