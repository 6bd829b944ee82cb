"""What an audit's runs say of their training objective: summary.json's ``objective``, and
a warning when its mechanism stayed inactive (DESIGN.md section 2)."""

from __future__ import annotations

import numpy as np

from rmlens.experiment import ExperimentDir
from rmlens.rewards._trainer_base import inactive_message


def objective_summary(exp: ExperimentDir, runs: list[int]) -> dict:
    """What the runs' objective did: its name, the runs where its mechanism stayed inactive
    (and why), and the mean over runs of its recorded weights (loss-weight spread, pairs
    left out, group weights, nested-audit means)."""
    records = [(exp.manifest(r).get("metrics") or {}) for r in runs]
    names = {m.get("objective", "bt") for m in records}
    out: dict = {"objective": names.pop() if len(names) == 1 else sorted(names)}
    idle = [{"run": r, "why": m.get("objective_inactive_why")}
            for r, m in zip(runs, records) if m.get("objective_active") is False]  # fmt: skip
    out["runs_inactive"] = idle
    for key in ("weight_cv", "weight_min", "weight_max", "n_zero_weight", "dro_q_max"):
        values = [m[key] for m in records if isinstance(m.get(key), (int, float))]
        if values:
            out[f"mean_{key}"] = float(np.mean(values))
    guides = [m["guide"] for m in records if isinstance(m.get("guide"), dict)]
    for key in ("tm_mean", "tg_mean", "cm_mean", "n_not_learned"):
        values = [g[key] for g in guides if key in g]
        if values:
            out[f"guide_{key}"] = float(np.mean(values))
    if guides:
        out["guide_margin_from"] = guides[0].get("margin_from")
    out["n_runs"] = len(records)
    return out


def objective_warning(record: dict) -> dict | None:
    """A warning when the objective's mechanism stayed inactive in some run."""
    activities = [{"active": False, "why": i["why"]} for i in record["runs_inactive"]]
    activities += [{"active": True}] * (record["n_runs"] - len(activities))
    message = inactive_message(str(record["objective"]), activities)
    if message is None:
        return None
    return {"code": "objective_inactive", "message": message,
            "runs": [i["run"] for i in record["runs_inactive"]]}  # fmt: skip
