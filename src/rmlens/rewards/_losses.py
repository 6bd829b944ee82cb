"""Reward-model losses (DESIGN.md section 2). Shapes: rewards are (n_pairs,)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _flat(x: torch.Tensor) -> torch.Tensor:
    # (B, 1) margins against (B,) rewards would broadcast to (B, B): squeeze first.
    return x.reshape(-1)


def bradley_terry_loss(
    r_chosen: torch.Tensor, r_rejected: torch.Tensor, margin: torch.Tensor | None = None
) -> torch.Tensor:
    """-log sigmoid(r+ - r- - m), averaged over pairs (Bradley-Terry; margin as in Llama 2)."""
    delta = _flat(r_chosen) - _flat(r_rejected)  # (n_pairs,)
    if margin is not None:
        delta = delta - _flat(margin)
    return F.softplus(-delta).mean()  # == -log sigmoid(delta)


def centering_loss(r_chosen: torch.Tensor, r_rejected: torch.Tensor) -> torch.Tensor:
    """mean((r+ + r-)^2): keeps rewards centred on zero (Eisenstein et al. 2023)."""
    return ((_flat(r_chosen) + _flat(r_rejected)) ** 2).mean()


def plackett_luce_loss(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Negative log-likelihood of rankings under Plackett-Luce.

    ``scores`` is (n_rankings, k), each row sorted best first; ``mask`` (n_rankings, k) marks
    real entries (rankings shorter than k are padded at the end).
    -log P = sum_j [ logsumexp(s_j..s_k) - s_j ]; with k = 2 this is Bradley-Terry.
    """
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    masked = scores.masked_fill(~mask, float("-inf"))
    tail = torch.logcumsumexp(masked.flip(-1), dim=-1).flip(-1)  # logsumexp over s_j..s_k
    terms = (tail - scores).masked_fill(~mask, 0.0)
    return terms.sum(-1).mean()
