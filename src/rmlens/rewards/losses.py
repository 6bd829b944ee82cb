"""Every loss and training objective of a reward model (DESIGN.md section 2), one place.

Shapes: rewards and reward differences d = r+ - r- are (n_pairs,); ranking rewards are
(n_rankings, k), best first. Bradley-Terry is defined once (:func:`bt`); the public
:func:`bradley_terry_loss`, every objective and the fine-tuning loop's :func:`ranking_loss`
use it.

Objectives against shortcut memorization (beyond the paper) are losses on d. The bias-aware
ones read, per pair, the difference of shortcut features dphi = phi(chosen) - phi(rejected)
(length, compliance opener, model identity, refusal: ``rmlens.attribution.bias_features``
computes them), or the pair's group (``group_dro``).

- ``bt``: Bradley-Terry, -log sigmoid(d - m).
- ``label_smoothing``: (1 - eps) BT(d) + eps BT(-d).
- ``poe``: BT(d + w . dphi), w trained jointly; only d is the RM afterwards.
- ``reweight``: (1 - sigmoid(d_bias))^gamma BT(d), d_bias from a bias-only model.
- ``group_dro``: sum_g q_g BT_g(d), q moved toward the worst group.

Objectives guided by the audit (``rmlens.rewards._guided``) are per-pair weights c_i of
BT(d_i), computed before training: ``low_margin`` (the no-audit baseline), ``complementary``
and ``curate``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rmlens.rewards._config import BIAS_OBJECTIVES, WEIGHTED_OBJECTIVES, ObjectiveConfig
from rmlens.rewards._config import OBJECTIVE_NAMES as OBJECTIVES


def _flat(x: torch.Tensor) -> torch.Tensor:
    # (B, 1) margins against (B,) rewards would broadcast to (B, B): squeeze first.
    return x.reshape(-1)


def bt(d: torch.Tensor, margin: torch.Tensor | None = None) -> torch.Tensor:
    """Per-pair Bradley-Terry loss -log sigmoid(d - m), (n_pairs,) (Bradley & Terry 1952;
    margin as in Llama 2, Touvron et al. 2023)."""
    if margin is not None:
        d = d - margin
    return F.softplus(-d)  # == -log sigmoid(d - m)


def bradley_terry_loss(
    r_chosen: torch.Tensor, r_rejected: torch.Tensor, margin: torch.Tensor | None = None
) -> torch.Tensor:
    """mean(-log sigmoid(r+ - r- - m)) over pairs: ``bt`` of the reward differences.

    Parameters
    ----------
    r_chosen, r_rejected : torch.Tensor of shape (n,) or (n, 1)
        Rewards of the chosen and rejected responses.
    margin : torch.Tensor of shape (n,), optional
        Margins m subtracted from the differences.

    Returns
    -------
    torch.Tensor
        The mean loss, a scalar.
    """
    return bt(_flat(r_chosen) - _flat(r_rejected), None if margin is None else _flat(margin)).mean()


def centering_loss(r_chosen: torch.Tensor, r_rejected: torch.Tensor) -> torch.Tensor:
    """mean((r+ + r-)^2): keeps rewards centred on zero (Eisenstein et al. 2023).

    Parameters
    ----------
    r_chosen, r_rejected : torch.Tensor of shape (n,) or (n, 1)
        Rewards of the chosen and rejected responses.

    Returns
    -------
    torch.Tensor
        The mean penalty, a scalar.
    """
    return ((_flat(r_chosen) + _flat(r_rejected)) ** 2).mean()


def plackett_luce_loss(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Negative log-likelihood of rankings under Plackett-Luce (Plackett 1975).

    -log P = sum_j [ logsumexp(s_j..s_k) - s_j ], averaged over rankings; with k = 2 this is
    Bradley-Terry. ``scores`` is (n_rankings, k), each row sorted best first; ``mask``
    (n_rankings, k) marks real entries (rankings shorter than k are padded at the end).

    Parameters
    ----------
    scores : torch.Tensor of shape (n_rankings, k)
        Scores of each ranking's items, best first.
    mask : torch.Tensor of shape (n_rankings, k), bool, optional
        Real entries; default all.

    Returns
    -------
    torch.Tensor
        The mean negative log-likelihood, a scalar.
    """
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    masked = scores.masked_fill(~mask, float("-inf"))
    tail = torch.logcumsumexp(masked.flip(-1), dim=-1).flip(-1)  # logsumexp over s_j..s_k
    terms = (tail - scores).masked_fill(~mask, 0.0)
    return terms.sum(-1).mean()


