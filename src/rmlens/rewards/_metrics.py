"""Pairwise metrics shared by training logs, evaluation and reports."""

from __future__ import annotations

import math

import numpy as np

from rmlens.stats import pairwise_accuracy, pairwise_correct

__all__ = ["STILL", "RunningStats", "chance_band", "learning_advice", "not_learned",
           "pairwise_accuracy", "reward_stats"]

# Below this relative update |dW| / |W| a trained part "did not move" (``learning_advice``).
# AdamW moves a weight by about its learning rate per step whatever the gradient's scale, so
# the update grows with lr x steps: the defaults reach 3e-2 on the tiny test models in 2 epochs
# of 12 pairs (lr 5e-4), lr 1e-6 reaches 7e-5 and lr 1e-9 7e-8. A change of 1e-4 moves a
# layer's output by at most about 1e-4 of its size: features that stay the base model's.
STILL = 1e-4


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


class RunningStats:
    """The :func:`reward_stats` of a fine-tuning epoch, batch by batch (every ordered pair
    i < j of a ranking); ``s`` is the running state a checkpoint saves."""

    def __init__(self, saved: dict | None = None):
        self.s = saved or {
            "loss": 0.0,
            "n": 0,
            "pairs": 0,
            "correct": 0.0,
            "margin": 0.0,
            "rsum": 0.0,
            "rn": 0,
            "rmin": math.inf,
            "rmax": -math.inf,
        }

    def add(self, rewards, valid, loss: float) -> None:
        """Count a batch: ``rewards`` (B, K) and ``valid`` (B, K) tensors, its mean loss."""
        # lazy: torch loads only when a fine-tuned RM trains
        import torch

        r, v = rewards.detach().float().cpu(), valid.cpu()
        k = r.shape[1]
        upper = torch.triu(torch.ones(k, k, dtype=torch.bool), 1) & v[:, :, None] & v[:, None]
        diff = (r[:, :, None] - r[:, None, :])[upper]  # better minus worse
        s = self.s
        s["loss"] += loss * len(r)
        s["n"] += len(r)
        s["pairs"] += int(diff.numel())
        s["correct"] += float(pairwise_correct(diff.numpy()).sum())
        s["margin"] += float(diff.sum())
        s["rsum"] += float(r[v].sum())
        s["rn"] += int(v.sum())
        s["rmin"] = min(s["rmin"], float(r[v].min()))
        s["rmax"] = max(s["rmax"], float(r[v].max()))

    def metrics(self) -> dict[str, float]:
        """The epoch's metrics so far, named as in :func:`reward_stats` (and ``loss``)."""
        s, nan = self.s, float("nan")
        return {
            "loss": s["loss"] / s["n"] if s["n"] else nan,
            "accuracy": s["correct"] / s["pairs"] if s["pairs"] else nan,
            "margin": s["margin"] / s["pairs"] if s["pairs"] else nan,
            "reward_mean": s["rsum"] / s["rn"] if s["rn"] else nan,
            "reward_min": s["rmin"] if s["rn"] else nan,
            "reward_max": s["rmax"] if s["rn"] else nan,
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


def learning_advice(cfg, rm_kind: str, not_learned: str | None,
                    moved: dict[str, float | None]) -> str | None:  # fmt: skip
    """One line on what did not learn and the settings to change; None when all did.

    An RM that did not learn (``not_learned``): raise ``epochs``, ``lr``, ``head_lr`` when
    its head did not move (``moved["head"]`` below :data:`STILL`) and ``lora_r``. An
    explicit RM that learned while its backbone did not move (``moved["body"]``): what it
    learned is a head on the base model's frozen features, whatever ``finetune`` says; raise
    ``lr``. ``cfg`` is the run's ``TrainConfig``.
    """
    body_still = moved.get("body", STILL) < STILL
    head_still = moved.get("head") is not None and moved["head"] < STILL
    part = "adapters" if cfg.finetune == "lora" else "backbone weights"
    still = (f"the {part} did not move (at `lr` {cfg.lr:g} their update is "
             f"{moved.get('body', 0.0):.1g} of the base weights' size)")  # fmt: skip
    if not not_learned:
        if body_still and rm_kind == "explicit":
            return (f"only the head learned: {still}, so the RM is a head on the base "
                    f"model's frozen features; raise `lr` to tune the backbone")
        return None
    knobs = [f"`epochs` (now {cfg.epochs})", f"`lr` (now {cfg.lr:g})"]
    if head_still:
        knobs.append(f"`head_lr` (now {cfg.head_lr:g})")
    if cfg.finetune == "lora":
        knobs.append(f"`lora_r` (now {cfg.lora_r})")
    why = not_learned + (f"; {still}" if body_still else "")
    return f"the RM did not learn: {why}; raise " + ", ".join(knobs[:-1]) + f" or {knobs[-1]}"
