"""Pairwise metrics shared by training logs, evaluation and reports."""

from __future__ import annotations

import numpy as np


def pairwise_accuracy(r_chosen, r_rejected) -> float:
    """Share of pairs with r+ > r-; a tie (r+ == r-) counts 1/2."""
    c, r = np.asarray(r_chosen, dtype=float), np.asarray(r_rejected, dtype=float)
    if c.size == 0:
        return float("nan")
    return float(np.mean((c > r) + 0.5 * (c == r)))


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
