"""Explicit vs implicit reward models under distribution shifts (DESIGN.md section 5)."""

from rmlens.generalization._compare import build_splits, generalize, split_metrics
from rmlens.generalization._config import GeneralizeConfig
from rmlens.generalization._persona import (
    SHIFT_TOKENS,
    TRAIN_TOKENS,
    persona_pairs,
    persona_splits,
    persona_statements,
)
from rmlens.generalization._plot import plot_generalization
from rmlens.generalization._shifts import REWRITES, rewrite_pairs, swap_synonyms, synonym_table

__all__ = [
    "REWRITES",
    "SHIFT_TOKENS",
    "TRAIN_TOKENS",
    "GeneralizeConfig",
    "build_splits",
    "generalize",
    "persona_pairs",
    "persona_splits",
    "persona_statements",
    "plot_generalization",
    "rewrite_pairs",
    "split_metrics",
    "swap_synonyms",
    "synonym_table",
]
