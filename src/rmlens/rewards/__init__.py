"""Reward models: heads, losses, training, metrics."""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_config": ["HeadConfig", "TrainConfig"],
        "_ensemble": ["EnsembleRM", "member_pair_scores", "member_scores"],
        "_finetune": ["ExplicitRMTrainer", "ImplicitRMTrainer", "make_trainer"],
        "_head": ["HeadRM", "RewardHead"],
        "_implicit": ["implicit_reward", "response_logps"],
        "_losses": ["bradley_terry_loss", "centering_loss", "plackett_luce_loss"],
        "_metrics": ["pairwise_accuracy", "reward_stats"],
        "_objectives": ["OBJECTIVES", "Objective", "PairExtras"],
        "_load": ["LOADERS", "RM_PRESETS", "load_experiment", "load_rm"],
        "_saved": ["ExplicitHeadRM", "RewardModel", "SequenceClassifierRM", "save_head_rm"],
        "_train": ["train_rm"],
        "_trainer": ["FrozenHeadTrainer", "PairTrainer", "RunScores"],
        "_tuned": ["TunedRM"],
    },
)
