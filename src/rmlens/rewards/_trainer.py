"""What the memorization runner asks of a way of training RMs.

A trainer is prepared once on the whole pair table (a frozen backbone encodes every text
here), then trains one RM per run on a subset and scores every pair. Fine-tuned trainers
implement the same protocol, so they plug into the same runner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from rmlens.backbones import featurize, load_backbone
from rmlens.rewards._head import HeadConfig, HeadRM
from rmlens.rewards._metrics import reward_stats
from rmlens.rewards._objectives import BIAS_OBJECTIVES
from rmlens.rewards._saved import ExplicitHeadRM


@dataclass
class RunScores:
    """Rewards of every pair from one run's RM, and its training metrics."""

    r_chosen: np.ndarray  # (n_pairs,)
    r_rejected: np.ndarray  # (n_pairs,)
    metrics: dict
    model: Any = None  # the run's RM, saved beside its scores when it has ``save(folder)``


class PairTrainer(Protocol):
    def prepare(self, pairs: pd.DataFrame, *, quiet: bool = False) -> np.ndarray:
        """Get ready to train on ``pairs``; return the (n_pairs,) mask of usable pairs."""

    def fit_score(
        self, train_index: np.ndarray, *, seed: int, val_index: np.ndarray | None = None
    ) -> RunScores:
        """Train an RM on the pairs at ``train_index`` and score every prepared pair.

        ``val_index``: validation pairs, never trained on, that the trainer may use for
        choices such as early stopping. An audit carves them from the run's own training
        groups (never from its held-out groups, which would leak into TG).
        """


def objective_inputs(config, pairs: pd.DataFrame, bias) -> tuple[np.ndarray | None, ...]:
    """The bias feature differences (n_pairs, k) and group labels (n_pairs,) that the
    objective of ``config`` (a ``HeadConfig`` or ``TrainConfig``) reads, else None."""
    from rmlens._errors import InputError

    dphi = groups = None
    if config.objective in BIAS_OBJECTIVES:
        if bias is None:
            raise InputError(
                f"objective {config.objective!r} needs bias features: pass bias="
                "rmlens.attribution.bias_features(pairs, config.bias_features)"
            )
        dphi = np.asarray(bias, dtype=float)
        if dphi.ndim != 2 or len(dphi) != len(pairs):
            raise InputError(
                f"bias features: expected ({len(pairs)}, k) values, one row per pair; got "
                f"shape {dphi.shape}"
            )
    if config.objective == "group_dro":
        column = config.dro_groups or "user_id"
        if column not in pairs:
            raise InputError(
                f"--dro-groups: objective group_dro needs a group column; no column "
                f"'{column}' in the data (columns: {', '.join(map(str, pairs))})"
            )
        groups = pairs[column].astype(str).to_numpy()
    return dphi, groups


def describe_objective(objective, bias) -> dict:
    """A run's record of its objective; bias weights are named after the bias columns."""
    out = objective.describe()
    names = list(bias.columns) if isinstance(bias, pd.DataFrame) else None
    if "bias_weights" in out and names:
        out["bias_weights"] = dict(zip(names, out["bias_weights"], strict=True))
    return out


class FrozenHeadTrainer:
    """Frozen backbone: features computed once (cached on disk), one head trained per run.

    Parameters
    ----------
    model : str
        Backbone preset, local path or hub id.
    head : HeadConfig
    max_length, batch_size : int, optional
        Tokens per sequence and texts per encoding batch.
    cache_dir : path or False, optional
        Embedding cache root; ``False`` disables it.
    bias : DataFrame or array of shape (n_pairs, k), optional
        Shortcut feature differences phi(chosen) - phi(rejected) of every pair, for the
        ``poe`` and ``reweight`` objectives (``rmlens.attribution.bias_features``).
    """

    def __init__(
        self,
        *,
        model: str = "minilm",
        head: HeadConfig | None = None,
        max_length: int | None = None,
        batch_size: int = 32,
        cache_dir=None,
        backbone=None,
        bias=None,
    ):
        self.model = model
        self.head = head or HeadConfig()
        self.max_length = max_length
        self.batch_size = batch_size
        self.cache_dir = cache_dir
        self.backbone = backbone
        self.bias = bias

    def prepare(self, pairs: pd.DataFrame, *, quiet: bool = False) -> np.ndarray:
        backbone = self.backbone or load_backbone(self.model, max_length=self.max_length)
        self.backbone_ = backbone
        self.features_ = featurize(
            backbone, pairs, cache_dir=self.cache_dir, batch_size=self.batch_size, quiet=quiet
        )
        self.margin_ = pairs["margin"].to_numpy(float) if "margin" in pairs else None
        self.bias_, self.groups_ = objective_inputs(self.head, pairs, self.bias)
        self.identity_ = backbone.identity
        return self.features_.kept

    def fit_score(
        self, train_index: np.ndarray, *, seed: int, val_index: np.ndarray | None = None
    ) -> RunScores:
        f = self.features_
        cfg = self.head.replace(seed=seed)  # each run its own seed (the audit's, per run)
        train_index = np.asarray(train_index, dtype=int)
        val_index = np.asarray([] if val_index is None else val_index, dtype=int)
        pick = lambda a, i: None if a is None else a[i]  # noqa: E731
        validation = None
        if len(val_index):
            validation = (
                f.chosen[val_index],
                f.rejected[val_index],
                *(pick(a, val_index) for a in (self.margin_, self.bias_, self.groups_)),
            )
        rm = HeadRM(cfg).fit(
            f.chosen[train_index],
            f.rejected[train_index],
            pick(self.margin_, train_index),
            validation=validation,
            bias=pick(self.bias_, train_index),
            groups=pick(self.groups_, train_index),
        )
        r_c, r_r = rm.score(f.chosen), rm.score(f.rejected)
        held = np.setdiff1d(np.arange(len(r_c)), np.concatenate([train_index, val_index]))
        metrics = {}
        for split, index in (("train", train_index), ("val", val_index), ("test", held)):
            if len(index) or split != "val":
                stats = reward_stats(r_c[index], r_r[index])
                metrics.update({f"{split}_{k}": v for k, v in stats.items()})
        last = rm.history_[-1]
        metrics["loss"] = last["loss"]
        metrics["epochs"] = rm.n_epochs_
        metrics["best_epoch"] = rm.best_epoch_
        if "val_loss" in last:
            metrics["val_loss"] = rm.history_[rm.best_epoch_ - 1]["val_loss"]
        metrics.update(describe_objective(rm.objective_, self.bias))
        return RunScores(r_c, r_r, metrics, ExplicitHeadRM(self.backbone_, rm))
