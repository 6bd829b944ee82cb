"""Reward models: one trainer per mode, one interface to score, the losses.

- ``frozen``: :class:`HeadConfig` and :class:`FrozenHeadTrainer` (heads on frozen features).
- ``finetune``: :class:`TrainConfig`, :class:`ExplicitRMTrainer`, :class:`ImplicitRMTrainer`
  (``make_trainer`` picks one) and ``train`` (``rmlens train``).
- Both configs are defined in ``_config``, which imports nothing heavy (the command line
  reads them), and re-exported by ``frozen`` and ``finetune``; both extend
  :class:`ObjectiveConfig` (the loss: ``objective``, ``gamma``, ...). ``_config`` also holds
  :class:`ScoreConfig` (how a saved RM is loaded to score: ``rmlens score``, ``evaluate``,
  ``sweep``) and :class:`ExportConfig` (``export_rm``, ``rmlens export``).
- Every trainer follows one contract (``Trainer``): ``Trainer(config).fit(pairs) -> self``,
  the fitted RM in ``rm_``, ``score(pairs)``; ``prepare`` + ``fit_score`` per audit run.
- Every RM is a :class:`RewardModel` (texts in, rewards out: ``score(prompts, responses)``,
  ``score_pairs(pairs)``): ``ExplicitHeadRM``, ``TunedRM``, ``EnsembleRM``,
  ``SequenceClassifierRM``; ``load_rm`` loads any of them, ``use_format`` makes one score in
  another format. ``HeadRM`` is a fitted head alone (features in: ``score_features``).
- ``export_rm`` writes an RM as a standard Hugging Face folder; ``reward_function`` makes
  any RM the reward function of an RL trainer (TRL's GRPO ``reward_funcs``).
- ``objectives``: one class per training objective (:class:`Objective` and its subclasses,
  ``objective_of``); ``losses``: the losses, and :class:`ObjectiveModule`, the module an
  objective trains in.
"""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        # light: no numpy, scipy or torch (the command line reads them)
        "_config": [
            "ExportConfig", "HeadConfig", "ObjectiveConfig", "ScoreConfig", "TrainConfig",
            "MODEL_HELP", "OBJECTIVE_NAMES", "STEP_FIELDS", "resolve_device",
        ],
        "frozen": ["FrozenHeadTrainer"],
        "finetune": ["ExplicitRMTrainer", "ImplicitRMTrainer", "make_trainer"],
        "_trainer_base": ["Trainer", "eval_split", "group_codes", "inactive_message"],
        "_pair_gradients": ["influence_scores"],
        "_train_rm": ["train"],
        "_head": ["HeadRM"],
        "_saved": ["ExplicitHeadRM", "RewardModel", "SequenceClassifierRM", "save_head_rm"],
        "_tuned": ["TunedRM"],
        "_ensemble": ["EnsembleRM", "member_pair_scores", "member_scores"],
        "_formatting": ["use_format"],
        "_load": ["RM_PRESETS", "load_rm"],
        "_export": ["export_rm"],
        "_reward_function": ["RewardFunction", "reward_function"],
        "losses": [
            "ObjectiveModule",
            "bradley_terry_loss",
            "centering_loss",
            "plackett_luce_loss",
        ],
        # light too: configs read the objectives' traits
        "objectives": [
            "OBJECTIVES",
            "BradleyTerry",
            "Complementary",
            "Curate",
            "GroupDRO",
            "LabelSmoothing",
            "LowMargin",
            "Objective",
            "ProductOfExperts",
            "Reweight",
            "objective_of",
        ],
        "_convex": ["REFINE_SHARE"],
        "_influence": ["DAMPING"],
        "_metrics": ["not_learned", "pairwise_accuracy"],
    },
)
