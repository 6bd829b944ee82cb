"""Saved RMs: how an RM is written to a folder, read back from any folder, and used elsewhere.

- :func:`train` fine-tunes an RM (or a seed ensemble) into a folder, resuming if stopped
  (``rmlens train``).
- :func:`load_rm` loads any RM: an rmlens folder of every ``kind``, an experiment directory
  (its runs as an :class:`EnsembleRM`), an RM preset, or a Hugging Face
  sequence-classification model (:class:`SequenceClassifierRM`: TRL's ``RewardTrainer``
  output, RewardBench models) by path or hub id; :func:`use_format` makes one score in
  another format.
- :func:`export_rm` writes an RM as a standard Hugging Face folder with its model card, read
  alike by transformers, TRL and RewardBench.
- :func:`reward_function` makes any RM the reward function of an RL trainer (TRL's GRPO
  ``reward_funcs``).

The RMs themselves and their training are in ``rmlens.rewards``.
"""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_train": ["train"],
        "_load": ["RM_PRESETS", "load_rm"],
        "_classifier": ["SequenceClassifierRM"],
        "_ensemble": ["EnsembleRM", "member_pair_scores", "member_scores"],
        "_formatting": ["use_format"],
        "_export": ["TRAINING_RECORD", "export_rm"],
        "_reward_function": ["RewardFunction", "reward_function"],
    },
)
