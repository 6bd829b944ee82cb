"""Counterfactual memorization: run plans, runner, estimators, map."""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_config": ["AuditConfig"],
        "_estimate": ["estimate", "memorization_scores"],
        "_map": ["plot_memorization_map"],
        "_plan": ["make_plan"],
        "_runner": ["audit"],
        "_summary": ["categorize", "summarize_audit"],
    },
)
