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
lengths), and only the attention gathers each example's span into one padded batch of
examples, the prefix once, each response attending the prefix and itself under the example's
block mask (:func:`flat_attention`). The hidden states equal those of the padded batch up to
float rounding (the matmuls meet other shapes). Used for decoders whose attention is plain
(``backbones.plain_attention``), and for encoders that allow it (``backbones.flat_encoder``:
each sequence attends its own tokens both ways, is mean-pooled on its own, and its positions
restart at 0, as in its padded row); ``rmlens.influence.pair_gradients`` sums a flat batch's
per-token outer products over each example's span.
"""

from __future__ import annotations

import contextlib
import functools
import types
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from rmlens.backbones import (
    PROJECTIONS,
    attention,
    attention_mode,
    compilable,
    decoder_layers,
    held_precision,
    layers_running,
    rms_norm,
    rotated,
    run_compiled,
)

FLAT = "rmlens_flat"


def _lora_forward(x2, weight, bias, a, b, scaling: float):
    """``(y, xa)``: y = x W' + b + s (x A') B' for a 2-D ``x2`` in the dtype ``weight`` is
    held in, the fp32 adapters cast per call (r rows), and xa = x A' (kept for backward)."""
    a, b = a.to(weight.dtype), b.to(weight.dtype)
    xa = x2 @ a.t()  # (T, r)
    y = x2 @ weight.t() if bias is None else torch.addmm(bias, x2, weight.t())
    return y.addmm_(xa, b.t(), alpha=scaling), xa


def _lora_backward(g2, x2, weight, a, b, xa, scaling: float, need_dx: bool = True):
    """``(dx, dA, dB)`` of :func:`_lora_forward` at its output's gradient ``g2`` (dx None
    unless ``need_dx``); dA and dB in the adapters' own dtype."""
    a16, b16 = a.to(weight.dtype), b.to(weight.dtype)
    gb = (b16.t() @ g2.t()).t().mul_(scaling)  # (T, r): the gradient at A's output
    dx = (g2 @ weight).addmm_(gb, a16) if need_dx else None
    # rank-r products as (r, .) x (., T) or (r, T) x (T, d), transposed where needed: on
    # a CPU they run 2 to 3 times faster than (T, d) x (d, r) or (d, T) x (T, r)
    da = (gb.t() @ x2).to(a.dtype)
    db = (xa.t() @ g2).mul_(scaling).t().contiguous().to(b.dtype)
    return dx, da, db


class _LoraLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, a, b, scaling: float):
        ctx.x_dtype = x.dtype
        # bf16: the input from the fp32 stream cast once
        x2 = x.reshape(-1, x.shape[-1]).to(weight.dtype)
        y, xa = _lora_forward(x2, weight, bias, a, b, scaling)
        ctx.save_for_backward(x2, weight, a, b, xa)
        ctx.scaling, ctx.has_bias = scaling, bias is not None
        return y.view(*x.shape[:-1], y.shape[-1])

    @staticmethod
    def backward(ctx, g):
        x2, weight, a, b, xa = ctx.saved_tensors
        g2 = g.reshape(-1, g.shape[-1])
        dx, da, db = _lora_backward(g2, x2, weight, a, b, xa, ctx.scaling,
                                    ctx.needs_input_grad[0])  # fmt: skip
        if dx is not None:
            dx = dx.view(*g.shape[:-1], dx.shape[-1]).to(ctx.x_dtype)
        dw = (x2.t() @ g2).t() if ctx.needs_input_grad[1] else None
        dbias = g2.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return dx, dw, dbias, da, db, None


@torch.library.custom_op("rmlens::lora_linear", mutates_args=())
def lora_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                a: torch.Tensor, b: torch.Tensor, scaling: float
                ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """:func:`_lora_forward` as one opaque operator, for the compiled layers: inductor calls
    it as it is, its products accumulated in place in one buffer, where it would otherwise
    split the LoRA sum into separate GEMMs and adds (at SmolLM2's MLP shapes, forward and
    backward 6.4 and 6.5 ms against 7.3 and 8.5)."""
    return _lora_forward(x, weight, bias, a, b, scaling)


