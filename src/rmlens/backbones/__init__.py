"""Backbones: model presets and loading, featurization, embedding cache."""

from rmlens.backbones._cache import EmbeddingCache, default_cache_dir
from rmlens.backbones._featurize import PairFeatures, collate, encode_ids, featurize, pool
from rmlens.backbones._load import Backbone, load_backbone
from rmlens.backbones._presets import PRESETS, resolve_model
from rmlens.backbones._tokenize import encode_pair_text

__all__ = [
    "PRESETS",
    "Backbone",
    "EmbeddingCache",
    "PairFeatures",
    "collate",
    "default_cache_dir",
    "encode_ids",
    "encode_pair_text",
    "featurize",
    "load_backbone",
    "pool",
    "resolve_model",
]
