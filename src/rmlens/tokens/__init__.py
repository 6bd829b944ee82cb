"""Optimal and pessimal tokens: whole-vocabulary sweeps of reward models (DESIGN.md 4)."""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_config": ["DEFAULT_PROMPTS", "SweepConfig"],
        "_adapt": ["EnsembleScorer", "token_scorer"],
        "_candidates": [
            "Candidates",
            "build_candidates",
            "format_ids",
            "shared_prefix",
            "special_token_ids",
            "sweep_token_ids",
        ],
        "_run": ["model_stats", "read_prompts", "sweep"],
        "_scorers": ["HeadScorer", "ImplicitScorer", "PooledScorer", "SeqClsScorer", "TokenScorer"],
        "_stats": [
            "agreement",
            "framing",
            "frequency_bias",
            "moments",
            "ols",
            "rank_biased_overlap",
            "top_bottom",
            "word_features",
        ],
        "_sweep": ["SWEEP_COLUMNS", "SweepInfo", "score_sequences", "sweep_prompt"],
        "_tiny": ["tiny_causal_lm", "tiny_seq_cls", "tiny_tokenizer"],
    },
)
