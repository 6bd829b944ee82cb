"""Attention over a shared prefix without copying it B times (the sweep's fast path).

The generic route broadcasts the prefix KV cache over the batch; the model then
concatenates it with every row's suffix keys (and repeats it per query head for grouped
attention): B copies of the prefix per layer, which cost as much as the matmuls on a CPU.
Here the suffix runs with no cache; its attention function receives the prefix keys and
values once, (1, kv_heads, L, head_dim), and computes per kv-head group::

    scores = [q K_prefix^T | q K_suffix^T + causal] * scale      (B, kv, g, s, L + s)
    out    = softmax(scores)[..., :L] V_prefix + softmax(scores)[..., L:] V_suffix

The prefix product is one (kv, B*g*s, head_dim) x (kv, head_dim, L) matmul. Used for
architectures whose attention is exactly this (no sliding window, softcap or sinks); the
sweep checks it against full scoring like the generic route. Whether a model can use it:
``rmlens.backbones.plain_attention``.
"""

from __future__ import annotations

import torch

from rmlens.backbones import attention_mode

NAME = "rmlens_shared_prefix"


def shared_prefix_attention(module, query, key, value, attention_mask, scaling=None,
                            dropout=0.0, prefix_kv=None, **kwargs):
    """Attention of suffix queries over the shared prefix and the causal suffix.

    ``query`` is (B, heads, s, d); ``key``/``value`` (B, kv_heads, s, d) hold the suffix
    only; ``prefix_kv[layer]`` the prefix's (1, kv_heads, L, d). Returns (B, s, heads, d).
    """
    k_pre, v_pre = prefix_kv[module.layer_idx]  # (1, kv, L, d)
    b, h, s, d = query.shape
    kv, length = key.shape[1], k_pre.shape[2]
    g = h // kv
    scale = scaling if scaling is not None else d**-0.5
    q = query.reshape(b, kv, g, s, d)  # query head i reads kv head i // g
    q_flat = q.permute(1, 0, 2, 3, 4).reshape(kv, b * g * s, d)
    s_pre = torch.bmm(q_flat, k_pre[0].transpose(1, 2)) * scale  # (kv, b*g*s, L)
    s_pre = s_pre.reshape(kv, b, g, s, length).permute(1, 0, 2, 3, 4)  # (b, kv, g, s, L)
    s_suf = torch.matmul(q, key[:, :, None].transpose(-1, -2)) * scale  # (b, kv, g, s, s)
    causal = torch.ones(s, s, dtype=torch.bool, device=query.device).tril()
    s_suf = s_suf.masked_fill(~causal, float("-inf"))
    probs = torch.softmax(torch.cat([s_pre, s_suf], -1).float(), -1).to(query.dtype)
    p_pre = probs[..., :length].permute(1, 0, 2, 3, 4).reshape(kv, b * g * s, length)
    out_pre = torch.bmm(p_pre, v_pre[0]).reshape(kv, b, g, s, d).permute(1, 0, 2, 3, 4)
    out_suf = torch.matmul(probs[..., length:], value[:, :, None])  # (b, kv, g, s, d)
    out = (out_pre + out_suf).reshape(b, h, s, d)
    return out.transpose(1, 2).contiguous(), None


def shared_prefix_mode(model):
    """Run ``model`` with :func:`shared_prefix_attention`, restoring its attention after."""
    return attention_mode(model, NAME, shared_prefix_attention)
