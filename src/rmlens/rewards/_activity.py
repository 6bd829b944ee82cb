"""What a run's objective did: whether its mechanism acted on the training pairs, and the
run's record of the objective (DESIGN.md section 2: a run whose mechanism stayed inactive
says so)."""

from __future__ import annotations

import torch

from rmlens.rewards.losses import Objective, PairExtras

INACTIVE_EXPERT = 0.1  # poe: RMS log-odds of the bias expert below this: it took nothing
INACTIVE_SPREAD = 0.05  # weighted objectives: weights' coefficient of variation below this
INACTIVE_DRO = 1.05  # group_dro: largest q below this times uniform: q never moved


def objective_activity(objective: Objective, cfg, extras: PairExtras) -> dict:
    """Whether the objective's mechanism acted on the run's training pairs (``active``),
    and in words why not (``why``): the thresholds are ``INACTIVE_*``."""
    name, why = objective.name, None
    if name == "label_smoothing" and cfg.smoothing == 0:
        why = "`smoothing` is 0: plain Bradley-Terry"
    elif name == "poe":
        with torch.no_grad():
            e = objective.bias(extras.dphi / objective.scale).squeeze(-1)
        rms = float(e.pow(2).mean().sqrt()) if len(e) else 0.0
        if rms < INACTIVE_EXPERT:
            why = (f"the bias expert stayed near 0 (RMS log-odds {rms:.3f} over the training "
                   "pairs): the main RM was left the shortcuts")  # fmt: skip
    elif name == "group_dro":
        q = objective.q.double().numpy()
        if len(q) < 2 or q.max() * len(q) < INACTIVE_DRO:
            why = (f"the group weights stayed uniform (largest {q.max():.3f} against "
                   f"{1 / len(q):.3f}, {len(q)} groups)")  # fmt: skip
    elif name == "curate":
        dropped = int((objective.weights_ < 1).sum())
        if cfg.curate_weight == 1 or not dropped:
            why = ("no training pair was down-weighted (none was not learned: in-run TM < 0.5)"
                   if cfg.curate_weight < 1 else "`curate_weight` is 1")  # fmt: skip
    elif objective.weights_ is not None:
        w = objective.weights_
        cv = float(w.std() / w.mean()) if len(w) and w.mean() > 0 else 0.0
        if cv < INACTIVE_SPREAD:
            why = f"the loss weights are nearly uniform (coefficient of variation {cv:.3f})"
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
