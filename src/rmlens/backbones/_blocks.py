"""The pre-norm decoder block of Llama, Mistral and Qwen2 written as plain functions, for
rmlens's compiled passes (a fine-tuning step's layers, a token sweep's suffixes).

In bf16 on a CPU with matrix units the matmuls of a block run several times faster than
fp32's and its elementwise passes (norms, rotary embeddings, SiLU, casts, residual adds)
take most of an eager pass; written as one function and compiled by inductor they fuse
into a few kernels. These functions hold the block's math; each caller decides where
compiling pays (:func:`compilable`) and falls back to the model's own layer when compiling
fails (:func:`run_compiled`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator

import torch

LAYERED = ("llama", "mistral", "qwen2")  # pre-norm blocks: RMSNorm, rotary attention, SiLU MLP
MIN_COMPILED = 256  # hidden sizes below this (test models) run eagerly: compiling costs more
PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
               "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")  # fmt: skip
compile_failures: list[str] = []  # the first failure turns every compiled pass off


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float,
             out: torch.dtype | None = None) -> torch.Tensor:  # fmt: skip
    """transformers' RMSNorm of these models, written as one function to compile; ``out``:
    its result cast to that dtype, as the matmuls it feeds would cast it."""
    xf = x.float()
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    y = weight * normed.to(x.dtype)
    return y if out is None else y.to(out)


def rotated(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of ``x`` (..., d): transformers' ``apply_rotary_pos_emb``."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin


def compilable(config, min_width: int | None = None) -> bool:
    """Whether ``config`` is a decoder of :data:`LAYERED` blocks as these functions write
    them (SiLU MLP, no attention dropout), at least ``min_width`` wide (default
    :data:`MIN_COMPILED`), under transformers 5 (whose layers return a tensor)."""
    import transformers

    width = MIN_COMPILED if min_width is None else min_width
    return (getattr(config, "model_type", None) in LAYERED
            and getattr(config, "hidden_size", 0) >= width
            and getattr(config, "hidden_act", None) == "silu"
            and not getattr(config, "attention_dropout", 0.0)
            and int(transformers.__version__.split(".")[0]) >= 5)  # fmt: skip


def decoder_layers(model) -> list:
    """The decoder layers of ``model`` whose forward nothing has replaced yet."""
    return [m for m in model.modules() if type(m).__name__.endswith("DecoderLayer")
            and "forward" not in vars(m)]  # fmt: skip


@contextlib.contextmanager
def layers_running(layers: list, forward: Callable) -> Iterator[bool]:
    """Inside the block each of ``layers`` runs ``forward(layer, ...)`` in place of its own
    forward, restored after; yields whether any was replaced."""
    for layer in layers:
        layer.forward = functools.partial(forward, layer)
    try:
        yield bool(layers)
    finally:
        for layer in layers:
            layer.__dict__.pop("forward", None)


def run_compiled(function: Callable, eager: Callable, *args, autocast: bool = False):
    """``function(*args)`` compiled by inductor (dynamic shapes, once per process), with
    autocast off unless ``autocast``; ``eager()`` once compiling has failed in this process
    (no compiler on the machine): the same math through the model's own layer."""
    if not compile_failures:
        device = next(a for a in args if isinstance(a, torch.Tensor)).device.type
        outside = contextlib.nullcontext() if autocast else torch.autocast(device, enabled=False)
        try:
            with outside:
                return _compiled(function)(*args)
        except Exception as err:
            compile_failures.append(f"{type(err).__name__}: {err}")
    return eager()


@functools.cache
def _compiled(function: Callable) -> Callable:
    return torch.compile(function, dynamic=True)
