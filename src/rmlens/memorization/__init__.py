"""Counterfactual memorization: run plans, runner, estimators, map."""

from rmlens.memorization._config import AuditConfig
from rmlens.memorization._estimate import estimate, memorization_scores
from rmlens.memorization._map import plot_memorization_map
from rmlens.memorization._plan import make_plan
from rmlens.memorization._runner import audit, finish, load_runs, resolve_groups, run_done
from rmlens.memorization._summary import categorize, summarize_audit

__all__ = [
    "AuditConfig",
    "audit",
    "categorize",
    "estimate",
    "finish",
    "load_runs",
    "make_plan",
    "memorization_scores",
    "plot_memorization_map",
    "resolve_groups",
    "run_done",
    "summarize_audit",
]
