"""Counterfactual memorization: run plans, runner, estimators, map."""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_checkpoint": ["audit_rm"],
        "_notes": ["checkpoint_sentence"],
        "_config": ["AuditConfig", "EXECUTION_FIELDS"],
        "_damping": ["damping_sentence"],
        "_estimate": ["estimate", "memorization_scores", "ESTIMATE_COLUMNS"],
        "_plans": ["make_plan", "runs_per_repeat"],
        "_quality": [
            "shortcut_sentence", "strongest_shortcut", "CHANCE", "NEAR_CHANCE", "WEAK_ACCURACY",
            "WEAK_MARGIN", "WEAK_NOT_LEARNED",
        ],
        "_regime": ["plan_validation", "validation_words"],
        "_execute": ["default_trainer"],
        "_finish": ["plot_memorization_map"],
        "_runner": ["audit"],
        "_sentences": ["AuditSentences", "Sentence", "audit_sentences"],
        "_summary": ["WITHHELD", "accuracy_interval", "categorize", "cm_links",
                     "memorized_note", "summarize_audit"],
        "_reliability": ["complete_repeats", "same_partition", "run_sides", "side_means"],
        "_run_folders": ["load_matrices"],
    },
)
