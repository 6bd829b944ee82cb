"""Backbones: model presets and loading, featurization, embedding cache."""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_cache": ["EmbeddingCache", "default_cache_dir"],
        "_featurize": [
            "PairFeatures",
            "collate",
            "encode_ids",
            "featurize",
            "last_real",
            "pool",
            "position_ids",
        ],
        "_load": ["Backbone", "load_backbone"],
        "_presets": ["PRESETS", "resolve_model"],
        "_tokenize": ["encode_pair_text", "prompt_messages", "transcript_messages"],
    },
)