@lora_linear.register_fake
def _(x, weight, bias, a, b, scaling):
    return x.new_empty(x.shape[0], weight.shape[0]), x.new_empty(x.shape[0], a.shape[0])


@torch.library.custom_op("rmlens::lora_linear_backward", mutates_args=())
def lora_linear_backward(g: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                         a: torch.Tensor, b: torch.Tensor, xa: torch.Tensor, scaling: float
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """:func:`_lora_backward` as one opaque operator."""
    return _lora_backward(g, x, weight, a, b, xa, scaling)


@lora_linear_backward.register_fake
def _(g, x, weight, a, b, xa, scaling):
    return x.new_empty(x.shape), a.new_empty(a.shape), b.new_empty(b.shape)


def _lora_setup(ctx, inputs, output):
    x, weight, bias, a, b, scaling = inputs
    ctx.save_for_backward(x, weight, a, b, output[1])
    ctx.scaling, ctx.has_bias = scaling, bias is not None


def _lora_grad(ctx, g, _):
    x, weight, a, b, xa = ctx.saved_tensors
    dx, da, db = torch.ops.rmlens.lora_linear_backward(g, x, weight, a, b, xa, ctx.scaling)
    return dx, None, g.sum(0) if ctx.has_bias else None, da, db, None


lora_linear.register_autograd(_lora_grad, setup_context=_lora_setup)


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


def _norm_forward(self, out: torch.dtype | None, x: torch.Tensor) -> torch.Tensor:
    def eager():
        y = type(self).forward(self, x)
        return y if out is None else y.to(out)

    return run_compiled(rms_norm, eager, x, self.weight, self.variance_epsilon, out,
                        autocast=True)  # fmt: skip


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


def _project(layer, x: torch.Tensor, adapter: str | None) -> torch.Tensor:
    """A linear layer on ``x`` in ``x``'s dtype: peft's ``W x + b + s B A x`` for a LoRA
    layer's ``adapter`` (:func:`lora_linear`), ``W x + b`` for a plain one (its weights cast
    per call)."""
    if adapter is None:
        bias = None if layer.bias is None else layer.bias.to(x.dtype)
        return F.linear(x, layer.weight.to(x.dtype), bias)
    base = layer.base_layer
    bias = None if base.bias is None else base.bias.to(x.dtype)
    y, _ = lora_linear(x.reshape(-1, x.shape[-1]), base.weight.to(x.dtype), bias,
                       layer.lora_A[adapter].weight, layer.lora_B[adapter].weight,
                       float(layer.scaling[adapter]))  # fmt: skip
    return y.view(*x.shape[:-1], y.shape[-1])


def decoder_layer(layer, h, cos, sin, source, target, bias, adapters: tuple) -> torch.Tensor:
    """One pre-norm decoder block (``backbones.compilable``) on a flat row ``h`` (1, N, d),
    fp32: transformers' forward written as one function to compile, with
    :func:`flat_attention`'s padded batch of examples (``source``, ``target``, the additive
    ``bias`` (units, 1, L, L)). The matmuls run in the bias's dtype (bf16: the residual
    stream, norms, rotary embeddings and softmax statistics stay fp32, as under bf16
    autocast)."""
    attn, mlp, low = layer.self_attn, layer.mlp, bias.dtype
    q_a, k_a, v_a, o_a, gate_a, up_a, down_a = adapters
    units, width = bias.shape[0], bias.shape[-1]
    x = rms_norm(h, layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon, low)
    n, d = h.shape[1], attn.head_dim

    def heads(t):  # (1, N, k d) -> (1, k, N, d)
        return t.view(1, n, -1, d).transpose(1, 2)

    q = rotated(heads(_project(attn.q_proj, x, q_a)), cos[:, None], sin[:, None])
    k = rotated(heads(_project(attn.k_proj, x, k_a)), cos[:, None], sin[:, None])
    v = heads(_project(attn.v_proj, x, v_a))

    def padded(t):  # (1, k, N, d) -> (units, k, L, d)
        return t[0].index_select(1, source).view(t.shape[1], units, width, d).transpose(0, 1)

    o = attention(padded(q.to(low)), padded(k.to(low)), padded(v), mask=bias,
                  scale=attn.scaling)  # fmt: skip
    o = o.transpose(0, 1).reshape(o.shape[1], units * width, d).index_select(1, target)
    h = h + _project(attn.o_proj, o.transpose(0, 1).reshape(1, n, -1), o_a)
    norm = layer.post_attention_layernorm
    x = rms_norm(h, norm.weight, norm.variance_epsilon, low)
    act = F.silu(_project(mlp.gate_proj, x, gate_a)) * _project(mlp.up_proj, x, up_a)
    return h + _project(mlp.down_proj, act, down_a)


def _adapters(layer) -> tuple | None:
    """Each projection's one active adapter (None: a plain linear layer), or None where a
    projection is something else (several adapters, dropout, hooks, another kind)."""
    from peft.tuners.lora import Linear

    out = []
    for path in PROJECTIONS:
        proj = layer.get_submodule(path)
        if type(proj) is nn.Linear and not proj._forward_hooks and not proj._forward_pre_hooks:
            out.append(None)
        elif type(proj) is Linear and (name := _fusable(proj)) is not None:
            out.append(name)
        else:
            return None
    return tuple(out)


def _layer_forward(self, hidden_states, *args, **kwargs):
    spans = kwargs.get("rmlens_spans")
    adapters = None if args or spans is None or kwargs.get("cache") is not None else (
        _adapters(self))  # fmt: skip
    if adapters is None:
        return type(self).forward(self, hidden_states, *args, **kwargs)
    cos, sin = kwargs["position_embeddings"]
    layout = _layout(spans, True, hidden_states.device)
    return run_compiled(decoder_layer, lambda: type(self).forward(self, hidden_states, *args,
                                                                  **kwargs),
                        self, hidden_states, cos, sin, layout.source, layout.target,
                        layout.bias(torch.bfloat16), adapters)  # fmt: skip


@contextmanager
def compiled_layers(model: nn.Module, rt, config):
    """Inside the block, the decoder layers of ``model`` (whose base model's config is
    ``config``; ``rt`` its ``_nets.Runtime``) run a flat batch as one compiled function each
    (:func:`decoder_layer`, inductor), where that pays: bf16 on a CPU, a decoder of Llama,
    Mistral or Qwen2 blocks (``backbones.compilable``: SiLU, no attention dropout)
    at least :data:`MIN_COMPILED` wide, transformers 5. In bf16 on AMX the matmuls are a
    minority of an eager step; compiled, the norms, rotary embeddings, LoRA sums, SiLU,
    softmax and residual adds fuse into a few kernels each way (SmolLM2-135M, 32 pairs of
    256 tokens, 2 threads: an epoch 1.16x to 1.3x faster than with compiled norms alone). A
    layer whose projections are not plain linear or fusable LoRA layers, or a call other
    than a flat batch's, runs the model's own forward; so does every layer once compiling
    has failed. Yields whether the layers were replaced."""
    use = rt.precision == "bf16" and rt.device == "cpu" and compilable(config, MIN_COMPILED)
    with layers_running(decoder_layers(model) if use else [], _layer_forward) as replaced:
        yield replaced


@contextmanager
def fast_passes(model: nn.Module, rt, config, compiled_blocks: bool = True):
    """A fine-tuning step's shortcuts inside the block: :func:`fused_layers`,
    :func:`compiled_norms` and, with ``compiled_blocks``, :func:`compiled_layers`. An
    implicit RM goes without the last: its reward is a log-ratio to a reference read through
    the model's own layers, and the compiled layers' rounding would not cancel in it. Yields
    whether the compiled layers are in."""
    layers = compiled_layers(model, rt, config) if compiled_blocks else contextlib.nullcontext()
    with fused_layers(model), compiled_norms(model, rt, config), layers as compiled:
        yield bool(compiled)


def flat_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                   rmlens_spans=None, **kwargs):  # fmt: skip
    """Attention of a flat row: ``query`` (1, heads, N, d), ``key``/``value``
    (1, kv_heads, N, d); ``rmlens_spans`` gives each example's place in the row
    (``_nets.collate``). Returns (1, N, heads, d), as transformers' attention functions.

    The row's units (a decoder's examples, an encoder's sequences) are gathered into one
    padded (units, heads, L, d) batch and attend at once under :func:`unit_mask`: a token of
    an example sees the earlier tokens of the prefix and of its own tail, without the
    blocks that mask hides being taken out one example at a time. One attention call per
    layer instead of one per example and tail: at fine-tuning sizes the per-call cost of
    small matmuls, not their FLOPs, was a third of a bf16 step (SmolLM2-135M, 8 pairs of
    about 235 tokens). Padded keys are masked; padded queries see themselves and are
    dropped."""
    causal = getattr(module, "is_causal", True)
    layout = _layout(rmlens_spans, causal, query.device)
    units, width = layout.units, layout.width

    def padded(t):  # (1, h, N, d) -> (units, h, L, d)
        h, d = t.shape[1], t.shape[3]
        return t[0].index_select(1, layout.source).view(h, units, width, d).transpose(0, 1)

    kind = query.device.type
    dtype = torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else query.dtype
    out = attention(padded(query), padded(key), padded(value), mask=layout.bias(dtype),
                    scale=scaling, dropout=dropout)  # fmt: skip
    heads, d = out.shape[1], out.shape[3]
    out = out.transpose(0, 1).reshape(heads, units * width, d).index_select(1, layout.target)
    return out.transpose(0, 1).unsqueeze(0).contiguous(), None


