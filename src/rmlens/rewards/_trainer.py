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
from scipy.special import expit

from rmlens.backbones import featurize, load_backbone
from rmlens.rewards._convex import counterfactuals, one_blas_thread, refit
from rmlens.rewards._head import HeadConfig, HeadRM
from rmlens.rewards._influence import DAMPING, OBJECTIVES, bt_terms, last_layer_counterfactuals
from rmlens.rewards._metrics import reward_stats
from rmlens.rewards._objectives import BIAS_OBJECTIVES
from rmlens.rewards._saved import ExplicitHeadRM


@dataclass
class RunScores:
    """Rewards of every pair from one run's RM, and its training metrics.

    With paired counterfactuals (a trainer prepared with ``groups``): ``p`` is
    sigmoid(r+ - r-) of every usable pair under the run's RM and ``p_cf`` under the RM with
    the pair's group removed (if the run trained on it) or added (if it held it out), NaN
    for the run's validation pairs (neither in nor out: no counterfactual).
    """

    r_chosen: np.ndarray  # (n_pairs,)
    r_rejected: np.ndarray  # (n_pairs,)
    metrics: dict
    model: Any = None  # the run's RM, saved beside its scores when it has ``save(folder)``
    p: np.ndarray | None = None  # (n_pairs,)
    p_cf: np.ndarray | None = None  # (n_pairs,)


class PairTrainer(Protocol):
    def prepare(self, pairs: pd.DataFrame, *, quiet: bool = False) -> np.ndarray:
        """Get ready to train on ``pairs``; return the (n_pairs,) mask of usable pairs.

        A trainer that gives paired counterfactuals (``counterfactuals`` true) also takes
        ``groups=`` (n_pairs,) group labels, whose removal or addition each run's
        counterfactuals are of (``p`` and ``p_cf``), and ``check_exact=``, the groups per
        run to refit exactly as a check.
        """

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
    check_exact : int, optional
        Paired counterfactuals: per run, refit the head exactly with this many random
        groups removed or added, and record how far the counterfactuals are from the refits
        (``metrics["exactness"]``); None: what ``prepare`` is given (an audit gives its
        ``check_exact``).
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
        check_exact: int | None = None,
    ):
        self.model = model
        self.head = head or HeadConfig()
        self.max_length = max_length
        self.batch_size = batch_size
        self.cache_dir = cache_dir
        self.backbone = backbone
        self.bias = bias
        self.check_exact = check_exact

    @property
    def counterfactuals(self) -> str | None:
        """How runs give paired counterfactuals: ``"newton"`` (the convex head: Newton steps,
        exact up to about 1e-6), ``"last-layer"`` (AdamW heads trained with ``bt`` or
        ``label_smoothing``: last-layer Gauss-Newton influence over a damping grid,
        ``rmlens.rewards._influence``), or None (other objectives)."""
        if self.head.convex:
            return "newton"
        return "last-layer" if self.head.objective in OBJECTIVES else None

    def prepare(
        self, pairs: pd.DataFrame, *, quiet: bool = False, groups=None, check_exact: int = 0
    ) -> np.ndarray:
        backbone = self.backbone or load_backbone(self.model, max_length=self.max_length)
        self.backbone_ = backbone
        self.features_ = featurize(
            backbone, pairs, cache_dir=self.cache_dir, batch_size=self.batch_size, quiet=quiet
        )
        self.margin_ = pairs["margin"].to_numpy(float) if "margin" in pairs else None
        self.bias_, self.groups_ = objective_inputs(self.head, pairs, self.bias)
        self.identity_ = backbone.identity
        self.groups_codes_ = None
        self.check_exact_ = check_exact if self.check_exact is None else self.check_exact
        if groups is not None:
            if not self.counterfactuals:
                raise ValueError(
                    f"paired counterfactuals need head='logistic', or an objective of "
                    f"{OBJECTIVES}; this trainer's is {self.head.objective!r}"
                )
            if self.check_exact_ and self.counterfactuals != "newton":
                raise ValueError(
                    "check_exact refits the convex head (head='logistic'); last-layer "
                    "influence has no exact refit (set check_exact=0)"
                )
            self.groups_codes_ = np.unique(np.asarray(groups, dtype=str), return_inverse=True)[1]
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
        metrics.update(_training_record(rm))
        metrics.update(describe_objective(rm.objective_, self.bias))
        p = p_cf = None
        if self.groups_codes_ is not None and self.counterfactuals == "last-layer":
            p, p_cf, lambdas = self._influence(rm, train_index, val_index)
            metrics.update(damping_grid=list(DAMPING), damping_l2=lambdas.tolist())
        elif self.groups_codes_ is not None:
            with one_blas_thread():
                p, p_cf, exactness = self._paired(rm, train_index, val_index, seed)
            if exactness is not None:
                metrics["exactness"] = exactness
        return RunScores(r_c, r_r, metrics, ExplicitHeadRM(self.backbone_, rm), p, p_cf)

    def _influence(self, rm: HeadRM, train_index, val_index):
        """p and p_cf over the damping grid of every usable pair, from the head's last
        layer (``rmlens.rewards._influence``)."""
        f, cfg = self.features_, self.head
        phi_c, u = rm.last_layer(f.chosen)
        phi_r, _ = rm.last_layer(f.rejected)
        inside, outside = inside_outside(len(phi_c), f.kept, train_index, val_index)
        offset, target = bt_terms(cfg, self.margin_)
        p, p_cf, lambdas = last_layer_counterfactuals(
            phi_c - phi_r, u, self.groups_codes_, inside, outside, offset=offset, target=target
        )
        p[~np.asarray(f.kept, dtype=bool)] = np.nan
        return p, p_cf, lambdas

    def _paired(self, rm: HeadRM, train_index, val_index, seed: int):
        """p and p_cf of every usable pair (``rmlens.rewards._convex.counterfactuals``), and
        the exactness check against ``check_exact`` refits."""
        f = self.features_
        problem = rm.pair_problem(f.chosen, f.rejected, self.margin_, self.bias_)
        keep = f.chosen.shape[1]  # poe: the bias expert's coordinates train, never score
        inside, outside = inside_outside(len(problem.z), f.kept, train_index, val_index)
        codes = self.groups_codes_
        p = np.full(len(inside), np.nan)
        kept = np.asarray(f.kept, dtype=bool)  # validation pairs too (their quality is shown)
        p[kept] = expit(problem.z[kept, :keep] @ rm.w_[:keep])
        p_cf = counterfactuals(problem, rm.w_, rm.l2_, codes, inside, outside, keep)
        exactness = None
        if self.check_exact_:
            exactness = _check_groups(
                problem, rm, codes, inside, outside, p, p_cf, self.check_exact_, seed, keep
            )
        return p, p_cf, exactness


