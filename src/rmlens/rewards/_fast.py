"""Exact shortcuts of a fine-tuning step past the libraries' generic paths: peft's LoRA
layers fused into one autograd node each, and batches run without padding.

**Fused LoRA.** peft computes ``y = W x + b + (B (A dropout(x))) * s`` as five autograd
nodes (the base linear, A, B, the scaling and the sum); each writes a (T, d_out) or (T,
d_in) tensor that the next one reads again, in the forward pass and in the backward pass. On
a CPU these passes cost as much as a fifth of a LoRA training step of a 135M model. Written
as one function of ``(x, W, b, A, B)``::

    forward   xa = x A'                                       (T, r)
              y  = x W' + b + s xa B'                         (T, d_out)
    backward  gb = s g B                                      (T, r)
              dx = g W + gb A                                 (T, d_in)
              dA = gb' x,  dB = s (xa' g)'

with the scaling applied to the rank-r products and the sums done inside the GEMMs
(``addmm_``): the same math as peft's, equal to float rounding (about 1e-7 relative,
``tests/test_fast.py``). Forward and backward of a layer then cost about 15% more than the
two GEMMs of a frozen linear layer, where peft's graph costs 35% more (1244 rows at
SmolLM2-135M's shapes, 2 threads). In bf16 (``precision``) W is held in bf16 and the layer
runs in bf16: the fp32 adapters are cast per call (r rows each) and dA, dB return in fp32,
the adapters' own dtype. Only what training needs is fused: a layer runs peft's own forward
whenever something else is asked of it (adapters disabled or merged, several adapters,
dropout, DoRA or another variant, autocast, or hooks on its adapters, as
``rmlens.influence`` sets to read per-pair gradients).

**Compiled norms.** In bf16 the matmuls run at twice fp32's rate or more and the elementwise
passes weigh more; :func:`compiled_norms` runs the RMSNorms through ``torch.compile``
(``benchmarks/elementwise.py``: 3.3x faster forward and backward). SiLU-times-input
compiled gained 1.09x there and stays eager.

**Flat batches.** A batch padded to its longest example runs its padding through every
matmul; at the batch sizes of a CPU run that can be a fifth of a step. Here the linear
layers see the batch as one row of exactly its tokens (N = sum of the examples' packed
lengths), and the attention function runs each example on its own span of that row, as its
block mask says (``_nets.collate``): the prefix once, each response attending the prefix and
itself, without the masked blocks. The hidden states equal those of the padded batch up to
float rounding (the matmuls meet other shapes). Used for decoders whose attention is plain
(``backbones.plain_attention``), and for encoders that allow it (``backbones.flat_encoder``:
each sequence attends its own tokens both ways, is mean-pooled on its own, and its
positions restart at 0, as in its padded row); ``rmlens.influence.pair_gradients`` sums a
flat batch's per-token outer products over each example's span.
"""

from __future__ import annotations

import functools
import types
from contextlib import contextmanager

import torch
from torch import nn

from rmlens.backbones import attention, attention_mode, held_precision

FLAT = "rmlens_flat"


class _LoraLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, a, b, scaling: float):
        ctx.dtypes = x.dtype, a.dtype, b.dtype
        # bf16: the fp32 adapters cast per call (r rows), the input from the fp32 stream
        a, b = a.to(weight.dtype), b.to(weight.dtype)
        x2 = x.reshape(-1, x.shape[-1]).to(weight.dtype)
        xa = x2 @ a.t()  # (T, r)
        y = x2 @ weight.t() if bias is None else torch.addmm(bias, x2, weight.t())
        y.addmm_(xa, b.t(), alpha=scaling)
        ctx.save_for_backward(x2, weight, a, b, xa)
        ctx.scaling, ctx.has_bias = scaling, bias is not None
        return y.view(*x.shape[:-1], y.shape[-1])

    @staticmethod
    def backward(ctx, g):
        x2, weight, a, b, xa = ctx.saved_tensors
        s = ctx.scaling
        g2 = g.reshape(-1, g.shape[-1])
        gb = (b.t() @ g2.t()).t().mul_(s)  # (T, r): the gradient at A's output
        dx = dw = dbias = None
        if ctx.needs_input_grad[0]:
            dx = (g2 @ weight).addmm_(gb, a)
            dx = dx.view(*g.shape[:-1], dx.shape[-1]).to(ctx.dtypes[0])
        if ctx.needs_input_grad[1]:
            dw = (x2.t() @ g2).t()
        if ctx.has_bias and ctx.needs_input_grad[2]:
            dbias = g2.sum(0)
        # rank-r products as (r, .) x (., T) or (r, T) x (T, d), transposed where needed: on
        # a CPU they run 2 to 3 times faster than (T, d) x (d, r) or (d, T) x (T, r)
        da = (gb.t() @ x2).to(ctx.dtypes[1]) if ctx.needs_input_grad[3] else None
        db = (xa.t() @ g2).mul_(s).t().to(ctx.dtypes[2]) if ctx.needs_input_grad[4] else None
        return dx, dw, dbias, da, db, None


