"""Pairwise metrics shared by training logs, evaluation and reports."""

from __future__ import annotations

import numpy as np

from rmlens.stats import pairwise_accuracy

__all__ = ["chance_band", "not_learned", "pairwise_accuracy", "reward_stats"]


def reward_stats(r_chosen, r_rejected) -> dict[str, float]:
    """The metric names every trainer logs per split (STYLE.md 10)."""
    c, r = np.asarray(r_chosen, dtype=float), np.asarray(r_rejected, dtype=float)
    both = np.concatenate([c, r])
    return {
        "accuracy": pairwise_accuracy(c, r),
        "margin": float(np.mean(c - r)) if c.size else float("nan"),
        "reward_mean": float(both.mean()) if both.size else float("nan"),
        "reward_min": float(both.min()) if both.size else float("nan"),
        "reward_max": float(both.max()) if both.size else float("nan"),
    }


NOISE_SE = 2.0  # accuracy within this many standard errors of chance: not told from a coin


def chance_band(n: int) -> float:
    """Half-width of the training accuracy a coin reaches on ``n`` pairs: ``NOISE_SE``
    standard errors, 2 x sqrt(0.25 / n) (0.1 on 100 pairs, 0.045 on 500)."""
    return NOISE_SE * 0.5 / np.sqrt(max(int(n), 1))


def not_learned(accuracy: float, n: int, losses=()) -> str | None:
    """Why an RM did not learn, in words; None when it did.

    Parameters
    ----------
    accuracy : float
        Its accuracy on its own training pairs.
    n : int
        How many training pairs.
    losses : sequence of float, optional
        Its training loss per epoch.

    Returns
    -------
    str or None
        Not learned: a training accuracy within :func:`chance_band` of 0.5, or a training
        loss whose last epoch is not below its first.

    Examples
    --------
    >>> not_learned(0.485, 200)
    'training accuracy 0.485 is within 0.071 of chance (0.5) on 200 pairs'
    >>> not_learned(0.9, 200) is None
    True
    """
    band = chance_band(n)
    if np.isfinite(accuracy) and abs(accuracy - 0.5) <= band:
        return f"training accuracy {accuracy:.3f} is within {band:.3f} of chance (0.5) on {n} pairs"
    losses = [x for x in losses if np.isfinite(x)]
    if len(losses) > 1 and losses[-1] >= losses[0]:
        return f"training loss did not fall ({losses[0]:.4f} in epoch 1, {losses[-1]:.4f} last)"
    return None