def label_smoothing(d: torch.Tensor, eps: float, margin=None) -> torch.Tensor:
    """(1 - eps) * BT(d) + eps * BT(-d): each label is wrong with probability eps
    (conservative DPO, Mitchell 2023; label smoothing, Szegedy et al. 2016)."""
    return (1 - eps) * bt(d, margin) + eps * bt(-d, None if margin is None else -margin)


def poe(d_main: torch.Tensor, d_bias: torch.Tensor, margin=None) -> torch.Tensor:
    """BT(d_main + d_bias): a product of experts, p ~ sigmoid(d_main) * sigmoid(d_bias) in
    log-odds, so the main RM is pushed to explain what the bias-only expert cannot (Clark et
    al. 2019, He et al. 2019; ODIN's length head, Chen et al. 2024, is the case dphi = length)."""
    return bt(d_main + d_bias, margin)


def reweight_raw(d_bias: np.ndarray, gamma: float) -> np.ndarray:
    """(1 - sigmoid(d_bias))^gamma, before normalization."""
    return (1.0 - 1.0 / (1.0 + np.exp(-np.asarray(d_bias, dtype=float)))) ** gamma


def reweight_weights(d_bias: np.ndarray, gamma: float) -> np.ndarray:
    """w_i = (1 - sigmoid(d_bias_i))^gamma, normalized to mean 1: pairs the bias-only model
    already gets right count less (example reweighting, Utama et al. 2020; the focal form of
    Karimi Mahabadi et al. 2020)."""
    w = reweight_raw(d_bias, gamma)
    return w / w.mean() if len(w) and w.mean() > 0 else np.ones_like(w)


def dro_weights(q: torch.Tensor, group_loss: torch.Tensor, present, step: float) -> torch.Tensor:
    """One exponentiated-gradient step on the group weights: q_g <- q_g exp(step * L_g) for
    the groups in the batch, then q / sum(q) (Sagawa et al. 2020, Algorithm 1)."""
    q = q.clone()
    q[present] = q[present] * torch.exp(step * group_loss[present])
    return q / q.sum()


def fit_bias_model(dphi: np.ndarray, scale: np.ndarray, seed: int = 0) -> np.ndarray:
    """Weights w of the bias-only model p(chosen wins) = sigmoid(w . dphi / scale).

    Logistic regression without intercept on both orientations of every pair (dphi labelled
    1, -dphi labelled 0), so it is symmetric in chosen and rejected; L2 penalty C = 1.
    """
    from sklearn.linear_model import LogisticRegression

    z = dphi / scale
    if not len(z) or not np.any(z):
        return np.zeros(dphi.shape[1])
    x = np.concatenate([z, -z])
    y = np.r_[np.ones(len(z)), np.zeros(len(z))]
    model = LogisticRegression(fit_intercept=False, C=1.0, random_state=seed, max_iter=1000)
    return model.fit(x, y).coef_[0]


@dataclass
class PairExtras:
    """What an objective reads per training pair beyond d: margin, dphi, group."""

    margin: torch.Tensor | None = None  # (n,)
    dphi: torch.Tensor | None = None  # (n, k)
    group: torch.Tensor | None = None  # (n,) int64 codes

    def take(self, index) -> PairExtras:
        pick = lambda t: None if t is None else t[index]  # noqa: E731
        return PairExtras(pick(self.margin), pick(self.dphi), pick(self.group))

    def to(self, device) -> PairExtras:
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return PairExtras(move(self.margin), move(self.dphi), move(self.group))


def bias_scale(dphi: np.ndarray) -> np.ndarray:
    """Root mean square of each bias feature difference (1 where it is always 0): dphi is
    antisymmetric in chosen and rejected, so it is scaled, never centred."""
    rms = np.sqrt(np.mean(np.asarray(dphi, dtype=float) ** 2, axis=0))
    return np.where(rms > 0, rms, 1.0)