def _fusable(layer) -> str | None:
    """The one adapter that ``layer`` can run fused now, or None."""
    if layer.disable_adapters or layer.merged or len(layer.active_adapters) != 1:
        return None
    name = layer.active_adapters[0]
    if name not in layer.lora_A or name in getattr(layer, "lora_variant", {}):
        return None
    a, b, drop = layer.lora_A[name], layer.lora_B[name], layer.lora_dropout[name]
    if not isinstance(drop, nn.Identity) and not (isinstance(drop, nn.Dropout) and drop.p == 0):
        return None
    if a._forward_hooks or b._forward_hooks or a._forward_pre_hooks or b._forward_pre_hooks:
        return None
    if getattr(layer, "fan_in_fan_out", False) or a.bias is not None or b.bias is not None:
        return None
    return name


def _forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    base = self.base_layer
    held = base.weight.dtype if type(base) is nn.Linear else None
    kind = x.device.type
    # under autocast, fused only where it multiplies in the dtype the weights are held in
    amp = torch.is_autocast_enabled(kind)
    runs_in = torch.get_autocast_dtype(kind) if amp else x.dtype
    name = None if args or kwargs or runs_in != held else _fusable(self)
    if name is None:
        return type(self).forward(self, x, *args, **kwargs)
    return _LoraLinear.apply(x, base.weight, base.bias, self.lora_A[name].weight,
                             self.lora_B[name].weight, float(self.scaling[name]))  # fmt: skip


@contextmanager
def fused_layers(model: nn.Module):
    """Inside the block, peft's LoRA linear layers of ``model`` run as one autograd node
    each (when they can; the same numbers either way, to float rounding).

    Only peft's layers are swapped: transformers' own layers may have their ``forward``
    reset by ``model.train()`` (the kernels hub's layers, e.g. the RMSNorms)."""
    from peft.tuners.lora import Linear

    layers = [m for m in model.modules() if type(m) is Linear and "forward" not in vars(m)]
    for layer in layers:  # an enclosing block's layers stay its own
        layer.forward = types.MethodType(_forward, layer)
    try:
        yield
    finally:
        for layer in layers:
            layer.__dict__.pop("forward", None)


NORMED = ("llama", "mistral", "qwen2", "qwen3")  # RMSNorm: w * bf16(x * rsqrt(mean(x^2) + eps))
MIN_COMPILED = 256  # hidden sizes below this (test models) run eagerly: compiling costs more
_compile_failed: list[str] = []


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float,
             out: torch.dtype | None = None) -> torch.Tensor:  # fmt: skip
    """transformers' RMSNorm of these models, written as one function to compile; ``out``:
    its result cast to that dtype, as the matmuls it feeds would cast it."""
    xf = x.float()
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    y = weight * normed.to(x.dtype)
    return y if out is None else y.to(out)


@functools.cache
def _compiled_rms_norm():
    return torch.compile(rms_norm, dynamic=True)


def _norm_forward(self, out: torch.dtype | None, x: torch.Tensor) -> torch.Tensor:
    if not _compile_failed:
        try:
            return _compiled_rms_norm()(x, self.weight, self.variance_epsilon, out)
        except Exception as err:  # no compiler here: the eager norm, same numbers
            _compile_failed.append(f"{type(err).__name__}: {err}")
    y = type(self).forward(self, x)
    return y if out is None else y.to(out)


