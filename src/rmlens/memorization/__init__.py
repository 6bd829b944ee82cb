"""Counterfactual memorization: run plans, runner, estimators, map."""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_checkpoint": ["audit_rm", "checkpoint_sentence"],
        "_config": ["AuditConfig"],
        "_damping": ["damping_sentence"],
        "_estimate": ["estimate", "memorization_scores"],
        "_map": ["plot_memorization_map"],
        "_plans": ["make_plan"],
        "_quality": ["shortcut_sentence", "strongest_shortcut"],
        "_regime": ["plan_validation", "validation_words"],
        "_runner": ["audit"],
        "_sentences": ["AuditSentences", "Sentence", "audit_sentences"],
        "_summary": ["categorize", "memorized_note", "summarize_audit"],
    },
)