class Objective(nn.Module):
    """The training loss of an RM, with the state some objectives carry.

    Parameters
    ----------
    name : str
        One of ``OBJECTIVES``.
    smoothing : float
        eps of ``label_smoothing``.
    gamma : float
        Exponent of ``reweight``.
    dro_step : float
        Step size of the ``group_dro`` weights.
    train : PairExtras
        The training pairs' margin, dphi and group (``poe``, ``reweight``, ``group_dro``).
    seed : int
        Seed of the bias-only model (``reweight``).
    weights : ndarray of shape (n_train,), optional
        ``low_margin``, ``complementary``, ``curate``: the training pairs' loss weights
        (``rmlens.rewards._guided``), computed before training.
    guide : dict, optional
        How those weights were made (nested audit, margin source), for :meth:`describe`.

    Attributes
    ----------
    bias : nn.Linear or None
        ``poe``: w of the bias expert on dphi / scale (starts at the bias-only model's
        weights, trained with the RM, then dropped).
    weights_ : ndarray or None
        ``reweight`` and the audit-guided objectives: the per-pair weights of the training
        pairs.
    bias_coef_ : ndarray or None
        ``poe`` and ``reweight``: w of the bias-only model on dphi / scale, fitted on the
        training pairs alone.
    q : Tensor
        ``group_dro``: the group weights (sum 1).
    """

    def __init__(
        self,
        name: str = "bt",
        *,
        smoothing: float = 0.1,
        gamma: float = 1.0,
        dro_step: float = 0.01,
        train: PairExtras | None = None,
        seed: int = 0,
        weights: np.ndarray | None = None,
        guide: dict | None = None,
    ):
        super().__init__()
        if name not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {name!r}")
        self.name, self.smoothing, self.gamma, self.dro_step = name, smoothing, gamma, dro_step
        train = train or PairExtras()
        self.bias, self.weights_, self.bias_coef_ = None, None, None
        self.guide_ = guide or {}
        if name in WEIGHTED_OBJECTIVES and name != "reweight":
            if weights is None:
                raise ValueError(f"objective {name!r} needs the training pairs' `weights`")
            self.weights_ = np.array(weights, dtype=float)
        if name in BIAS_OBJECTIVES:
            if train.dphi is None:
                raise ValueError(f"objective {name!r} needs bias features (dphi) of its pairs")
            dphi = train.dphi.numpy()
            self.register_buffer("scale", torch.as_tensor(bias_scale(dphi), dtype=torch.float32))
            self.bias_coef_ = fit_bias_model(dphi, self.scale.numpy(), seed)
            if name == "poe":
                # warm start at the bias-only fit (Clark et al. 2019 train it first), then
                # trained jointly with the RM, as ODIN trains its length head
                self.bias = nn.Linear(dphi.shape[1], 1, bias=False)
                with torch.no_grad():
                    self.bias.weight.copy_(torch.as_tensor(self.bias_coef_)[None])
            else:
                self.weights_ = reweight_weights(self.d_bias_numpy(dphi), gamma)
        if name == "group_dro":
            if train.group is None:
                raise ValueError("objective 'group_dro' needs the group of every pair")
            n_groups = int(train.group.max()) + 1 if len(train.group) else 1
            self.register_buffer("q", torch.full((n_groups,), 1.0 / n_groups))

    @classmethod
    def from_config(cls, config: ObjectiveConfig, *, convex: bool = False,
                    train: PairExtras | None = None, seed: int = 0,
                    weights: np.ndarray | None = None, guide: dict | None = None) -> Objective:
        """The objective a config asks for (a ``HeadConfig`` or ``TrainConfig`` is one).

        Parameters
        ----------
        config : ObjectiveConfig
            Its ``objective``, ``smoothing``, ``gamma`` and ``dro_step`` are read.
        convex : bool, default False
            Whether the head is solved to its optimum (``group_dro``'s default step: per
            solve, else per batch).
        train, seed, weights, guide
            As in the constructor.
        """
        return cls(config.objective, smoothing=config.smoothing, gamma=config.gamma,
                   dro_step=config.dro_step_for(convex), train=train, seed=seed,
                   weights=weights, guide=guide)  # fmt: skip

    def d_bias_numpy(self, dphi: np.ndarray) -> np.ndarray:
        """The bias-only model's log-odds for ``reweight`` (numpy in, numpy out).

        Parameters
        ----------
        dphi : ndarray of shape (n, k)
            Shortcut feature differences phi(chosen) - phi(rejected).

        Returns
        -------
        ndarray of shape (n,)
            The log-odds.
        """
        return (np.asarray(dphi, dtype=float) / self.scale.cpu().numpy()) @ self.bias_coef_

    def per_pair(self, d: torch.Tensor, extras: PairExtras) -> torch.Tensor:
        """Per-pair loss (n,) of the objective's likelihood term.

        Parameters
        ----------
        d : torch.Tensor of shape (n,)
            Reward differences r+ - r-.
        extras : PairExtras
            The pairs' margins, bias features and groups.

        Returns
        -------
        torch.Tensor of shape (n,)
            Bradley-Terry, label smoothing or product-of-experts loss of each pair.
        """
        m = extras.margin
        if self.name == "label_smoothing":
            return label_smoothing(d, self.smoothing, m)
        if self.name == "poe":
            return poe(d, self.bias(extras.dphi / self.scale).squeeze(-1), m)
        return bt(d, m)

    def forward(self, d: torch.Tensor, extras: PairExtras, weight=None) -> torch.Tensor:
        """Training loss of a batch.

        Parameters
        ----------
        d : torch.Tensor of shape (n,)
            Reward differences r+ - r-.
        extras : PairExtras
            The batch's margins, bias features and groups.
        weight : torch.Tensor of shape (n,), optional
            The loss weights of the batch's pairs (``reweight`` and the audit-guided
            objectives).

        Returns
        -------
        torch.Tensor
            The scalar loss: the weighted mean for the weighted objectives, the q-weighted
            group losses for ``group_dro`` (whose q it updates in training mode), else the
            mean.
        """
        loss = self.per_pair(d, extras)
        if self.name in WEIGHTED_OBJECTIVES:
            return (weight * loss).mean()
        if self.name == "group_dro":
            group_loss, present = self._group_losses(loss, extras.group)
            if self.training:
                with torch.no_grad():
                    self.q.copy_(dro_weights(self.q, group_loss.detach(), present, self.dro_step))
            q = self.q * present
            return (q * group_loss).sum() / q.sum()
        return loss.mean()

    def _group_losses(self, loss, group) -> tuple[torch.Tensor, torch.Tensor]:
        n = len(self.q)
        inside = group < n  # validation groups unseen in training carry no weight
        total = loss.new_zeros(n).index_add(0, group[inside], loss[inside])
        count = loss.new_zeros(n).index_add(0, group[inside], torch.ones_like(loss[inside]))
        return total / count.clamp(min=1), count > 0

    @torch.no_grad()
    def validation_loss(self, d: torch.Tensor, extras: PairExtras) -> float:
        """What early stopping watches: the objective's likelihood term on validation pairs,
        weighted by the bias-only model for ``reweight``; the worst group's mean loss for
        ``group_dro`` (Sagawa et al. 2020 select on worst-group validation performance).

        Parameters
        ----------
        d : torch.Tensor of shape (n,)
            Reward differences of the validation pairs.
        extras : PairExtras
            Their margins, bias features and groups.

        Returns
        -------
        float
            The validation loss.
        """
        loss = self.per_pair(d, extras)
        if self.name == "reweight":
            w = reweight_weights(self.d_bias_numpy(extras.dphi.cpu().numpy()), self.gamma)
            return float((loss.new_tensor(w) * loss).mean())
        if self.name == "group_dro":
            codes = torch.unique(extras.group, return_inverse=True)[1]
            total = loss.new_zeros(int(codes.max()) + 1).index_add(0, codes, loss)
            count = torch.bincount(codes).to(loss.dtype)
            return float((total / count).max())
        return float(loss.mean())

    def describe(self) -> dict:
        """What the objective learned, for a run's metrics (JSON-ready).

        Returns
        -------
        dict
            ``objective`` and, where they apply, ``bias_weights``, the loss weights'
            summary (``weight_min``, ``weight_median``, ``weight_max``, ``weight_cv``,
            ``n_zero_weight``, ...), ``dro_q`` and ``dro_q_max``, and ``guide`` (how the
            audit-guided weights were made).
        """
        from rmlens.rewards._guided import weight_summary

        out: dict = {"objective": self.name}
        if self.bias is not None:
            out["bias_weights"] = (self.bias.weight.detach()[0] / self.scale).cpu().tolist()
        elif self.bias_coef_ is not None:
            out["bias_weights"] = (self.bias_coef_ / self.scale.cpu().numpy()).tolist()
        if self.weights_ is not None:
            out.update(weight_summary(self.weights_))
        if self.name == "group_dro":
            out["dro_q"] = self.q.cpu().tolist()
            out["dro_q_max"] = float(self.q.max())
        if self.guide_:
            out["guide"] = dict(self.guide_)
        return out


