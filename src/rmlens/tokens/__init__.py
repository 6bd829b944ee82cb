"""Optimal and pessimal tokens: whole-vocabulary sweeps of reward models (DESIGN.md 4)."""

from rmlens.tokens._candidates import (
    Candidates,
    build_candidates,
    format_ids,
    shared_prefix,
    special_token_ids,
    sweep_token_ids,
)
from rmlens.tokens._load import RM_CONFIG, RM_PRESETS, load_rm, save_head_rm
from rmlens.tokens._run import DEFAULT_PROMPTS, SweepConfig, model_stats, read_prompts, run_sweep
from rmlens.tokens._scorers import (
    HeadScorer,
    ImplicitScorer,
    PooledScorer,
    SeqClsScorer,
    TokenScorer,
)
from rmlens.tokens._stats import (
    agreement,
    framing,
    frequency_bias,
    moments,
    ols,
    rank_biased_overlap,
    top_bottom,
    word_features,
)
from rmlens.tokens._sweep import SWEEP_COLUMNS, SweepInfo, score_sequences, sweep_prompt
from rmlens.tokens._tiny import tiny_causal_lm, tiny_seq_cls, tiny_tokenizer

__all__ = [
    "DEFAULT_PROMPTS",
    "RM_CONFIG",
    "RM_PRESETS",
    "SWEEP_COLUMNS",
    "Candidates",
    "HeadScorer",
    "ImplicitScorer",
    "PooledScorer",
    "SeqClsScorer",
    "SweepConfig",
    "SweepInfo",
    "TokenScorer",
    "agreement",
    "build_candidates",
    "format_ids",
    "framing",
    "frequency_bias",
    "load_rm",
    "model_stats",
    "moments",
    "ols",
    "rank_biased_overlap",
    "read_prompts",
    "run_sweep",
    "save_head_rm",
    "score_sequences",
    "shared_prefix",
    "special_token_ids",
    "sweep_prompt",
    "sweep_token_ids",
    "tiny_causal_lm",
    "tiny_seq_cls",
    "tiny_tokenizer",
    "top_bottom",
    "word_features",
]
