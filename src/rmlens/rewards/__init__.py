"""Reward models and their training: one trainer per mode, one interface to score, the losses.

- ``frozen``: :class:`HeadConfig` and :class:`FrozenHeadTrainer` (heads on frozen features).
- ``finetune``: :class:`TrainConfig`, :class:`ExplicitRMTrainer`, :class:`ImplicitRMTrainer`
  (``make_trainer`` picks one).
- Both configs are defined in ``_config``, which imports nothing heavy (the command line
  reads them), and re-exported by ``frozen`` and ``finetune``; both extend
  :class:`ObjectiveConfig` (the loss: ``objective``, ``gamma``, ...). ``_config`` also holds
  :class:`ScoreConfig` (how a saved RM is loaded to score: ``rmlens score``, ``evaluate``,
  ``sweep``) and :class:`ExportConfig` (``export_rm``, ``rmlens export``).
- Every trainer follows one contract (``Trainer``): ``Trainer(config).fit(pairs) -> self``,
  the fitted RM in ``rm_``, ``score(pairs)``; ``prepare`` + ``fit_score`` per audit run,
  whose paired counterfactuals come from ``rmlens.influence`` (``influence_scores`` for a
  fine-tuned run).
- Every RM is a :class:`RewardModel` (texts in, rewards out: ``score(prompts, responses)``,
  ``score_pairs(pairs)``): ``ExplicitHeadRM`` and ``TunedRM`` here, each saving itself to a
  folder; ``HeadRM`` is a fitted head alone (features in: ``score_features``). Loading any
  RM, ensembles, Hugging Face classifiers, export, the model card and the reward function
  of RL trainers are in ``rmlens.hub`` (``load_rm``, ``export_rm``, ``reward_function``,
  ``train``: the names also resolve here, as before they moved).
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
        "_finetune_per_run": ["influence_scores"],
        "_head": ["HeadRM"],
        "_models": ["RM_CONFIG", "ExplicitHeadRM", "RewardModel", "read_head", "save_head_rm"],
        "_tuned": ["TunedRM", "load_tuned"],
        "_base_model": ["load_causal_lm"],
        "_nets": ["ExplicitNet", "ImplicitNet"],
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
        "_metrics": ["not_learned", "pairwise_accuracy"],
    },
    moved={
        "rmlens.hub": [
            "EnsembleRM", "RM_PRESETS", "RewardFunction", "SequenceClassifierRM", "export_rm",
            "load_rm", "member_pair_scores", "member_scores", "reward_function", "train",
            "use_format",
        ],
        "rmlens.influence": ["DAMPING", "REFINE_SHARE"],
    },
)
