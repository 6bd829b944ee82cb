"""rmlens.attribution: explain memorization (TM, TG, CM) with pair features, regressors, SHAP."""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_config": ["TARGETS", "AttributeConfig", "REGRESSORS"],
        "_attribute": ["attribute", "attribution_warnings", "fit_record", "stability_record"],
        "_attributor": ["Attributor", "tm_tg_difference"],
        "_bias": ["bias_features", "objective_bias"],
        "_informative": [
            "MEANINGLESS", "R2_FLOOR", "fit_warnings", "informative", "informative_column",
            "not_informative",
        ],
        "_features": [
            "Feature",
            "list_features",
            "pair_features",
            "register_feature",
            "unregister_feature",
        ],
        "_stability": ["ABOVE_CHANCE", "WARN_BELOW", "stability_warnings"],
    },
)
