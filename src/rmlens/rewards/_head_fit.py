"""How a reward head is fitted on frozen features: AdamW epochs with early stopping, or the
convex head's path of L2 penalties. ``rmlens.rewards.frozen.FrozenHeadTrainer`` calls
:func:`fit_head`; the result is a fitted :class:`~rmlens.rewards._head.HeadRM`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch

from rmlens._errors import InputError
from rmlens.rewards._convex import PATH_TOLERANCE, fit_logistic, one_blas_thread
from rmlens.rewards._head import HeadRM, RewardHead, pair_extras
from rmlens.rewards._metrics import pairwise_accuracy, reward_stats
from rmlens.rewards.losses import Objective, PairExtras, centering_loss, reweight_raw

if TYPE_CHECKING:
    from rmlens.rewards.frozen import HeadConfig

PATH_PATIENCE = 2  # logistic head: lambdas tried past the best before the path stops


def fit_head(
config: HeadConfig, x_chosen, x_rejected, margin=None, *, validation=None, bias=None,
groups=None,
) -> HeadRM:
    """Train on (n_pairs, d) chosen and rejected features; ``margin`` is (n_pairs,).

    ``bias`` (n_pairs, k): the shortcut feature differences phi(chosen) - phi(rejected)
    that ``poe`` and ``reweight`` read; ``groups`` (n_pairs,): the group labels that
    ``group_dro`` balances. ``validation`` is ``(x_chosen, x_rejected[, margin[, bias[,
    groups]]])`` of pairs that are never trained on: their loss after each epoch decides
    early stopping (``patience``) and which epoch's weights are kept, or, for the
    ``logistic`` head, which lambda of ``l2_grid`` is kept (without validation pairs:
    the largest). Only the training features set the head's standardization.
    """
    cfg = config.check()
    rm = HeadRM(cfg)
    xc, xr = _features(x_chosen, x_rejected, "x")
    if not len(xc):
        raise InputError("no training pairs to fit a head on (`x_chosen` has 0 rows)")
    extras = pair_extras(margin, bias, groups, cfg, "training pairs")
    val = None
    if validation is not None and len(validation[0]):
        vc, vr = _features(validation[0], validation[1], "validation")
        if vc.shape[1] != xc.shape[1]:
            raise ValueError(
                f"`validation` features have {vc.shape[1]} columns, training features "
                f"{xc.shape[1]}"
            )
        more = [*validation[2:], None, None, None][:3]
        val = (vc, vr, pair_extras(*more, cfg, "validation pairs"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small matrices: threads cost more than they save
    try:
        with torch.random.fork_rng(), one_blas_thread():
            torch.manual_seed(cfg.seed)
            head = _solve(rm, xc, xr, extras, val) if cfg.convex else _train(
                rm, xc, xr, extras, val
            )
    finally:
        torch.set_num_threads(threads)
    rm.head_ = head.eval()
    kept = rm.history_[rm.best_step_ - 1] if cfg.convex else rm.history_[-1]
    kept.update(reward_stats(rm.score_features(xc), rm.score_features(xr)))
    return rm


def _features(x_chosen, x_rejected, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    xc = torch.as_tensor(np.asarray(x_chosen), dtype=torch.float32)
    xr = torch.as_tensor(np.asarray(x_rejected), dtype=torch.float32)
    if xc.shape != xr.shape or xc.ndim != 2:
        raise ValueError(
            f"{name}: chosen {tuple(xc.shape)} and rejected {tuple(xr.shape)} features must be "
            "(n_pairs, d) arrays of one shape"
        )
    return xc, xr


def _scale(features: torch.Tensor) -> torch.Tensor:
    """Per-feature standard deviation of the training features (1 where a single row gives
    none), at least 1e-6."""
    if len(features) < 2:
        return torch.ones(features.shape[1])
    return features.std(0).clamp(min=1e-6)


@torch.inference_mode()
def _validate(head: RewardHead, objective: Objective, xc, xr, extras) -> dict[str, float]:
    """Validation loss (the objective's, see ``Objective.validation_loss``) and accuracy."""
    head.eval()
    rc, rr = head(xc), head(xr)
    return {
        "val_loss": objective.validation_loss(rc - rr, extras),
        "val_accuracy": pairwise_accuracy(rc.numpy(), rr.numpy()),
    }


def _start(rm: HeadRM, xc, xr, extras: PairExtras) -> tuple[RewardHead, Objective]:
    """A head standardized on the training features, and the objective of its pairs."""
    cfg = rm.config
    head = RewardHead(xc.shape[1], cfg)
    both = torch.cat([xc, xr])
    head.mean.copy_(both.mean(0))
    head.scale.copy_(_scale(both))
    rm.objective_ = Objective(
        cfg.objective, smoothing=cfg.smoothing, gamma=cfg.gamma, dro_step=cfg.dro_step,
        train=extras, seed=cfg.seed,
    )  # fmt: skip
    return head, rm.objective_

def _train(rm: HeadRM, xc, xr, extras: PairExtras, val) -> RewardHead:
    cfg = rm.config
    head, objective = _start(rm, xc, xr, extras)
    weight = None
    if objective.weights_ is not None:
        weight = torch.as_tensor(objective.weights_, dtype=torch.float32)
    params = [*head.parameters(), *objective.parameters()]  # poe: the bias expert's w
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    rm.history_ = []
    best_loss, best_state, bad = math.inf, None, 0
    rm.best_epoch_ = cfg.epochs
    n = len(xc)
    for epoch in range(1, cfg.epochs + 1):
        head.train()
        objective.train()
        order = torch.randperm(n)
        total = 0.0
        for start in range(0, n, cfg.batch_size):
            b = order[start : start + cfg.batch_size]
            rc, rr = head(xc[b]), head(xr[b])
            loss = objective(rc - rr, extras.take(b), None if weight is None else weight[b])
            if cfg.center_coef:
                loss = loss + cfg.center_coef * centering_loss(rc, rr)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(b)
        record = {"epoch": epoch, "loss": total / n}
        rm.history_.append(record)
        if val is None:
            continue
        objective.eval()
        record.update(_validate(head, objective, *val))
        if record["val_loss"] < best_loss:
            best_loss, bad, rm.best_epoch_ = record["val_loss"], 0, epoch
            best_state = {k: v.clone() for k, v in head.state_dict().items()}
        else:
            bad += 1
            if cfg.patience and bad >= cfg.patience:
                break  # early stopping: `patience` epochs without a lower validation loss
    rm.n_epochs_ = len(rm.history_)
    if best_state is not None and cfg.patience:
        head.load_state_dict(best_state)  # the best epoch's weights
    elif val is not None:
        rm.best_epoch_ = rm.n_epochs_  # patience 0: the last epoch is kept
    return head

def _solve(rm: HeadRM, xc, xr, extras: PairExtras, val) -> RewardHead:
    """The convex head: the optimum of L2-penalized logistic regression on z (see
    ``rmlens.rewards._convex``) for each lambda of ``l2_grid``, largest first, each
    warm-started at the last, until the validation loss has risen ``PATH_PATIENCE``
    times in a row; the lambda with the lowest validation loss is kept."""
    cfg = rm.config
    head, objective = _start(rm, xc, xr, extras)
    rm.scale_ = head.scale.double().numpy()
    if objective.name == "reweight":  # weights_ = raw / mean(raw) over the training pairs
        d_bias = objective.d_bias_numpy(extras.dphi.numpy())
        rm.reweight_norm_ = float(np.mean(reweight_raw(d_bias, cfg.gamma)))
    problem = rm._problem(xc, xr, extras)
    grid = sorted(cfg.l2_grid, reverse=True) if val is not None else [max(cfg.l2_grid)]
    rm.history_, w, best, rising = [], None, None, 0
    for lam in grid:
        w = fit_logistic(problem, lam, w0=w, tol=PATH_TOLERANCE)
        record = {"l2": lam, "loss": problem.loss(w, lam) / len(problem.z)}
        rm.history_.append(record)
        if val is None:
            continue
        _set_weights(rm, head, w)
        objective.eval()
        record.update(_validate(head, objective, *val))
        if best is None or record["val_loss"] < best[0]:
            best, rising = (record["val_loss"], lam, w), 0
        else:
            rising += 1
            if rising == PATH_PATIENCE:
                break  # the validation loss rose twice in a row: smaller lambdas fit more
    if best is None:
        best = (None, grid[0], w)
    _, rm.l2_, w = best
    rm.w_ = fit_logistic(problem, rm.l2_, w0=w)  # the kept lambda, solved to the end
    _set_weights(rm, head, rm.w_)
    rm.n_epochs_ = rm.best_epoch_ = None
    rm.best_step_ = [h["l2"] for h in rm.history_].index(rm.l2_) + 1
    return head

def _set_weights(rm: HeadRM, head: RewardHead, w: np.ndarray) -> None:
    """w on the standardized features (first d), and the poe bias expert's (the rest)."""
    d = head.mean.numel()
    with torch.no_grad():
        head.net.weight.copy_(torch.as_tensor(w[:d], dtype=torch.float32)[None])
        head.net.bias.zero_()
        if rm.objective_.bias is not None:
            rm.objective_.bias.weight.copy_(torch.as_tensor(w[d:], dtype=torch.float32)[None])


def describe_objective(objective, bias) -> dict:
    """A run's record of its objective; bias weights are named after the bias columns."""
    out = objective.describe()
    names = list(bias.columns) if hasattr(bias, "columns") else None  # a DataFrame
    if "bias_weights" in out and names:
        out["bias_weights"] = dict(zip(names, out["bias_weights"], strict=True))
    return out


def training_record(rm: HeadRM) -> dict:
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
