"""The losses of a reward model (DESIGN.md section 2), and the module an objective trains in.

Shapes: rewards and reward differences d = r+ - r- are (n_pairs,); ranking rewards are
(n_rankings, k), best first. Bradley-Terry is defined once (``objectives.bt``); the public
:func:`bradley_terry_loss`, every objective and the fine-tuning loop's :func:`ranking_loss`
use it.

The objectives themselves (bt, label_smoothing, poe, reweight, group_dro and the
audit-guided ``low_margin``, ``complementary``, ``curate``), one class each, are in
``rmlens.rewards.objectives``; :class:`ObjectiveModule` holds one objective's training state
(the poe bias expert, the group_dro weights, loss weights) and asks its class for the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from rmlens.rewards._config import ObjectiveConfig
from rmlens.rewards.objectives import OBJECTIVES, bt, objective_of

__all__ = ["OBJECTIVES", "ObjectiveModule", "PairExtras", "bradley_terry_loss", "bt",
           "centering_loss", "plackett_luce_loss", "ranking_loss"]  # fmt: skip


def _flat(x: torch.Tensor) -> torch.Tensor:
    # (B, 1) margins against (B,) rewards would broadcast to (B, B): squeeze first.
    return x.reshape(-1)


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


class ObjectiveModule(nn.Module):
    """One objective in training: its settings and state, its losses from its class
    (:mod:`rmlens.rewards.objectives`).

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
        Seed of the bias-only model (``poe``, ``reweight``).
    weights : ndarray of shape (n_train,), optional
        ``low_margin``, ``complementary``, ``curate``: the training pairs' loss weights
        (``rmlens.rewards._guided``), computed before training.
    guide : dict, optional
        How those weights were made (nested audit, margin source), for :meth:`describe`.

    Attributes
    ----------
    objective : Objective
        The objective's class instance, which every loss and check asks.
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
        self.objective = objective_of(name)
        self.name, self.smoothing, self.gamma, self.dro_step = name, smoothing, gamma, dro_step
        self.bias, self.weights_, self.bias_coef_ = None, None, None
        self.guide_ = guide or {}
        self.objective.setup(self, train or PairExtras(), seed, weights)

    @classmethod
    def from_config(cls, config: ObjectiveConfig, *, convex: bool = False,
                    train: PairExtras | None = None, seed: int = 0,
                    weights: np.ndarray | None = None, guide: dict | None = None
                    ) -> ObjectiveModule:  # fmt: skip
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

        Returns
        -------
        ObjectiveModule
        """
        return cls(config.objective, smoothing=config.smoothing, gamma=config.gamma,
                   dro_step=config.dro_step_for(convex), train=train, seed=seed,
                   weights=weights, guide=guide)  # fmt: skip

    def d_bias_numpy(self, dphi: np.ndarray) -> np.ndarray:
        """The bias-only model's log-odds (numpy in, numpy out; ``poe``, ``reweight``).

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
            Its class's :meth:`~rmlens.rewards.objectives.Objective.per_pair`.
        """
        return self.objective.per_pair(self, d, extras)

    def forward(self, d: torch.Tensor, extras: PairExtras, weight=None) -> torch.Tensor:
        """Training loss of a batch.

        Parameters
        ----------
        d : torch.Tensor of shape (n,)
            Reward differences r+ - r-.
        extras : PairExtras
            The batch's margins, bias features and groups.
        weight : torch.Tensor of shape (n,), optional
            The loss weights of the batch's pairs (the ``weighted`` objectives).

        Returns
        -------
        torch.Tensor
            The scalar loss (the class's
            :meth:`~rmlens.rewards.objectives.Objective.reduce`).
        """
        return self.objective.reduce(self, self.per_pair(d, extras), extras, weight)

    @torch.no_grad()
    def validation_loss(self, d: torch.Tensor, extras: PairExtras) -> float:
        """What early stopping watches (the class's
        :meth:`~rmlens.rewards.objectives.Objective.validation_loss`).

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
        return self.objective.validation_loss(self, self.per_pair(d, extras), extras)

    def describe(self) -> dict:
        """What the objective learned, for a run's metrics (JSON-ready; the class's
        :meth:`~rmlens.rewards.objectives.Objective.record`).

        Returns
        -------
        dict
        """
        return self.objective.record(self)


def ranking_loss(
    rewards: torch.Tensor,
    valid: torch.Tensor,
    margin: torch.Tensor,
    config,
    objective: ObjectiveModule | None = None,
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


# What a run's objective did: whether its mechanism acted on the training pairs, and the
# run's record of the objective (DESIGN.md section 2: a run whose mechanism stayed inactive
# says so); the checks themselves are each objective's (``rmlens.rewards.objectives``)
def objective_activity(module: ObjectiveModule, cfg, extras: PairExtras | None) -> dict:
    """Whether the objective's mechanism acted on the run's training pairs (``active``),
    and in words why not (``why``: ``Objective.inactive_why``)."""
    why = module.objective.inactive_why(module, cfg, extras)
    return {"active": why is None, "why": why}


def describe_objective(objective, bias, activity: dict | None = None) -> dict:
    """A run's record of its objective; bias weights are named after the bias columns;
    ``objective_active`` and ``objective_inactive_why`` from :func:`objective_activity`."""
    out = objective.describe()
    if activity is not None:
        out["objective_active"] = activity["active"]
        if activity["why"]:
            out["objective_inactive_why"] = activity["why"]
    names = list(bias.columns) if hasattr(bias, "columns") else None  # a DataFrame
    if "bias_weights" in out and names:
        out["bias_weights"] = dict(zip(names, out["bias_weights"], strict=True))
    return out
