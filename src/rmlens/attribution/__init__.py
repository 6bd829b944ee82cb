"""rmlens.attribution: explain memorization (TM, TG, CM) with pair features, regressors, SHAP."""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_config": ["TARGETS", "AttributeConfig", "DEFAULT_EXCLUDE", "REGRESSORS"],
        "_attribute": ["attribute"],
        "_attributor": ["Attributor", "tm_tg_difference"],
        "_bias": ["bias_features", "bias_summary", "objective_bias"],
        "_features": [
            "Feature",
            "list_features",
            "pair_features",
            "register_feature",
            "unregister_feature",
        ],
        "_identifiers": ["identifier_columns"],
        "_regress": ["Design", "design_matrix"],
        "_stability": ["Halves", "compare_importance", "run_halves", "stability_warnings"],
    },
)
