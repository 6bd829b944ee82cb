"""Which models can run rmlens's own attention functions, and running them.

rmlens replaces a transformers model's attention function (through ``AttentionInterface``)
where the layout of its tokens allows a cheaper exact computation: the sweep's shared prefix
(``rmlens.tokens._attention``) and fine-tuning's unpadded batches
(``rmlens.rewards._fast``). Both need an attention that is plain softmax attention over
every earlier key (an encoder's: over every key of its sequence): no sliding window, logit
softcap or attention sinks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

PLAIN_ATTENTION = ("llama", "mistral", "qwen2", "qwen3")
_registered: set[str] = set()


def plain_attention(model) -> bool:
    """Whether ``model`` (a transformers decoder, or a peft model around one) has plain
    attention that rmlens may replace."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "model_type", None) not in PLAIN_ATTENTION:
        return False
    layer_types = getattr(config, "layer_types", None) or ["full_attention"]
    windowed = getattr(config, "sliding_window", None) and getattr(
        config, "use_sliding_window", config.model_type == "mistral")
    if windowed or any(t != "full_attention" for t in layer_types):
        return False
    try:
        from transformers import AttentionInterface  # noqa: F401
        from transformers.masking_utils import AttentionMaskInterface  # noqa: F401
    except ImportError:
        return False
    return True


FLAT_ENCODERS = ("bert",)


def flat_encoder(model) -> bool:
    """Whether ``model`` (a transformers encoder, or a peft model around one) can run its
    sequences back to back in one unpadded row: plain bidirectional attention through
    ``AttentionInterface`` and absolute positions taken from ``position_ids`` (token types
    stay 0, as rmlens's padded rows leave them)."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "model_type", None) not in FLAT_ENCODERS:
        return False
    if getattr(config, "position_embedding_type", "absolute") != "absolute":
        return False
    if getattr(config, "is_decoder", False):
        return False
    try:
        from transformers import AttentionInterface  # noqa: F401
        from transformers.masking_utils import AttentionMaskInterface  # noqa: F401
    except ImportError:
        return False
    return True


def _no_mask(*args, **kwargs):
    return None


@contextmanager
def attention_mode(model, name: str, function: Callable) -> Iterator[None]:
    """Run ``model`` with the attention ``function`` (registered as ``name``, with no mask
    built by transformers: the function gets what it needs as keyword arguments of the
    model's call), restoring its own attention after."""
    if name not in _registered:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface

        AttentionInterface.register(name, function)
        AttentionMaskInterface.register(name, _no_mask)
        _registered.add(name)
    config = model.config
    before = config._attn_implementation
    config._attn_implementation = name
    try:
        yield
    finally:
        config._attn_implementation = before
