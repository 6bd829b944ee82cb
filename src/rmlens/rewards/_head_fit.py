"""How a reward head is fitted on frozen features: AdamW epochs with early stopping, or the
convex head's path of L2 penalties. ``rmlens.rewards.frozen.FrozenHeadTrainer`` calls
:func:`fit_head`; the result is a fitted :class:`~rmlens.rewards._head.HeadRM`.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from rmlens._errors import InputError
from rmlens.influence import (
    PATH_TOLERANCE,
    fit_logistic,
    one_blas_thread,
)
from rmlens.rewards._config import HeadConfig
from rmlens.rewards._guided import margin_quantile, nested_audit
from rmlens.rewards._head import HeadRM, RewardHead, pair_extras
from rmlens.rewards._metrics import pairwise_accuracy, reward_stats
from rmlens.rewards.losses import ObjectiveModule, PairExtras, centering_loss, objective_activity
from rmlens.rewards.objectives import objective_of

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
            weights, guide = None, None
            if objective_of(cfg).frozen_weights:
                weights, guide, _ = _guide(cfg, xc, xr, margin, extras, val)
            _start(rm, xc, xr, extras, weights, guide)
            head = _solve(rm, xc, xr, extras, val) if cfg.convex else _train(
                rm, xc, xr, extras, val
            )
    finally:
        torch.set_num_threads(threads)
    rm.head_ = head.eval()
    kept = rm.history_[rm.best_step_ - 1] if cfg.convex else rm.history_[-1]
    kept.update(reward_stats(rm.score_features(xc), rm.score_features(xr)))
    rm.activity_ = objective_activity(rm.objective_, cfg, extras)
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
def _validate(head: RewardHead, objective: ObjectiveModule, xc, xr, extras) -> dict[str, float]:
    """Validation loss (the objective's, see ``Objective.validation_loss``) and accuracy."""
    head.eval()
    rc, rr = head(xc), head(xr)
    return {
        "val_loss": objective.validation_loss(rc - rr, extras),
        "val_accuracy": pairwise_accuracy(rc.numpy(), rr.numpy()),
    }


def _start(rm: HeadRM, xc, xr, extras: PairExtras, weights=None, guide=None) -> None:
    """A head standardized on the training features (``rm.head_``), and the objective of
    its pairs (``rm.objective_``)."""
    cfg = rm.config
    head = RewardHead(xc.shape[1], cfg)
    both = torch.cat([xc, xr])
    head.mean.copy_(both.mean(0))
    head.scale.copy_(_scale(both))
    rm.head_ = head
    rm.objective_ = ObjectiveModule.from_config(cfg, convex=cfg.convex, train=extras, seed=cfg.seed,
                                          weights=weights, guide=guide)  # fmt: skip


def loss_weights(config, x_chosen, x_rejected, margin=None, groups=None, *,
                 validation=None) -> tuple[np.ndarray, dict, dict]:  # fmt: skip
    """The loss weights of ``low_margin``, ``complementary`` or ``curate`` for pairs with
    frozen features (n, d): what a fine-tuned RM of that objective trains with.

    ``config``: a ``HeadConfig`` or ``TrainConfig`` (its objective's fields are read);
    ``groups`` (n,): the nested audit's groups; ``validation``: ``(x_chosen, x_rejected[,
    margin])`` of pairs never trained on, which choose the nested audit's lambda. Returns
    the weights (n,), how they were made (JSON-ready) and the per-pair ``tm``, ``tg`` and
    ``q`` (margin quantile) behind them (``tm``, ``tg`` NaN for ``low_margin``).
    """

    fields = ("objective", "use_margin", "gamma", "guide_folds", "curate_weight", "seed")
    cfg = HeadConfig(head="logistic", **{k: getattr(config, k) for k in fields}).check()
    xc, xr = _features(x_chosen, x_rejected, "x")
    extras = pair_extras(margin, None, groups, cfg, "pairs")
    val = None
    if validation is not None and len(validation[0]):
        vc, vr = _features(validation[0], validation[1], "validation")
        more = validation[2] if len(validation) > 2 else None
        val = (vc, vr, pair_extras(more, None, None, cfg, "validation", need_groups=False))
    with one_blas_thread():
        return _guide(cfg, xc, xr, margin, extras, val)


def _guide(cfg: HeadConfig, xc, xr, margin, extras: PairExtras, val) -> tuple:
    """The training pairs' loss weights of ``low_margin``, ``complementary`` and ``curate``
    (``rmlens.rewards._guided``), how they were made, and the per-pair figures behind them.

    A Bradley-Terry logistic head on the training pairs (lambda chosen from ``l2_grid`` by
    the validation pairs, as the run's own head) gives the model margin where the data has
    none, and the lambda of the nested audit.
    """

    grid = cfg.l2_grid if cfg.convex else HeadConfig.__dataclass_fields__["l2_grid"].default
    bt = HeadRM(HeadConfig(head="logistic", use_margin=cfg.use_margin, l2_grid=grid))
    plain = PairExtras(extras.margin)
    _start(bt, xc, xr, plain)
    _solve(bt, xc, xr, plain, None if val is None else (*val[:2], PairExtras(val[2].margin)))
    raw = None if margin is None else np.asarray(margin, dtype=float)
    from_data = raw is not None and bool(np.isfinite(raw).all())
    if not from_data:
        raw = bt.score_features(xc) - bt.score_features(xr)
    guide = {"margin_from": "data" if from_data else "model", "l2": float(bt.l2_)}
    per_pair = {"q": margin_quantile(raw), "tm": np.full(len(raw), np.nan),
                "tg": np.full(len(raw), np.nan)}  # fmt: skip
    objective = objective_of(cfg)
    if not objective.nested_audit:
        return objective.pair_weights(cfg, per_pair["q"], None, None, raw), guide, per_pair
    codes = extras.group.numpy()
    tm, tg = nested_audit(bt._problem(xc, xr, plain), bt.l2_, codes, cfg.guide_folds, cfg.seed)
    per_pair.update(tm=tm, tg=tg)
    guide.update(folds=int(min(cfg.guide_folds, len(np.unique(codes)))),
                 tm_mean=float(tm.mean()), tg_mean=float(tg.mean()),
                 cm_mean=float((tm - tg).mean()), n_not_learned=int((tm < 0.5).sum()))  # fmt: skip
    return objective.pair_weights(cfg, per_pair["q"], tm, tg, raw), guide, per_pair


def _train(rm: HeadRM, xc, xr, extras: PairExtras, val) -> RewardHead:
    cfg = rm.config
    head, objective = rm.head_, rm.objective_
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
    ``rmlens.influence``) for each lambda of ``l2_grid``, largest first, each
    warm-started at the last, until the validation loss has risen ``PATH_PATIENCE``
    times in a row; the lambda with the lowest validation loss is kept."""
    cfg = rm.config
    head, module = rm.head_, rm.objective_
    objective = module.objective
    rm.scale_ = head.scale.double().numpy()
    objective.convex_start(module, extras)
    problem = rm._problem(xc, xr, extras, module.weights_)
    codes = None if extras.group is None else extras.group.numpy()
    fit = objective.convex_fit(module, codes) or (
        lambda p, lam, w0, tol: fit_logistic(p, lam, w0=w0, tol=tol))  # fmt: skip
    grid = sorted(cfg.l2_grid, reverse=True) if val is not None else [max(cfg.l2_grid)]
    rm.history_, w, best, rising = [], None, None, 0
    for lam in grid:
        w = fit(problem, lam, w, PATH_TOLERANCE)
        record = {"l2": lam, "loss": problem.loss(w, lam) / len(problem.z)}
        rm.history_.append(record)
        if val is None:
            continue
        _set_weights(rm, head, w)
        module.eval()
        record.update(_validate(head, module, *val))
        if best is None or record["val_loss"] < best[0]:
            state = objective.snapshot(module)
            best, rising = (record["val_loss"], lam, w, problem.c.copy(), state), 0
        else:
            rising += 1
            if rising == PATH_PATIENCE:
                break  # the validation loss rose twice in a row: smaller lambdas fit more
    if best is None:
        best = (None, grid[0], w, problem.c.copy(), objective.snapshot(module))
    _, rm.l2_, w, problem.c, state = best
    objective.restore(module, state)  # group_dro: the group weights of the kept lambda
    rm.w_ = fit_logistic(problem, rm.l2_, w0=w)  # the kept lambda and weights, to the end
    rm.weight_ = problem.c  # the training pairs' loss weights c (their counterfactuals')
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
