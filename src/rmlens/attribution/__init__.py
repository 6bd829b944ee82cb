"""rmlens.attribution: explain memorization (TM, TG, CM) with pair features, regressors, SHAP."""

from rmlens.attribution._attribute import (
    TARGETS,
    AttributeConfig,
    Attributor,
    attribute,
    tm_tg_difference,
)
from rmlens.attribution._features import (
    DEFAULT_EXCLUDE,
    Feature,
    list_features,
    pair_features,
    register_feature,
    unregister_feature,
)
from rmlens.attribution._regress import REGRESSORS, Design, design_matrix

__all__ = [
    "DEFAULT_EXCLUDE",
    "REGRESSORS",
    "TARGETS",
    "AttributeConfig",
    "Attributor",
    "Design",
    "Feature",
    "attribute",
    "design_matrix",
    "list_features",
    "pair_features",
    "register_feature",
    "tm_tg_difference",
    "unregister_feature",
]
