"""What a run's objective did: whether its mechanism acted on the training pairs, and the
run's record of the objective (DESIGN.md section 2: a run whose mechanism stayed inactive
says so). The checks and records themselves are each objective's
(``rmlens.rewards.objectives``)."""

from __future__ import annotations

from rmlens.rewards.losses import ObjectiveModule, PairExtras


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
