"""One precision setting for every model pass (DESIGN.md 2, "Precision").

``precision`` is ``auto``, ``fp32`` or ``bf16``. In bf16 the frozen weights are held in
bfloat16 once and the matmuls run on the hardware's bf16 units; trainable adapters, heads,
optimizer state, losses, gradient accumulators and every statistic stay fp32. ``auto`` is
bf16 where the hardware multiplies it natively (a CPU with AMX or AVX512-BF16, CUDA from
compute capability 8.0) and fp32 elsewhere, for the passes whose numbers bf16 keeps
(``docs/benchmarks.rst``, "Numbers kept"); a pass that bf16 does not keep resolves ``auto``
to fp32 (:data:`AUTO_BF16`).

``RMLENS_AUTO_PRECISION`` (``fp32`` or ``bf16``), when set, is what ``auto`` resolves to on
every device, whatever the hardware: results that must not depend on the machine (a test
suite, a comparison across machines) set it once for every process they start.

Light on purpose: the configs that declare ``precision`` are read by the command line
without torch; :func:`resolve_precision` imports torch only for a CUDA device.
"""

from __future__ import annotations

import functools
import os
from dataclasses import field
from pathlib import Path

PRECISIONS = ("auto", "fp32", "bf16")
PRECISION_CONSTRAINT = (lambda x: x in PRECISIONS, "one of " + ", ".join(map(repr, PRECISIONS)))
PRECISION_HELP = (
    "Precision of every model pass: bf16 (bfloat16 weights and matmuls; adapters, head, "
    "optimizer and statistics in fp32), fp32, or auto: bf16 where the hardware multiplies "
    "it natively (a CPU with AMX or AVX512-BF16, CUDA from compute capability 8.0), else "
    "fp32. The resolved one is recorded with every output."
)
# The passes whose numbers bf16 keeps, measured against fp32 (docs/benchmarks.rst): `auto`
# picks bf16 for them on hardware that multiplies it natively, fp32 for the others.
AUTO_BF16 = {
    "finetune": True,  # held-out accuracy over seeds, exports read by transformers
    "encode": True,  # frozen features: CM's ranking and categories of the frozen audit
    "score": True,  # scoring, evaluate, the TM/TG pass of fine-tuned audits
    "sweep": True,  # the top and bottom tokens of a vocabulary sweep
    "gradients": True,  # per-pair gradients of the paired and one-checkpoint audits
    "generate": True,  # sampling candidates
}
_CPU_FLAGS = ("amx_bf16", "avx512_bf16")
AUTO_ENV = "RMLENS_AUTO_PRECISION"


def precision_field(help: str = PRECISION_HELP):
    """The ``precision`` field of a config whose command runs a model (``--precision``;
    ``--bf16`` is its older spelling for ``--precision bf16``)."""
    return field(default="auto", metadata={"help": help, "flag_alias": {"--bf16": "bf16"}})


@functools.cache
def cpu_bf16(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The CPU's native bf16 instructions (``amx_bf16`` or ``avx512_bf16``), or None."""
    try:
        flags = next(
            (line.split(":", 1)[1].split() for line in Path(cpuinfo).read_text().splitlines()
             if line.startswith("flags")), [],
        )  # fmt: skip
    except OSError:
        return None
    return next((f for f in _CPU_FLAGS if f in flags), None)


def native_bf16(device: str) -> str | None:
    """What multiplies bf16 natively on ``device`` (a CPU flag or ``sm_XY``), or None."""
    kind = device.split(":")[0]
    if kind == "cpu":
        return cpu_bf16()
    if kind == "cuda":
        import torch

        major, minor = torch.cuda.get_device_capability(device)
        return f"sm_{major}{minor}" if major >= 8 else None
    return None


def resolve_precision(precision: str, device: str, *, task: str = "finetune") -> str:
    """The precision a pass runs in: ``fp32`` or ``bf16``, never ``auto``.

    Parameters
    ----------
    precision : {"auto", "fp32", "bf16"}
    device : str
        A resolved torch device (``cpu``, ``cuda``, ``cuda:1``, ``mps``).
    task : str, default="finetune"
        Which pass (a key of :data:`AUTO_BF16`): ``auto`` keeps fp32 where bf16 does not
        keep its numbers.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision != "auto":
        return precision
    pinned = os.environ.get(AUTO_ENV)
    if pinned:
        if pinned not in ("fp32", "bf16"):
            raise ValueError(f"{AUTO_ENV} must be fp32 or bf16, got {pinned!r}")
        return pinned
    return "bf16" if AUTO_BF16[task] and native_bf16(device) else "fp32"


def precision_note(precision: str, device: str, *, task: str = "finetune") -> str:
    """A line for the console: the precision a pass runs in, and why ``auto`` chose it."""
    resolved = resolve_precision(precision, device, task=task)
    if precision != "auto":
        return f"precision {resolved} (as set)"
    if os.environ.get(AUTO_ENV):
        return f"precision {resolved} (auto: {AUTO_ENV} is set)"
    native = native_bf16(device)
    if resolved == "bf16":
        return f"precision bf16 (auto: {device} multiplies bf16 natively, {native})"
    if native:
        return f"precision fp32 (auto: bf16 does not keep this pass's numbers on {device})"
    return f"precision fp32 (auto: {device} has no native bf16 matmuls)"


def torch_dtype(precision: str):
    """The torch dtype of a resolved precision."""
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
