"""Explicit reward heads on frozen features: r(x, y) = w . h(x, y) + b (or a small MLP)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from rmlens._io import write_atomic, write_json
from rmlens._params import config_dict
from rmlens.rewards._config import HeadConfig
from rmlens.rewards._convex import (
    PATH_TOLERANCE,
    LogisticProblem,
    fit_logistic,
    one_blas_thread,
)
from rmlens.rewards._losses import centering_loss
from rmlens.rewards._metrics import pairwise_accuracy, reward_stats
from rmlens.rewards._objectives import BIAS_OBJECTIVES, Objective, PairExtras, reweight_raw

PATH_PATIENCE = 2  # logistic head: lambdas tried past the best before the path stops


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


def _margin(margin, cfg: HeadConfig) -> torch.Tensor | None:
    if not cfg.use_margin or margin is None:
        return None
    return torch.as_tensor(np.nan_to_num(np.asarray(margin, dtype=float)), dtype=torch.float32)


def _extras(margin, bias, groups, cfg: HeadConfig, name: str) -> PairExtras:
    """Margin, bias feature differences and group codes of one set of pairs."""
    dphi = None
    if cfg.objective in BIAS_OBJECTIVES:
        if bias is None:
            raise ValueError(
                f"{name}: objective {cfg.objective!r} needs bias features: pass bias= "
                "(n_pairs, k) differences phi(chosen) - phi(rejected), e.g. from "
                "rmlens.attribution.bias_features"
            )
        dphi = torch.as_tensor(np.asarray(bias, dtype=float), dtype=torch.float32)
    group = None
    if cfg.objective == "group_dro":
        if groups is None:
            raise ValueError(f"{name}: objective 'group_dro' needs the group of every pair")
        group = torch.as_tensor(np.unique(np.asarray(groups), return_inverse=True)[1].ravel())
    return PairExtras(_margin(margin, cfg), dphi, group)


@torch.inference_mode()
def _validate(head: RewardHead, objective: Objective, xc, xr, extras) -> dict[str, float]:
    """Validation loss (the objective's, see ``Objective.validation_loss``) and accuracy."""
    head.eval()
    rc, rr = head(xc), head(xr)
    return {
        "val_loss": objective.validation_loss(rc - rr, extras),
        "val_accuracy": pairwise_accuracy(rc.numpy(), rr.numpy()),
    }


class RewardHead(nn.Module):
    """Standardize the features, then a linear map or a one-hidden-layer MLP to a scalar."""

    def __init__(self, dim: int, config: HeadConfig):
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("scale", torch.ones(dim))
        self.drop = nn.Dropout(config.dropout)
        if config.head in ("linear", "logistic"):
            self.net = nn.Linear(dim, 1)
        else:
            self.net = nn.Sequential(
                nn.Linear(dim, config.hidden_dim), nn.GELU(), nn.Linear(config.hidden_dim, 1)
            )
        nn.init.zeros_(self.last.weight)  # every pair starts at r+ - r- = 0: no reward offsets
        nn.init.zeros_(self.last.bias)

    @property
    def last(self) -> nn.Linear:
        return self.net if isinstance(self.net, nn.Linear) else self.net[-1]

    def hidden(self, h: torch.Tensor) -> torch.Tensor:
        """What the last linear layer reads: the standardized features (linear head) or the
        MLP's hidden units, (B, h)."""
        z = self.drop((h - self.mean) / self.scale)  # (B, d)
        return z if isinstance(self.net, nn.Linear) else self.net[:-1](z)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.last(self.hidden(h)).squeeze(-1)  # (B,)


class HeadRM:
    """Explicit reward model: a head trained on frozen pair features with its objective (bt
    by default, see ``rmlens.rewards._objectives``).

    Parameters
    ----------
    config : HeadConfig, optional

    Attributes
    ----------
    head_ : RewardHead
        The trained head (the best epoch's weights when validation pairs were given).
    history_ : list of dict
        Metrics per epoch: ``loss`` (training) and, with validation pairs, ``val_loss``
        and ``val_accuracy``; the last entry also has ``reward_*`` of the training pairs.
    best_epoch_ : int
        The epoch (1-based) whose weights were kept: the lowest validation loss, or the
        last epoch without validation pairs.
    n_epochs_ : int
        Epochs trained (fewer than ``epochs`` when training stopped early); None for the
        ``logistic`` head, which is solved, not trained by epochs.
    l2_, w_ : float, ndarray of shape (d,) or (d + k,)
        ``logistic`` head: the lambda kept, and the optimum on the standardized features
        (then the poe bias expert's k weights); ``history_`` has one entry per lambda tried
        (``l2``, ``loss``, ``val_loss``) and ``best_step_`` is the kept entry (1-based).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> xc, xr = rng.normal(1, 1, (50, 8)), rng.normal(0, 1, (50, 8))
    >>> rm = HeadRM(HeadConfig(epochs=5)).fit(xc, xr)
    >>> rm.score(xc).shape
    (50,)
    >>> rm = HeadRM(HeadConfig(epochs=50, patience=3)).fit(xc[:40], xr[:40],
    ...                                                    validation=(xc[40:], xr[40:]))
    >>> rm.best_epoch_ <= rm.n_epochs_ <= 50
    True
    >>> rm = HeadRM(HeadConfig(head="logistic")).fit(xc[:40], xr[:40],
    ...                                              validation=(xc[40:], xr[40:]))
    >>> rm.l2_ in HeadConfig().l2_grid
    True
    """

    def __init__(self, config: HeadConfig | None = None):
        self.config = config or HeadConfig()

    def get_params(self) -> dict:
        return {"config": self.config}

    def fit(
        self, x_chosen, x_rejected, margin=None, *, validation=None, bias=None, groups=None
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
        cfg = self.config.check()
        xc, xr = _features(x_chosen, x_rejected, "x")
        extras = _extras(margin, bias, groups, cfg, "training pairs")
        val = None
        if validation is not None and len(validation[0]):
            vc, vr = _features(validation[0], validation[1], "validation")
            if vc.shape[1] != xc.shape[1]:
                raise ValueError(
                    f"validation features have {vc.shape[1]} columns, training features "
                    f"{xc.shape[1]}"
                )
            more = [*validation[2:], None, None, None][:3]
            val = (vc, vr, _extras(*more, cfg, "validation pairs"))
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # small matrices: threads cost more than they save
        try:
            with torch.random.fork_rng(), one_blas_thread():
                torch.manual_seed(cfg.seed)
                head = self._solve(xc, xr, extras, val) if cfg.convex else self._train(
                    xc, xr, extras, val
                )
        finally:
            torch.set_num_threads(threads)
        self.head_ = head.eval()
        kept = self.history_[self.best_step_ - 1] if cfg.convex else self.history_[-1]
        kept.update(reward_stats(self.score(xc), self.score(xr)))
        return self

    def _start(self, xc, xr, extras: PairExtras) -> tuple[RewardHead, Objective]:
        """A head standardized on the training features, and the objective of its pairs."""
        cfg = self.config
        head = RewardHead(xc.shape[1], cfg)
        both = torch.cat([xc, xr])
        head.mean.copy_(both.mean(0))
        head.scale.copy_(_scale(both))
        self.objective_ = Objective(
            cfg.objective, smoothing=cfg.smoothing, gamma=cfg.gamma, dro_step=cfg.dro_step,
            train=extras, seed=cfg.seed,
        )  # fmt: skip
        return head, self.objective_

    def _train(self, xc, xr, extras: PairExtras, val) -> RewardHead:
        cfg = self.config
        head, objective = self._start(xc, xr, extras)
        weight = None
        if objective.weights_ is not None:
            weight = torch.as_tensor(objective.weights_, dtype=torch.float32)
        params = [*head.parameters(), *objective.parameters()]  # poe: the bias expert's w
        opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.history_ = []
        best_loss, best_state, bad = math.inf, None, 0
        self.best_epoch_ = cfg.epochs
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
            self.history_.append(record)
            if val is None:
                continue
            objective.eval()
            record.update(_validate(head, objective, *val))
            if record["val_loss"] < best_loss:
                best_loss, bad, self.best_epoch_ = record["val_loss"], 0, epoch
                best_state = {k: v.clone() for k, v in head.state_dict().items()}
            else:
                bad += 1
                if cfg.patience and bad >= cfg.patience:
                    break  # early stopping: `patience` epochs without a lower validation loss
        self.n_epochs_ = len(self.history_)
        if best_state is not None and cfg.patience:
            head.load_state_dict(best_state)  # the best epoch's weights
        elif val is not None:
            self.best_epoch_ = self.n_epochs_  # patience 0: the last epoch is kept
        return head

    def _solve(self, xc, xr, extras: PairExtras, val) -> RewardHead:
        """The convex head: the optimum of L2-penalized logistic regression on z (see
        ``rmlens.rewards._convex``) for each lambda of ``l2_grid``, largest first, each
        warm-started at the last, until the validation loss has risen ``PATH_PATIENCE``
        times in a row; the lambda with the lowest validation loss is kept."""
        cfg = self.config
        head, objective = self._start(xc, xr, extras)
        self.scale_ = head.scale.double().numpy()
        if objective.name == "reweight":  # weights_ = raw / mean(raw) over the training pairs
            d_bias = objective.d_bias_numpy(extras.dphi.numpy())
            self.reweight_norm_ = float(np.mean(reweight_raw(d_bias, cfg.gamma)))
        problem = self._problem(xc, xr, extras)
        grid = sorted(cfg.l2_grid, reverse=True) if val is not None else [max(cfg.l2_grid)]
        self.history_, w, best, rising = [], None, None, 0
        for lam in grid:
            w = fit_logistic(problem, lam, w0=w, tol=PATH_TOLERANCE)
            record = {"l2": lam, "loss": problem.loss(w, lam) / len(problem.z)}
            self.history_.append(record)
            if val is None:
                continue
            self._set_weights(head, w)
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
        _, self.l2_, w = best
        self.w_ = fit_logistic(problem, self.l2_, w0=w)  # the kept lambda, solved to the end
        self._set_weights(head, self.w_)
        self.n_epochs_ = self.best_epoch_ = None
        self.best_step_ = [h["l2"] for h in self.history_].index(self.l2_) + 1
        return head

    def _set_weights(self, head: RewardHead, w: np.ndarray) -> None:
        """w on the standardized features (first d), and the poe bias expert's (the rest)."""
        d = head.mean.numel()
        with torch.no_grad():
            head.net.weight.copy_(torch.as_tensor(w[:d], dtype=torch.float32)[None])
            head.net.bias.zero_()
            if self.objective_.bias is not None:
                self.objective_.bias.weight.copy_(torch.as_tensor(w[d:], dtype=torch.float32)[None])

    def pair_problem(self, x_chosen, x_rejected, margin=None, bias=None) -> LogisticProblem:
        """The fitted ``logistic`` head's convex problem over any pairs (features (n, d),
        margin (n,), bias (n, k)): what its counterfactuals and refits read."""
        if not hasattr(self, "w_"):
            raise RuntimeError("pair_problem needs a fitted head='logistic' HeadRM")
        extras = _extras(margin, bias, None, self.config, "pairs")
        return self._problem(x_chosen, x_rejected, extras)

    def _problem(self, x_chosen, x_rejected, extras: PairExtras) -> LogisticProblem:
        """The convex head's pairs (float64): z = (h+ - h-) / scale with the training pairs'
        scale, the poe bias features dphi / scale appended, the reweight weights (the
        bias-only model's, normalized by the training pairs' mean), the label_smoothing
        target and the margin offsets."""
        cfg, objective = self.config, self.objective_
        xc, xr = (np.asarray(x, dtype=float) for x in (x_chosen, x_rejected))
        z = (xc - xr) / self.scale_
        n = len(z)
        if objective.name == "poe":
            z = np.hstack([z, extras.dphi.double().numpy() / objective.scale.double().numpy()])
        c = np.ones(n)
        if objective.name == "reweight":
            d_bias = objective.d_bias_numpy(extras.dphi.numpy())
            c = reweight_raw(d_bias, cfg.gamma) / self.reweight_norm_
        o = np.zeros(n) if extras.margin is None else -extras.margin.double().numpy()
        t = 1.0 - cfg.smoothing if objective.name == "label_smoothing" else 1.0
        return LogisticProblem(z, c, o, t)

    def last_layer(self, x) -> tuple[np.ndarray, np.ndarray]:
        """What the head's last linear layer reads for features (n, d), and its weights:
        phi (n, h) and u (h,), so that the reward is u . phi + b (h = d for a linear head,
        the hidden units of an MLP head)."""
        if not hasattr(self, "head_"):
            raise RuntimeError("This HeadRM instance is not fitted yet. Call 'fit' first.")
        with torch.inference_mode():
            phi = self.head_.hidden(torch.as_tensor(np.asarray(x), dtype=torch.float32))
            return phi.double().numpy(), self.head_.last.weight.double().numpy()[0]

    def score(self, x) -> np.ndarray:
        """Rewards (n,) of features (n, d)."""
        if not hasattr(self, "head_"):
            raise RuntimeError("This HeadRM instance is not fitted yet. Call 'fit' first.")
        with torch.inference_mode():
            return self.head_(torch.as_tensor(np.asarray(x), dtype=torch.float32)).numpy()

    def save(self, path: str | Path) -> Path:
        """Write ``head.safetensors`` and ``head_config.json`` into the folder ``path``."""
        path = Path(path)
        state = {k: v.contiguous() for k, v in self.head_.state_dict().items()}
        write_atomic(path / "head.safetensors", lambda tmp: save_file(state, str(tmp)))
        write_json(
            {**config_dict(self.config), "dim": int(self.head_.mean.numel())},
            path / "head_config.json",
        )
        return path

    @classmethod
    def load(cls, path: str | Path) -> HeadRM:
        path = Path(path)
        saved = json.loads((path / "head_config.json").read_text())
        dim = saved.pop("dim")
        rm = cls(HeadConfig.from_dict(saved))
        head = RewardHead(dim, rm.config)
        head.load_state_dict(load_file(str(path / "head.safetensors")))
        rm.head_ = head.eval()
        return rm
