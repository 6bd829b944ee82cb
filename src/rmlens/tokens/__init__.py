"""Optimal and pessimal tokens: whole-vocabulary sweeps of reward models (DESIGN.md 4)."""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_config": ["DEFAULT_PROMPTS", "SweepConfig"],
        "_adapt": ["EnsembleScorer", "token_scorer"],
        "_run": ["read_prompts", "sweep"],
        "_scorers": ["HeadScorer", "ImplicitScorer", "PooledScorer", "SeqClsScorer", "TokenScorer"],
        "_stats": [
            "agreement",
            "framing",
            "frequency_bias",
            "moments",
            "rank_biased_overlap",
            "top_bottom",
            "word_features",
        ],
        "_sweep": ["sweep_prompt"],
    },
)
