"""Explicit reward heads on frozen features: r(x, y) = w . h(x, y) + b (or a small MLP).

:class:`RewardHead` is the network; :class:`HeadRM` a fitted head (features in, rewards out:
``score_features``), as ``FrozenHeadTrainer`` fits it (``_head_fit``) and saves it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from rmlens._io import write_atomic, write_json
from rmlens._params import config_dict
from rmlens.influence import LogisticProblem
from rmlens.rewards._config import HeadConfig
from rmlens.rewards.losses import PairExtras
from rmlens.rewards.objectives import objective_of


def _margin(margin, cfg: HeadConfig) -> torch.Tensor | None:
    if not cfg.use_margin or margin is None:
        return None
    return torch.as_tensor(np.nan_to_num(np.asarray(margin, dtype=float)), dtype=torch.float32)


def pair_extras(margin, bias, groups, cfg: HeadConfig, name: str,
                need_groups: bool = True) -> PairExtras:  # fmt: skip
    """Margin, bias feature differences and group codes of one set of pairs."""
    dphi, objective = None, objective_of(cfg)
    if objective.reads_bias:
        if bias is None:
            raise ValueError(
                f"{name}: objective {cfg.objective!r} needs bias features: pass `bias`, the "
                "(n_pairs, k) differences phi(chosen) - phi(rejected), e.g. from "
                "rmlens.attribution.bias_features"
            )
        dphi = torch.as_tensor(np.asarray(bias, dtype=float), dtype=torch.float32)
    group = None
    if objective.group_column:
        if groups is None and need_groups:
            raise ValueError(f"{name}: objective {cfg.objective!r} needs `groups`, one per pair")
        if groups is not None:
            codes = np.unique(np.asarray(groups), return_inverse=True)[1].ravel()
            group = torch.as_tensor(codes)
    return PairExtras(_margin(margin, cfg), dphi, group)


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
    """A reward head fitted on frozen pair features: features (n, d) in, rewards (n,) out.

    ``FrozenHeadTrainer.fit_features`` (or ``fit``) fits one; ``HeadRM.load`` reads a saved
    one. To score texts, wrap it with its backbone: ``ExplicitHeadRM(backbone, head)``.

    Parameters
    ----------
    config : HeadConfig
        The config it is (or was) fitted with.

    Attributes
    ----------
    head_ : RewardHead
        The trained head (the best epoch's weights when validation pairs were given).
    objective_ : Objective
        The objective it was trained with (its learned state: the poe bias expert, DRO
        weights).
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
    """

    def __init__(self, config: HeadConfig):
        self.config = config

    def pair_problem(
        self, x_chosen, x_rejected, margin=None, bias=None, weight=None
    ) -> LogisticProblem:
        """The fitted ``logistic`` head's convex problem over any pairs: what its
        counterfactuals and refits read.

        Parameters
        ----------
        x_chosen, x_rejected : ndarray of shape (n, d)
            Features of the chosen and rejected responses.
        margin : ndarray of shape (n,), optional
            Preference strengths (margin offsets).
        bias : ndarray of shape (n, k), optional
            Shortcut feature differences (``poe``, ``reweight``).
        weight : ndarray of shape (n,), optional
            Loss weights of the pairs (``group_dro`` and the audit-guided objectives: the
            training pairs' own, 1 for the others, the training pairs' mean weight).

        Returns
        -------
        LogisticProblem
            The pairs' standardized differences z and the objective's weights, targets and
            offsets; an unfitted or non-logistic head is a RuntimeError.
        """
        if not hasattr(self, "w_"):
            raise RuntimeError("pair_problem needs a fitted head='logistic' HeadRM")
        extras = pair_extras(margin, bias, None, self.config, "pairs", need_groups=False)
        return self._problem(x_chosen, x_rejected, extras, weight)

    def _problem(self, x_chosen, x_rejected, extras: PairExtras, weight=None) -> LogisticProblem:
        """The convex head's pairs (float64): z = (h+ - h-) / scale with the training pairs'
        scale, the loss weights (the given ``weight``, else 1), the margin offsets, and the
        objective's own terms (``Objective.convex_terms``: poe's bias features, reweight's
        weights; ``Objective.target``: label smoothing's target)."""
        cfg, module = self.config, self.objective_
        xc, xr = (np.asarray(x, dtype=float) for x in (x_chosen, x_rejected))
        z = (xc - xr) / self.scale_
        n = len(z)
        c = np.ones(n) if weight is None else np.asarray(weight, dtype=float)
        z, c, penalty = module.objective.convex_terms(module, z, c, extras)
        o = np.zeros(n) if extras.margin is None else -extras.margin.double().numpy()
        return LogisticProblem(z, c, o, module.objective.target(cfg), penalty)

    def last_layer(self, x) -> tuple[np.ndarray, np.ndarray]:
        """What the head's last linear layer reads for features (n, d), and its weights.

        Parameters
        ----------
        x : array-like of shape (n, d)
            Backbone features.

        Returns
        -------
        phi : ndarray of shape (n, h)
            What the last layer reads (h = d for a linear head, the hidden units of an MLP
            head).
        u : ndarray of shape (h,)
            Its weights: the reward is u . phi + b.
        """
        if not hasattr(self, "head_"):
            raise RuntimeError("This HeadRM instance is not fitted yet. Call 'fit' first.")
        with torch.inference_mode():
            phi = self.head_.hidden(torch.as_tensor(np.asarray(x), dtype=torch.float32))
            return phi.double().numpy(), self.head_.last.weight.double().numpy()[0]

    def score_features(self, x) -> np.ndarray:
        """Rewards (n,) of features (n, d): the head alone, no backbone.

        Parameters
        ----------
        x : array-like of shape (n, d)
            Backbone features.

        Returns
        -------
        ndarray of shape (n,)
            The rewards; an unfitted head is a RuntimeError.
        """
        if not hasattr(self, "head_"):
            raise RuntimeError("This HeadRM instance is not fitted yet. Call 'fit' first.")
        with torch.inference_mode():
            return self.head_(torch.as_tensor(np.asarray(x), dtype=torch.float32)).numpy()

    def save(self, path: str | Path) -> Path:
        """Write ``head.safetensors`` and ``head_config.json`` into the folder ``path``.

        Parameters
        ----------
        path : str or Path
            The folder.

        Returns
        -------
        Path
            ``path``.
        """
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
        """Read a folder written by :meth:`save`.

        Parameters
        ----------
        path : str or Path
            The folder.

        Returns
        -------
        HeadRM
            The fitted head.
        """

        path = Path(path)
        saved = json.loads((path / "head_config.json").read_text())
        dim = saved.pop("dim")
        rm = cls(HeadConfig.from_dict(saved))
        head = RewardHead(dim, rm.config)
        head.load_state_dict(load_file(str(path / "head.safetensors")))
        rm.head_ = head.eval()
        return rm