# the norms whose output only feeds linear layers (a block's two), not the residual stream
# or rotary embeddings
_FEEDS_MATMULS = ("input_layernorm", "post_attention_layernorm")


@contextmanager
def compiled_norms(model: nn.Module, rt, config):
    """Inside the block, the RMSNorms of ``model`` (whose base model's config is ``config``;
    ``rt`` its ``_nets.Runtime``) run compiled (inductor), where that pays:
    bf16 on a CPU, a model of plain RMSNorms (:data:`NORMED`) at least :data:`MIN_COMPILED`
    wide. In bf16 the elementwise passes are a large share of a step; the norm's five eager
    passes forward and more backward become one kernel each way (SmolLM2-135M, 1,369 rows,
    2 threads: 5.1 ms eager, 0.8 ms compiled, forward and backward; a 32-pair epoch 12.6 s
    against 11.0 s). A block's two norms, whose output only feeds matmuls, return it in
    bf16 where the linear weights are held in bf16: the cast autocast would make at each of
    the three or two layers they feed, made once. Compiling takes about 25 s the first time
    on a machine (inductor caches it on disk); without a working compiler the norms run
    eagerly, as before."""
    wide = getattr(config, "hidden_size", 0) >= MIN_COMPILED
    plain = getattr(config, "model_type", None) in NORMED
    layers = []
    if rt.precision == "bf16" and rt.device == "cpu" and wide and plain:
        layers = [(name, m) for name, m in model.named_modules()
                  if type(m).__name__.endswith("RMSNorm") and hasattr(m, "variance_epsilon")
                  and "forward" not in vars(m)]  # fmt: skip
    held = torch.bfloat16 if held_precision(model) == "bf16" else None
    for name, layer in layers:
        out = held if name.endswith(_FEEDS_MATMULS) else None
        layer.forward = functools.partial(_norm_forward, layer, out)
    try:
        yield
    finally:
        for _, layer in layers:
            layer.__dict__.pop("forward", None)


def flat_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                   rmlens_spans=None, **kwargs):  # fmt: skip
    """Attention of a flat row: ``query`` (1, heads, N, d), ``key``/``value``
    (1, kv_heads, N, d); ``rmlens_spans`` gives each example's place in the row
    (``_nets.flat_span``). Returns (1, N, heads, d), as transformers' attention functions.

    Per example, the prefix and the first response's tail are one causal attention over
    their own tokens; each later tail attends the prefix's keys and its own, causally. This
    is the example's block mask without computing the blocks it masks (a tail's view of the
    other tails). An encoder's attention (``module.is_causal`` False) runs each sequence
    over its own tokens, both ways: its examples carry no prefix (``collate``'s
    encoder-flat layout)."""
    if not getattr(module, "is_causal", True):
        sizes = [n for _, _, tails in rmlens_spans for n, _ in tails]
        out = [attention(q, k, v, scale=scaling, dropout=dropout)
               for q, k, v in zip(*(t.split(sizes, 2) for t in (query, key, value)))]  # fmt: skip
        return torch.cat(out, 2).transpose(1, 2).contiguous(), None
    sizes = [n for _, p, tails in rmlens_spans for n in [p + tails[0][0]]
             + [m for m, _ in tails[1:]]]  # fmt: skip
    pieces = zip(*(t.split(sizes, 2) for t in (query, key, value)))
    out = []
    for _, shared, tails in rmlens_spans:
        q, k, v = next(pieces)
        out.append(attention(q, k, v, causal=True, scale=scaling))
        k_pre, v_pre = k[:, :, :shared], v[:, :, :shared]
        for _, mask in tails[1:]:
            q, k, v = next(pieces)
            out.append(attention(q, torch.cat([k_pre, k], 2), torch.cat([v_pre, v], 2),
                                 mask=mask, scale=scaling))  # fmt: skip
    return torch.cat(out, 2).transpose(1, 2).contiguous(), None


def flat_mode(model):
    """Run ``model`` with :func:`flat_attention` inside the block."""
    return attention_mode(model, FLAT, flat_attention)
