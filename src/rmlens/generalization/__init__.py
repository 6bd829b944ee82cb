"""Explicit vs implicit reward models under distribution shifts (DESIGN.md section 5)."""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_generalize": ["generalize"],
        "_config": ["GeneralizeConfig"],
        "_persona": ["SHIFT_TOKENS", "TRAIN_TOKENS", "persona_pairs", "persona_splits"],
        "_plots": ["plot_generalization"],
        "_shifts": ["REWRITES", "rewrite_pairs", "swap_synonyms", "synonym_table"],
    },
)
