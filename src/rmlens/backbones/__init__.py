"""Backbones: model presets and loading, featurization, embedding cache."""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_attention": [
            "FLAT_ENCODERS", "PLAIN_ATTENTION", "attention_mode", "flat_encoder", "plain_attention",
        ],
        # the pre-norm decoder block as plain functions, for the compiled passes
        "_blocks": [
            "LAYERED", "PROJECTIONS", "compilable", "compile_failures", "decoder_layers",
            "layers_running", "rms_norm", "rotated", "run_compiled",
        ],
        "_cache": ["EmbeddingCache"],
        "_featurize": [
            "PairFeatures", "featurize", "collate", "encode_ids", "encode_texts", "pool",
            "position_ids",
        ],
        # light: the configs read FORMATS, FORMAT_CONSTRAINT and format_field
        "_formats": [
            "FORMATS", "FORMAT_CONSTRAINT", "RESOLVED", "format_field", "resolve_format",
            "truncation_message", "truncation_of", "warn_truncation",
        ],
        # a policy's samples (best-of-n on real prompts)
        "_generate": ["load_policy", "prompt_text", "sample_responses"],
        "_load": ["Backbone", "load_backbone", "default_max_length", "is_causal", "model_identity"],
        # light: the configs read PRECISION_CONSTRAINT and precision_field
        "_precision": [
            "AUTO_BF16", "PRECISIONS", "PRECISION_CONSTRAINT", "native_bf16", "precision_field",
            "precision_note", "resolve_precision", "torch_dtype", "hold_weights", "held_precision",
        ],
        "_presets": [
            "PRESETS", "resolve_model", "check_base", "check_hub_id", "portable_name", "unloadable",
        ],
        "_quiet": ["quiet_bars"],
        "_sdpa": ["attention"],
        # token ids of (prompt, response) pairs, for the RMs that tokenize themselves
        "_tokenize": [
            "NO_LIMIT", "encode_pair", "encode_pair_text", "format_or_default", "pair_encoding",
            "pair_kept", "pairs_truncation", "prepare_tokenizer", "prompt_messages",
        ],
    },
)