def inside_outside(n: int, kept, train_index, val_index) -> tuple[np.ndarray, np.ndarray]:
    """A run's training pairs, and the usable pairs it holds out (validation: neither)."""
    inside = np.zeros(n, dtype=bool)
    inside[train_index] = True
    outside = np.asarray(kept, dtype=bool) & ~inside
    outside[val_index] = False
    return inside, outside


def _training_record(rm: HeadRM) -> dict:
    """A run's training figures: loss, epochs and best epoch (AdamW heads), or the lambda
    kept and the grid's validation losses (the logistic head)."""
    if rm.config.convex:
        kept = rm.history_[rm.best_step_ - 1]
        record = {"loss": kept["loss"], "l2": rm.l2_}
        if "val_loss" in kept:
            record["val_loss"] = kept["val_loss"]
            record["l2_path"] = {f"{h['l2']:g}": h["val_loss"] for h in rm.history_}
        return record
    last = rm.history_[-1]
    record = {"loss": last["loss"], "epochs": rm.n_epochs_, "best_epoch": rm.best_epoch_}
    if "val_loss" in last:
        record["val_loss"] = rm.history_[rm.best_epoch_ - 1]["val_loss"]
    return record


def _check_groups(problem, rm, codes, inside, outside, p, p_cf, n, seed, keep) -> dict:
    """Refit the head exactly with ``n`` random groups (of the run's training and held-out
    groups) removed or added; the checked pairs' p, p_cf and p_refit, as lists."""
    eligible = np.unique(codes[inside | outside])
    rng = np.random.default_rng([seed, 11])
    chosen = rng.choice(eligible, size=min(n, len(eligible)), replace=False)
    rows_all, truth = [], []
    for g in np.sort(chosen):
        rows = np.flatnonzero((codes == g) & (inside | outside))
        truth.append(refit(problem, rm.w_, rm.l2_, inside, rows, keep))
        rows_all.append(rows)
    rows = np.concatenate(rows_all)
    return {
        "groups": int(len(chosen)),
        "removed": int(sum(inside[r[0]] for r in rows_all)),
        "p": p[rows].tolist(),
        "p_cf": p_cf[rows].tolist(),
        "p_refit": np.concatenate(truth).tolist(),
    }