def ranking_loss(
    rewards: torch.Tensor,
    valid: torch.Tensor,
    margin: torch.Tensor,
    config,
    objective: Objective | None = None,
    extras: PairExtras | None = None,
    weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """The fine-tuning loss of (B, K) rewards, best first, under a ``TrainConfig``.

    Bradley-Terry mean(bt(r_0 - r_1, m)) for pairs (K = 2; margin with ``use_margin``), the
    pair ``objective`` (``extras``: the batch's bias features and groups, ``weight``: its
    ``reweight`` weights) or Plackett-Luce, plus reward centering
    coef * mean((sum_k r_k)^2) (== :func:`centering_loss` for pairs).
    """
    m = margin if config.use_margin else None
    d = rewards[:, 0] - rewards[:, 1]
    if config.loss == "plackett-luce":
        loss = plackett_luce_loss(rewards, valid)
    elif objective is None:
        loss = bt(d, m).mean()
    else:
        extras = extras or PairExtras()
        loss = objective(d.float(), PairExtras(m, extras.dphi, extras.group), weight)
    if config.center_coef:
        if rewards.shape[1] == 2:
            loss = loss + config.center_coef * centering_loss(rewards[:, 0], rewards[:, 1])
        else:
            loss = loss + config.center_coef * ((rewards * valid).sum(1) ** 2).mean()
    return loss
