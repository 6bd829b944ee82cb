"""Softmax attention for rmlens's own attention functions, in the precision they run.

fp32 goes to torch's ``scaled_dot_product_attention``. bf16 (or bf16 autocast, whose rotary
embeddings leave queries and keys fp32) on a CPU is written out as two
batched matmuls around a softmax taken in fp32 (transformers' eager attention, without
copying the key-value heads that query heads share)::

    S = scale * Q K' + mask        P = softmax(S)        O = P V

with S and P in bf16 and the softmax summed in fp32 inside its kernel. torch's fused CPU
kernel runs bf16 through a path 2 to 3 times slower than this written-out form, forward and
backward, at the sizes of a fine-tuning batch (9 query heads, 3 key-value heads, 64 wide,
140 causal tokens: 5.3 ms against 1.8 ms, 2 threads). Sequences
longer than :data:`LONG` keep the fused kernel, whose memory does not grow with the square
of the length.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

LONG = 1024  # keys beyond which the (queries x keys) scores of the written-out form cost too much


def attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
    dropout: float = 0.0,
) -> torch.Tensor:
    """softmax(scale Q K' + mask) V for ``query`` (B, H, Tq, d) and ``key``/``value``
    (B, KV, Tk, d), H a multiple of KV (a group of H / KV query heads shares one key-value
    head); ``mask`` additive, (Tq, Tk) or (B, 1, Tq, Tk); ``causal``: query i sees keys up
    to i (Tq == Tk). Returns (B, H, Tq, d)."""
    kind = query.device.type
    if torch.is_autocast_enabled(kind) and torch.get_autocast_dtype(kind) == torch.bfloat16:
        query, key, value = (t.to(torch.bfloat16) for t in (query, key, value))
    gqa = query.shape[1] != key.shape[1]
    written_out = (query.dtype == torch.bfloat16 and query.device.type == "cpu"
                   and key.shape[2] <= LONG and dropout == 0.0)  # fmt: skip
    if not written_out:
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask,
                                              is_causal=causal, scale=scale,
                                              dropout_p=dropout, enable_gqa=gqa)  # fmt: skip
    b, h, t, d = query.shape
    kv, keys = key.shape[1], key.shape[2]
    groups = h // kv
    scale = d**-0.5 if scale is None else scale
    q = query.reshape(b * kv, groups * t, d)
    k = key.reshape(b * kv, keys, d).transpose(1, 2)
    bias = _bias(mask, causal, (b, kv, groups, t, keys), query.dtype, query.device)
    scores = torch.bmm(q, k).mul_(scale) if bias is None else torch.baddbmm(bias, q, k, alpha=scale)
    probs = torch.softmax(scores, dim=-1)
    return torch.bmm(probs, value.reshape(b * kv, keys, d)).view(b, h, t, d)


def _bias(mask, causal: bool, shape: tuple, dtype, device) -> torch.Tensor | None:
    """The additive mask as (B * KV, G * Tq, Tk) scores, or None."""
    b, kv, groups, t, keys = shape
    if causal:
        bias = torch.full((t, keys), torch.finfo(dtype).min, dtype=dtype, device=device)
        mask = bias.triu(1) if mask is None else mask + bias.triu(1)
    if mask is None:
        return None
    if mask.dtype == torch.bool:  # True where a query may attend
        mask = torch.zeros(mask.shape, dtype=dtype, device=device).masked_fill(
            ~mask, torch.finfo(dtype).min)  # fmt: skip
    mask = mask.to(dtype)
    while mask.dim() < 4:
        mask = mask.unsqueeze(0)
    return mask.unsqueeze(2).expand(b, kv, groups, t, keys).reshape(b * kv, groups * t, keys)
