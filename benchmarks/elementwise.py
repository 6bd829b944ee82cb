"""The elementwise passes of a bf16 fine-tuning step, eager against ``torch.compile``.

In fp32 the matmuls were most of a step; in bf16 they run twice as fast or more and the
elementwise passes (RMSNorm, SiLU-times-input, residual adds) take a larger share. This times,
forward and backward, at SmolLM2-135M's shapes (``--rows`` tokens, 576 wide, 1,536 in the
MLP), in bf16 on the CPU:

- ``rmsnorm``: transformers' ``LlamaRMSNorm`` against ``backbones.rms_norm`` compiled
  (what ``rewards._fast.compiled_norms`` runs);
- ``silu_mul``: ``silu(gate) * up``, LlamaMLP's activation, eager against compiled.

Ratios against eager in the same process, best of ``--repeats``; the first call's compile
time is printed on its own. Not part of the tests.

    python benchmarks/elementwise.py [--rows 1369] [--repeats 50]
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from rmlens.backbones import rms_norm


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.silu(gate) * up


def best(fn, inputs, repeats: int) -> float:
    """Best wall seconds of forward + backward of ``fn(*inputs)``."""
    times = []
    for _ in range(repeats):
        leaves = [t.detach().requires_grad_(t.requires_grad) for t in inputs]
        start = time.perf_counter()
        fn(*leaves).float().sum().backward()
        times.append(time.perf_counter() - start)
    return min(times)


def compare(name: str, eager, compiled, inputs, repeats: int) -> None:
    start = time.perf_counter()
    best(compiled, inputs, 1)
    took = time.perf_counter() - start
    a, b = best(eager, inputs, repeats), best(compiled, inputs, repeats)
    print(f"{name:9s} eager {a * 1e3:6.2f} ms  compiled {b * 1e3:6.2f} ms  "
          f"ratio {a / b:5.2f}x  (compiling took {took:.0f} s)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1369)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(args.rows, 576, dtype=torch.bfloat16, requires_grad=True)
    norm = LlamaRMSNorm(576, eps=1e-5).bfloat16()
    compiled_norm = torch.compile(rms_norm, dynamic=True)
    compare("rmsnorm", norm, lambda h: compiled_norm(h, norm.weight, 1e-5), [x], args.repeats)
    gate = torch.randn(args.rows, 1536, dtype=torch.bfloat16, requires_grad=True)
    up = torch.randn(args.rows, 1536, dtype=torch.bfloat16, requires_grad=True)
    compare("silu_mul", silu_mul, torch.compile(silu_mul, dynamic=True), [gate, up],
            args.repeats)  # fmt: skip


if __name__ == "__main__":
    main()
