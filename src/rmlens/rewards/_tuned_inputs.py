"""What a fine-tuned run trains on beside its pairs: the objective's extras (bias features,
group codes) and the audit-guided objectives' loss weights from the base model's frozen
features."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from rmlens.backbones import featurize
from rmlens.rewards._head_fit import loss_weights
from rmlens.rewards._trainer_base import warn_inactive
from rmlens.rewards.losses import (
    ObjectiveModule,
    PairExtras,
    describe_objective,
    objective_activity,
)
from rmlens.rewards.objectives import objective_of


def extras_at(objective: str, dphi, groups, index: np.ndarray) -> PairExtras | None:
    """Bias features and groups of the pairs at ``index`` (None for plain Bradley-Terry)."""
    if objective_of(objective).plain:
        return None
    return PairExtras(
        dphi=None if dphi is None else torch.as_tensor(dphi[index], dtype=torch.float32),
        group=None if groups is None else torch.as_tensor(
            np.unique(groups[index], return_inverse=True)[1].ravel()
        ),
    )  # fmt: skip


def guide_features(trainer, pairs: pd.DataFrame):
    """Frozen features of the base model for the audit-guided loss weights, or None when
    the objective has none. Call at the base weights (before training, or after
    ``_reset``); no embedding cache, so adapted weights can never be cached as the base's."""
    cfg = trainer.config_
    if not objective_of(cfg).frozen_weights:
        return None
    return featurize(trainer.base_, pairs, cache_dir=False, batch_size=cfg.batch_size,
                     quiet=True)  # fmt: skip


def guided_weights(cfg, features, margin, groups, train_index, eval_index) -> tuple:
    """``rmlens.rewards._head_fit.loss_weights`` of the pairs at ``train_index``, the pairs
    at ``eval_index`` choosing the nested audit's lambda: (weights, guide, per_pair)."""
    f, train, val = features, np.asarray(train_index, int), np.asarray(eval_index, int)
    pick = lambda a, i: None if a is None else a[i]  # noqa: E731
    validation = (f.chosen[val], f.rejected[val], pick(margin, val)) if len(val) else None
    return loss_weights(cfg, f.chosen[train], f.rejected[train], pick(margin, train),
                        pick(groups, train), validation=validation)  # fmt: skip


def guide_record(cfg, weights, guide) -> dict:
    """A run's record of its loss weights: their summary, how they were made, and whether
    the mechanism acted (``objective_active``)."""
    objective = ObjectiveModule(cfg.objective, weights=weights, guide=guide)
    return describe_objective(objective, None, objective_activity(objective, cfg, None))


def loss_weights_table(trainer, data: pd.DataFrame, train_index, eval_index):
    """The audit-guided objectives' loss weights of the training pairs, from a frozen paired
    audit of them on the base model's features (``eval_index`` chooses its lambda): a table
    ``id, weight, tm, tg, q`` whose ``attrs`` say how they were made (with
    ``objective_active``, and ``objective_inactive_why`` when they did nothing); None for
    the other objectives. Warns when the weights did nothing."""
    features = guide_features(trainer, data)
    if features is None:
        return None
    cfg = trainer.config_
    margin = data["margin"].to_numpy(float) if "margin" in data else None
    weights, guide, per_pair = guided_weights(cfg, features, margin, trainer.groups_,
                                              train_index, eval_index)  # fmt: skip
    table = pd.DataFrame({"id": data.id.to_numpy()[train_index], "weight": weights, **per_pair})
    table.attrs.update(guide_record(cfg, weights, guide))
    warn_inactive(cfg.objective, [{"active": table.attrs["objective_active"],
                                   "why": table.attrs.get("objective_inactive_why")}])
    return table
