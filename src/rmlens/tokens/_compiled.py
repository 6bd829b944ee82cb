"""A sweep's suffixes through compiled decoder layers (bf16 on a CPU).

Each decoder layer of a Llama, Mistral or Qwen2 RM runs a batch of suffixes after the shared
prefix as one function, compiled by inductor: the layer's norms, projections, rotary
embeddings, the attention over the prefix's cached keys and values and the suffix's own
causal keys (as :func:`~rmlens.tokens._attention.shared_prefix_attention` writes it), the
SiLU MLP and the residual adds. In bf16 on AMX the eager layer spends more time in these
elementwise passes and autocast's casts than in its matmuls (SmolLM2-135M, 256 suffixes of
3 tokens: the matmuls 44% of a pass); compiled, they fuse into a few kernels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from rmlens.backbones import (
    PROJECTIONS,
    compilable,
    decoder_layers,
    held_precision,
    layers_running,
    rms_norm,
    rotated,
    run_compiled,
)


def suffix_layer(layer, h, cos, sin, k_pre, v_pre) -> torch.Tensor:
    """One pre-norm decoder block on suffix rows ``h`` (B, s, d), fp32, after a prefix whose
    keys and values at this layer are ``k_pre``, ``v_pre`` (1, kv_heads, L, head_dim); the
    matmuls in the linear weights' dtype, the residual stream, norms, rotary embeddings and
    softmax in fp32, as under bf16 autocast::

        scores = [q K_prefix' | q K_suffix' + causal] * scale
        out    = softmax(scores)[..., :L] V_prefix + softmax(scores)[..., L:] V_suffix
    """
    attn, mlp = layer.self_attn, layer.mlp
    low = attn.q_proj.weight.dtype
    b, s, _ = h.shape
    d, kv, length = attn.head_dim, k_pre.shape[1], k_pre.shape[2]

    def project(linear, x):
        return F.linear(x, linear.weight, linear.bias)

    def heads(t):  # (B, s, k d) -> (B, k, s, d)
        return t.view(b, s, -1, d).transpose(1, 2)

    norm = layer.input_layernorm
    x = rms_norm(h, norm.weight, norm.variance_epsilon, low)
    q = rotated(heads(project(attn.q_proj, x)).float(), cos[:, None], sin[:, None])
    k = rotated(heads(project(attn.k_proj, x)).float(), cos[:, None], sin[:, None])
    v = heads(project(attn.v_proj, x)).to(low)
    g = q.shape[1] // kv
    q = q.to(low).reshape(b, kv, g * s, d)  # query head i reads key-value head i // g
    q_flat = q.transpose(0, 1).reshape(kv, b * g * s, d)
    s_pre = torch.bmm(q_flat, k_pre[0].to(low).transpose(1, 2)).float()  # (kv, B g s, L)
    s_pre = s_pre.view(kv, b, g * s, length).transpose(0, 1)  # (B, kv, g s, L)
    s_suf = torch.matmul(q, k.to(low).transpose(-1, -2)).float()  # (B, kv, g s, s)
    causal = torch.ones(s, s, dtype=torch.bool, device=h.device).tril().repeat(g, 1)
    s_suf = s_suf.masked_fill(~causal, float("-inf"))
    probs = torch.softmax(torch.cat([s_pre, s_suf], -1) * attn.scaling, -1).to(low)
    p_pre = probs[..., :length].transpose(0, 1).reshape(kv, b * g * s, length)
    out = torch.bmm(p_pre, v_pre[0].to(low)).view(kv, b, g * s, d).transpose(0, 1)
    out = out + torch.matmul(probs[..., length:], v)  # (B, kv, g s, d)
    out = out.reshape(b, kv * g, s, d).transpose(1, 2).reshape(b, s, kv * g * d)
    h = h + project(attn.o_proj, out).float()
    norm = layer.post_attention_layernorm
    x = rms_norm(h, norm.weight, norm.variance_epsilon, low)
    act = F.silu(project(mlp.gate_proj, x)) * project(mlp.up_proj, x)
    return h + project(mlp.down_proj, act).float()


def _layer_forward(self, hidden_states, *args, **kwargs):
    prefix_kv = kwargs.get("prefix_kv")
    if args or prefix_kv is None or kwargs.get("cache") is not None:
        return type(self).forward(self, hidden_states, *args, **kwargs)
    cos, sin = kwargs["position_embeddings"]
    k_pre, v_pre = prefix_kv[self.self_attn.layer_idx]
    return run_compiled(suffix_layer, lambda: type(self).forward(self, hidden_states, *args,
                                                                 **kwargs),
                        self, hidden_states.float(), cos.float(), sin.float(), k_pre,
                        v_pre)  # fmt: skip


def _plain(layer: nn.Module) -> bool:
    return all(type(p := layer.get_submodule(path)) is nn.Linear and not p._forward_hooks
               and not p._forward_pre_hooks for path in PROJECTIONS)  # fmt: skip


def compiled_suffix(model: nn.Module):
    """Inside the block, a call of ``model`` with ``prefix_kv`` (the sweep's shared-prefix
    route) runs each decoder layer as :func:`suffix_layer`, compiled, where that pays: a
    decoder of Llama, Mistral or Qwen2 blocks (``backbones.compilable``) held in
    bf16 (``backbones.hold_weights``) on a CPU, every projection a plain linear layer (a
    merged RM's). Elsewhere, and once compiling has failed, the model's own layers run.
    Yields whether the layers were replaced."""
    config = getattr(model, "config", None)
    layers = []
    weight = next(model.parameters())
    if (config is not None and compilable(config) and held_precision(model) == "bf16"
            and weight.device.type == "cpu"):  # fmt: skip
        layers = [m for m in decoder_layers(model) if _plain(m)]
    return layers_running(layers, _layer_forward)
