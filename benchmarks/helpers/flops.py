"""What the machine can multiply, and what a fine-tuning step of a transformer asks of it.

Shared by the training and sweep benchmarks (``benchmarks/train.py``, ``benchmarks/sweep.py``).

**Peak.** ``matmul_peak`` times fp32 GEMMs at the shapes the model runs: the activations of
one batch (``tokens`` rows) times each distinct linear layer's weight, as the forward pass
calls it (``x W'``) and as the backward pass does (``g W``), on all of torch's threads. The
peak is the fastest of them: a step cannot go faster than its matmuls do.

**Model FLOPs of a step** (``step_flops``), counted on the tokens actually processed (T,
padding excluded; a prompt shared by the two responses of a pair counts once, as it runs)::

    forward                            2 N T
    gradients w.r.t. activations       2 N T
    weight gradients                   2 n T
    attention (forward + backward)     12 L d  sum_t c_t

N: the non-embedding parameters that run (the transformer's linear layers and norms, the
LoRA adapters and the score head); n: the trained ones; L layers of width d; c_t the keys that
token t attends (its position in its own sequence, plus one: causal, within its sequence).
The attention term is the usual one (PaLM's ``12 L d`` per token and key: 4 L d for q k' and
the weighted values of the forward pass, twice that backward), counted over the keys a token
actually sees rather than the full square.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torch import nn


def linear_shapes(model: nn.Module) -> list[tuple[int, int]]:
    """The distinct (in, out) shapes of the model's linear layers (LoRA's rank-r factors and
    a one-output score head left out: they are not where a step's FLOPs are)."""
    shapes = set()
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and "lora_" not in name and module.out_features > 1:
            shapes.add((module.in_features, module.out_features))
    return sorted(shapes)


def _rate(fn, flops: float, seconds: float = 0.5, device: str = "cpu") -> float:
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    for _ in range(2):
        fn()
    sync()
    start, runs = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        fn()
        runs += 1
        if runs % 8 == 0:
            sync()
    sync()
    return flops * runs / (time.perf_counter() - start)


def matmul_peak(shapes: list[tuple[int, int]], tokens: int, *, dtype=torch.float32,
                device: str = "cpu") -> tuple[float, dict]:  # fmt: skip
    """The matmul peak in FLOP/s over ``shapes`` at ``tokens`` rows (fp32 on the CPU by
    default; bf16 on a GPU for its runs), and each shape's rate (forward ``x W'`` and
    backward ``g W``)."""
    rates = {}
    for d_in, d_out in shapes:
        x, w, g = (torch.randn(*shape, dtype=dtype, device=device)
                   for shape in ((tokens, d_in), (d_out, d_in), (tokens, d_out)))  # fmt: skip
        flops = 2.0 * tokens * d_in * d_out
        forward = _rate(lambda x=x, w=w: F.linear(x, w), flops, device=device)
        backward = _rate(lambda g=g, w=w: g @ w, flops, device=device)
        rates[(d_in, d_out)] = (forward, backward)
    return max(max(r) for r in rates.values()), rates


def non_embedding(model: nn.Module) -> int:
    """N: the parameters that multiply activations (every parameter but the embeddings)."""
    embeddings = {id(p) for m in model.modules() if isinstance(m, nn.Embedding)
                  for p in m.parameters()}  # fmt: skip
    return sum(p.numel() for p in model.parameters() if id(p) not in embeddings)


def trained(model: nn.Module) -> int:
    """n: the trained parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def attended(sequence_lengths, shared: int = 0) -> int:
    """sum_t c_t over the tokens of one packed example: a shared prefix of ``shared`` tokens,
    run once, then each sequence's own tokens, each attending its prefix and itself."""
    keys = shared * (shared + 1) // 2
    for n in sequence_lengths:
        keys += (n * (n + 1) - shared * (shared + 1)) // 2
    return keys


def step_flops(n_all: int, n_trained: int, tokens: int, keys: int, layers: int,
               width: int) -> float:  # fmt: skip
    """The model FLOPs of training on ``tokens`` tokens that attend ``keys`` keys in all."""
    return (4.0 * n_all + 2.0 * n_trained) * tokens + 12.0 * layers * width * keys
