"""Backbones: model presets and loading, featurization, embedding cache."""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_cache": ["EmbeddingCache"],
        "_featurize": ["PairFeatures", "featurize"],
        "_formats": ["FORMATS", "warn_truncation"],  # light: the configs read FORMATS
        "_load": ["Backbone", "load_backbone"],
        "_presets": ["PRESETS", "resolve_model"],
    },
)
