"""Pairwise metrics shared by training logs, evaluation and reports."""

from __future__ import annotations

import numpy as np

from rmlens.stats import pairwise_accuracy

__all__ = ["pairwise_accuracy", "reward_stats"]


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
