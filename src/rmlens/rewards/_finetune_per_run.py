"""The fine-tuned trainers' per-run protocol (``Trainer.prepare`` + ``fit_score``): one RM
per audit run from the base weights, the learning rate chosen on validation pairs only, and
the run's paired counterfactuals (``influence_scores``: Gauss-Newton or last-layer influence,
``rmlens.influence``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import expit

from rmlens._errors import InputError
from rmlens.influence import DAMPING, gauss_newton_counterfactuals, last_layer_counterfactuals
from rmlens.rewards._config import TrainConfig
from rmlens.rewards._metrics import reward_stats
from rmlens.rewards._paired import bt_terms
from rmlens.rewards._trainer_base import (
    RunScores,
    dropped_ids,
    group_codes,
    inside_outside,
    objective_inputs,
)
from rmlens.rewards.objectives import names_where, objective_of

if TYPE_CHECKING:
    import pandas as pd


class PerRun:
    """Mixed into ``finetune._TunedTrainer``: it sets up ``net_``, ``base_``, ``runtime_`` and
    provides ``_setup``, ``_examples``, ``_extras``, ``_reset``, ``_split_eval``,
    ``_prepare_refs``, ``_train`` (the training loop) and ``_make_rm``."""

    @property
    def counterfactuals(self) -> str | None:
        """``"gauss-newton"`` or ``"last-layer"`` (``influence``) where runs give paired
        counterfactuals (an explicit RM on pairs, trained with ``bt`` or
        ``label_smoothing``: ``rmlens.influence``), else None."""
        cfg = self._config()
        pairwise = self.rm_kind == "explicit" and cfg.loss == "bradley-terry"
        return cfg.influence if pairwise and objective_of(cfg).pair_logistic else None

    def prepare(
        self, pairs: pd.DataFrame, *, quiet: bool = False, groups=None, check_exact: int = 0
    ) -> np.ndarray:
        """Load the base model and tokenize every pair once; return the usable-pair mask.
        Sets ``format_`` and ``truncation_`` (what ``max_length`` cut; the audit records it).

        ``groups``: (n_pairs,) labels whose removal or addition each run's paired
        counterfactuals are of (``counterfactuals`` must be set); ``check_exact`` must be 0
        (no exact refit exists for a fine-tuned RM).
        """
        # lazy: torch, transformers load only when this runs
        from rmlens.rewards._packing import examples_truncation
        from rmlens.rewards._tuned_inputs import guide_features

        self._setup()
        self.examples_, self.kept_ = self._examples(pairs)
        self.format_ = self.base_.format
        self.truncation_ = examples_truncation(self.examples_, self.base_.max_length)
        self.bias_, self.groups_ = objective_inputs(self.config_, pairs, self.bias)
        self.guide_features_ = guide_features(self, pairs)  # before any run: the base weights
        self.pair_margin_ = pairs["margin"].to_numpy(float) if "margin" in pairs else None
        self.ids_ = pairs["id"].astype(str).to_numpy() if "id" in pairs else None
        self._prepare_refs([ex for ex, k in zip(self.examples_, self.kept_) if k])
        self.groups_codes_ = None
        if groups is not None:
            if not self.counterfactuals or check_exact:
                raise InputError(
                    f"{type(self).__name__}: paired counterfactuals need an explicit RM on pairs "
                    f"trained with an `objective` of {names_where('pair_logistic')}, and "
                    "`check_exact` 0"
                )
            self.groups_codes_ = group_codes(groups)
            self.margin_ = pairs["margin"].to_numpy(float) if "margin" in pairs else None
        return self.kept_

    def _train_best_lr(self, train_index, eval_index, cfg: TrainConfig, seed: int) -> list[dict]:
        """Train from the base weights once per learning rate of ``lr_grid`` (or ``lr``) and
        keep the weights with the lowest validation loss (a choice made on validation pairs
        only, never on the run's held-out pairs)."""
        # lazy: torch, transformers load only when this runs
        from rmlens.rewards._tuned_inputs import guide_record, guided_weights

        train = [self.examples_[i] for i in train_index]
        evals = [self.examples_[i] for i in eval_index] or None
        extras = {"extras": self._extras(train_index), "eval_extras": self._extras(eval_index)}
        if getattr(self, "guide_features_", None) is not None:
            weights, guide, _ = guided_weights(cfg, self.guide_features_, self.pair_margin_,
                                               self.groups_, train_index, eval_index)  # fmt: skip
            extras.update(weights=weights, guide=guide)
            self.run_record_ = {**guide_record(cfg, weights, guide),
                                **dropped_ids(self.ids_, train_index, weights)}
        return self._train_grid(train, evals, cfg.replace(seed=seed), extras)

    def _train_grid(
        self, train: list, evals: list | None, cfg: TrainConfig, extras: dict, *,
        checkpoint_dir=None, fingerprint: str = "", quiet: bool = True,
    ) -> list[dict]:
        """Train ``train`` from the base weights (``cfg.seed``) once per rate of ``lr_grid``
        (or ``lr``); keep the weights with the lowest validation loss on ``evals``. Each
        record of the history returned (the kept rate's) carries ``lr_chosen``.

        With a grid, each rate checkpoints in ``checkpoint_dir / lr-RATE`` and keeps its
        last checkpoint until the end, so a run stopped at any rate resumes where it was.
        """
        # lazy: torch, transformers load only when this runs
        from rmlens.progress import status
        from rmlens.rewards._base_model import load_trainable, trainable_state

        grid = cfg.lr_grid or (cfg.lr,)
        if len(grid) > 1 and not evals:
            raise InputError("`lr_grid` needs validation pairs: set `patience` > 0 (an "
                             "audit carves validation groups) or `eval_fraction` > 0")  # fmt: skip
        best = None
        for i, lr in enumerate(grid):
            folder = checkpoint_dir
            if folder is not None and len(grid) > 1:
                folder = Path(folder) / f"lr-{lr:g}"
            if not quiet and len(grid) > 1:
                status(f"learning rate {lr:g} ({i + 1} of {len(grid)}, the one with the lowest "
                       "evaluation loss is kept)")  # fmt: skip
            self._reset(cfg.seed)
            key = fingerprint if folder == checkpoint_dir else f"{fingerprint}-lr{lr:g}"
            history = self._train(train, cfg.replace(lr=lr), eval_examples=evals, quiet=quiet,
                                  checkpoint_dir=folder, fingerprint=key, **extras)
            loss = min((h["eval_loss"] for h in history if "eval_loss" in h), default=0.0)
            if best is None or loss < best[0]:
                state = trainable_state(self.net_) if len(grid) > 1 else None
                best = (loss, lr, state, history)
        if len(grid) > 1:
            load_trainable(self.net_, best[2])
        for record in best[3]:
            record["lr_chosen"] = best[1]
        return best[3]

    def fit_score(
        self, train_index: np.ndarray, *, seed: int, val_index: np.ndarray | None = None
    ) -> RunScores:
        """Train from the base weights on the pairs at ``train_index``; score every pair.

        ``val_index``: validation pairs (never trained on) evaluated each epoch, for
        ``patience``; without them ``eval_fraction`` of the training pairs is held out.
        """
        # lazy: torch, transformers load only when this runs
        from rmlens.rewards._nets import score_examples

        cfg = self.config_
        train_index = np.asarray(train_index, dtype=int)
        fit_index = train_index[self.kept_[train_index]]
        if val_index is not None and len(val_index):
            eval_index = np.asarray(val_index, dtype=int)
            eval_index = eval_index[self.kept_[eval_index]]
        else:
            fit_index, eval_index = self._split_eval(fit_index, seed)
        self.run_record_ = {}
        history = self._train_best_lr(fit_index, eval_index, cfg, seed)
        paired = None
        if getattr(self, "groups_codes_", None) is not None:
            start = time.perf_counter()
            r, paired = influence_scores(self.net_, self.examples_, self.kept_, self.runtime_,
                                         cfg, self.groups_codes_, fit_index, eval_index,
                                         margin=self.margin_)  # fmt: skip
            self.run_record_["influence_seconds"] = time.perf_counter() - start
        else:
            r = score_examples(self.net_, self.examples_, self.runtime_, batch_size=cfg.batch_size)
        r_c, r_r = r[:, 0], r[:, 1]
        seen = train_index if val_index is None else np.concatenate([train_index, val_index])
        held = np.setdiff1d(np.arange(len(r_c)), seen.astype(int))
        metrics = {
            f"train_{k}": v for k, v in reward_stats(r_c[train_index], r_r[train_index]).items()
        }
        metrics.update({f"test_{k}": v for k, v in reward_stats(r_c[held], r_r[held]).items()})
        metrics["loss"] = history[-1]["train_loss"] if history else float("nan")
        metrics["lr"] = history[-1].get("lr_chosen", cfg.lr) if history else cfg.lr
        metrics["epochs_trained"] = len(history)
        metrics.update(self.run_record_)
        if paired is None:
            return RunScores(r_c, r_r, metrics, self._make_rm())
        p, p_cf, lambdas = paired
        metrics.update(damping_grid=list(DAMPING), damping_l2=lambdas.tolist())
        return RunScores(r_c, r_r, metrics, self._make_rm(), p, p_cf)


def influence_scores(
    net,
    examples,
    kept: np.ndarray,
    runtime,
    config,
    groups: np.ndarray,
    fit_index: np.ndarray,
    eval_index: np.ndarray,
    *,
    margin: np.ndarray | None = None,
    damping: tuple[float, ...] = DAMPING,
    advance: Callable[[int], None] | None = None,
):
    """Rewards of every pair under a fine-tuned explicit RM, and its paired counterfactuals
    over a damping grid: Gauss-Newton influence through the trained parameters
    (``config.influence`` gauss-newton), or the score head's alone from the pooled hidden
    states (last-layer; ``rmlens.influence``).

    Parameters
    ----------
    net : ExplicitNet
        The trained network.
    examples : list of Example
        Every pair's tokenized example (``_packing.examples_of``).
    kept : ndarray of shape (n,), bool
        The usable pairs.
    runtime : Runtime
        Device and precision.
    config : TrainConfig
        The run's settings (``influence``, ``influence_blocks``, ``batch_size``, ``seed``,
        the objective's terms).
    groups : ndarray of shape (n,), int
        Group codes: a counterfactual removes or adds a whole group.
    fit_index, eval_index : ndarray of int
        The run's training pairs and its validation pairs (neither in nor out).
    margin : ndarray of shape (n,), optional
        The pairs' margins (with ``use_margin``).
    damping : tuple of float
        The damping grid, relative to the mean curvature.
    advance : callable, optional
        Called with the number of pairs whose gradients are done (a progress bar over the
        training and evaluation pairs, whose gradients the Gauss-Newton step reads).

    Returns
    -------
    r : ndarray of shape (n, 2)
        Rewards of chosen and rejected (NaN for unusable pairs).
    paired : tuple
        ``(p, p_cf, lambdas)``: sigmoid(r+ - r-) (n,), the counterfactual p (n, K), and the
        damping values in absolute terms (K,).
    """
    # lazy: torch, transformers load only when this runs
    from rmlens.influence import pair_gradients, reading_last
    from rmlens.rewards._fast import fused_layers
    from rmlens.rewards._nets import score_examples
    from rmlens.rewards._packing import length_batches

    cfg = config
    kept = np.asarray(kept, dtype=bool)
    offset, target = bt_terms(cfg, margin)
    if cfg.influence == "gauss-newton":
        inside, outside = inside_outside(len(kept), kept, fit_index, eval_index)
        rows = np.flatnonzero(inside | outside)  # the pairs a group's step moves
        r = np.full((len(kept), 2), np.nan)
        others = np.flatnonzero(kept & ~(inside | outside))  # validation: scored only
        if len(others):
            r[others] = score_examples(net, [examples[i] for i in others], runtime,
                                       batch_size=cfg.batch_size)[:, :2]  # fmt: skip
        todo = [examples[i] for i in rows]
        batches = length_batches([ex.packed_length for ex in todo], cfg.batch_size)
        reading = ExitStack()  # with influence_blocks: the last blocks' adapters and head only
        try:
            reading.enter_context(reading_last(net, cfg.influence_blocks or None))
        except ValueError as err:
            raise InputError(f"influence_blocks {cfg.influence_blocks}: {err}") from err
        with reading, fused_layers(net):
            r[rows], jac = pair_gradients(net, todo, runtime, batches=batches, seed=cfg.seed,
                                          advance=advance)  # fmt: skip
        d = np.nan_to_num(r[:, 0] - r[:, 1])
        p, p_cf = expit(d), np.full((len(d), len(damping)), np.nan)
        _, p_cf[rows], lambdas = gauss_newton_counterfactuals(
            jac, d[rows], groups[rows], inside[rows], outside[rows],
            offset=None if offset is None else offset[rows], target=target, damping=damping,
        )  # fmt: skip
    else:
        h = score_examples(
            net, examples, runtime, batch_size=cfg.batch_size, method="pooled"
        ).astype(np.float64)  # (n, 2, d); NaN for the unusable pairs
        h = np.nan_to_num(h)
        u = net.head.weight.detach().double().cpu().numpy()[0]
        r = h @ u + float(net.head.bias.detach())
        inside, outside = inside_outside(len(h), kept, fit_index, eval_index)
        p, p_cf, lambdas = last_layer_counterfactuals(
            h[:, 0] - h[:, 1], u, groups, inside, outside, offset=offset,
            target=target, damping=damping,
        )  # fmt: skip
    r[~kept] = np.nan
    p[~kept] = np.nan
    return r, (p, p_cf, lambdas)