class _Layout:
    """Where each token of a flat row sits in the padded batch of its units."""

    def __init__(self, source, target, allowed, units: int, width: int):
        self.source, self.target, self.allowed = source, target, allowed
        self.units, self.width = units, width
        self._bias: dict = {}

    def bias(self, dtype: torch.dtype) -> torch.Tensor:
        """The additive mask (units, 1, L, L) in ``dtype``."""
        if dtype not in self._bias:
            self._bias[dtype] = additive(self.allowed, dtype)
        return self._bias[dtype]


_last_layout: list = []  # (spans, causal, layout) of the last row: its layers share one


def _layout(spans: list, causal: bool, device) -> _Layout:
    if _last_layout and _last_layout[0][0] is spans and _last_layout[0][1] == causal:
        return _last_layout[0][2]
    units = []  # (start, segment ids) per unit
    for start, shared, tails in spans:
        if causal:
            seg = [0] * shared + [k + 1 for k, n in enumerate(tails) for _ in range(n)]
            units.append((start, seg))
        else:
            for n in tails:
                units.append((start, [1] * n))
                start += n
    width = max(len(seg) for _, seg in units)
    seg = torch.full((len(units), width), -1, dtype=torch.long)
    source = torch.zeros((len(units), width), dtype=torch.long)
    target = []
    for u, (start, ids) in enumerate(units):
        seg[u, : len(ids)] = torch.tensor(ids)
        source[u, : len(ids)] = torch.arange(start, start + len(ids))
        target.append(torch.arange(len(ids)) + u * width)
    layout = _Layout(source.flatten().to(device), torch.cat(target).to(device),
                     unit_mask(seg, causal)[:, None].to(device), len(units), width)  # fmt: skip
    _last_layout[:] = [(spans, causal, layout)]
    return layout


def additive(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean attention mask as the additive one: 0 where allowed, dtype's minimum
    elsewhere."""
    zeros = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return zeros.masked_fill(~allowed, torch.finfo(dtype).min)


def unit_mask(seg: torch.Tensor, causal: bool) -> torch.Tensor:
    """Which keys each query of a padded unit may attend, (units, L, L) boolean, from its
    tokens' segment ids ``seg`` (units, L): 0 a shared prefix, k the tail of sequence k,
    -1 padding. A token sees the prefix and its own tail (their earlier tokens where
    ``causal``); a padded query sees itself only."""
    width = seg.shape[1]
    col = torch.arange(width)
    key, query = seg[:, None, :], seg[:, :, None]
    allowed = ((key == 0) | (key == query)) & (key >= 0) & (query >= 0)
    if causal:
        allowed &= col[None, :] <= col[:, None]
    return allowed | ((query < 0) & torch.eye(width, dtype=torch.bool))


def flat_mode(model):
    """Run ``model`` with :func:`flat_attention` inside the block."""
    return attention_mode(model, FLAT, flat_attention)
