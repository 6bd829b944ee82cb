"""Objectives on each pair's reward difference alone: Bradley-Terry and label smoothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

from rmlens.rewards.objectives._base import Objective, bt


class BradleyTerry(Objective):
    """Bradley-Terry: -log sigmoid(d - m) (Bradley & Terry 1952)."""

    name = "bt"
    help = "Bradley-Terry"
    plain = True
    rankings = True
    pair_logistic = True


class LabelSmoothing(Objective):
    """(1 - eps) BT(d) + eps BT(-d): each label is wrong with probability eps (conservative
    DPO, Mitchell 2023; label smoothing, Szegedy et al. 2016)."""

    name = "label_smoothing"
    help = "(1-eps) BT(d) + eps BT(-d)"
    fields = ("smoothing",)
    pair_logistic = True

    @staticmethod
    def loss(d: torch.Tensor, eps: float, margin=None) -> torch.Tensor:
        """(1 - eps) BT(d - m) + eps BT(-(d - m)), per pair.

        Parameters
        ----------
        d : torch.Tensor of shape (n,)
            Reward differences.
        eps : float
            The label-flip rate.
        margin : torch.Tensor of shape (n,), optional
            Margins m.

        Returns
        -------
        torch.Tensor of shape (n,)
        """
        return (1 - eps) * bt(d, margin) + eps * bt(-d, None if margin is None else -margin)

    def words(self, config) -> str:
        return f"; objective label_smoothing (eps {config.smoothing:g})"

    def target(self, config) -> float:
        return 1.0 - config.smoothing

    def per_pair(self, m, d, extras):
        return self.loss(d, m.smoothing, extras.margin)

    def inactive_why(self, m, config, extras):
        return "`smoothing` is 0: plain Bradley-Terry" if config.smoothing == 0 else None
