"""A prefix run once, many suffixes after it: the KV cache of the token sweeps.

``run_prefix`` fills a cache with one sequence; ``run_suffix`` runs a batch of suffixes at
positions ``L .. L + s - 1`` against it, through the shared-prefix attention where the
architecture allows (``_attention.py``) or the cache broadcast over the batch.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from rmlens.backbones import plain_attention
from rmlens.tokens._attention import shared_prefix_mode
from rmlens.tokens._compiled import compiled_suffix


def model_device(model: nn.Module) -> torch.device:
    """The device of the model's first parameter."""
    return next(model.parameters()).device


def positions_kwarg(model: nn.Module, positions: torch.Tensor) -> dict:
    """``position_ids`` for models that take them (needed for left padding)."""
    params = inspect.signature(model.forward).parameters
    return {"position_ids": positions} if "position_ids" in params else {}


def _cache_kwarg(model: nn.Module) -> str:
    """transformers 5 calls the KV cache argument ``cache``, 4.x ``past_key_values``."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def is_decoder_only(config) -> bool:
    """Causal decoder whose prefix states do not depend on later tokens (KV caching is exact)."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    kind = getattr(config, "model_type", "")
    return (
        kind in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        and kind not in MODEL_FOR_MASKED_LM_MAPPING_NAMES
        and not getattr(config, "is_encoder_decoder", False)
    )


def run_prefix(model: nn.Module, ids: Sequence[int]) -> tuple[Any, Any]:
    """Run ``ids`` (one sequence) with an empty cache; return (output, filled cache)."""
    from transformers import DynamicCache

    device = model_device(model)
    try:
        cache = DynamicCache(config=model.config)
    except TypeError:  # transformers < 4.56
        cache = DynamicCache()
    x = torch.as_tensor([list(ids)], dtype=torch.long, device=device)  # (1, L)
    out = model(input_ids=x, use_cache=True, **{_cache_kwarg(model): cache})
    return out, cache


def prefix_kv(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer (keys, values) of a filled cache, each (1, kv_heads, L, head_dim)."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return [(layer.keys, layer.values) for layer in layers]
    return [(cache.key_cache[i], cache.value_cache[i]) for i in range(len(cache.key_cache))]


def run_suffix(model: nn.Module, cache: Any, prefix_len: int, suffix: torch.Tensor,
               fast: bool = True):
    """Run ``suffix`` (B, s) after a cached prefix of length L, shared by the batch.

    Positions are ``L .. L + s - 1`` and every key is real. With ``fast`` and a supported
    architecture the prefix keys and values go to :func:`shared_prefix_attention` once
    (in bf16, through compiled layers where the model allows: ``_compiled.py``); otherwise
    the cache's (1, heads, L, head_dim) tensors are expanded to B rows (a view) and the
    model concatenates the suffix keys and values onto them.
    """
    b, s = suffix.shape
    device = model_device(model)
    positions = torch.arange(prefix_len, prefix_len + s, device=device).expand(b, s)
    if fast and plain_attention(model):
        with shared_prefix_mode(model), compiled_suffix(model):
            return model(input_ids=suffix.to(device), position_ids=positions, use_cache=False,
                         prefix_kv=prefix_kv(cache))
    batch_cache = copy.deepcopy(cache)
    layers = getattr(batch_cache, "layers", None)
    if layers is not None:
        for layer in layers:
            if getattr(layer, "keys", None) is not None and layer.keys.numel():
                layer.keys = layer.keys.expand(b, -1, -1, -1)
                layer.values = layer.values.expand(b, -1, -1, -1)
    else:
        batch_cache.batch_repeat_interleave(b)
    mask = torch.ones((b, prefix_len + s), dtype=torch.long, device=device)
    return model(
        input_ids=suffix.to(device),
        attention_mask=mask,
        position_ids=positions,
        use_cache=True,
        **{_cache_kwarg(model): batch_cache},
    )
