"""One precision setting for every model pass (DESIGN.md 2, "Precision").

``precision`` is ``auto``, ``fp32`` or ``bf16``. In bf16 the frozen weights of the linear
layers are held in bfloat16 once (:func:`hold_weights`) and the matmuls run on the
hardware's bf16 units, while the residual stream, embeddings, norms and softmax statistics
stay fp32, as under autocast (TRL's ``bf16=True``), without casting the weights at each
call; trainable adapters, heads, optimizer state, losses, gradient accumulators and every
statistic stay fp32 too. ``auto`` is
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
    "Precision of every model pass: bf16 (bfloat16 linear weights and matmuls; residual "
    "stream, adapters, head, optimizer and statistics in fp32), fp32, or auto: bf16 for "
    "fine-tuning where the hardware multiplies it natively (a CPU with AMX or AVX512-BF16, "
    "CUDA from compute capability 8.0), fp32 for encoding, scoring, sweeps and elsewhere. "
    "The resolved one is recorded with every output."
)
# The passes whose numbers bf16 keeps, measured against fp32 (docs/benchmarks.rst): `auto`
# picks bf16 for them on hardware that multiplies it natively, fp32 for the others.
AUTO_BF16 = {
    # training, and the per-pair gradients and TM/TG pass of a fine-tuned audit's runs:
    # held-out accuracy over seeds, CM against the fp32 audit's reliability
    "finetune": True,
    # frozen encoding: bf16 features kept MiniLM's audit (CM's Spearman 0.99997, 99.4% of
    # pairs in the same category) but not SmolLM2's (0.997, 96.6%)
    "encode": False,
    # scoring and evaluate: a bf16 reading of a fine-tuned SmolLM2 RM moved its rewards by up
    # to a third of their spread, so flips against the fp32 reading an export keeps
    "score": False,
    # a vocabulary sweep: bf16 alone kept 87 to 92 of fp32's top and bottom 100 tokens of a
    # fine-tuned SmolLM2 RM; with its extremes scored again in fp32 (`exact_extremes`) all
    # 100 are fp32's, but the rest keep bf16's scores, shifted by 0.14 (a third of their
    # spread): the score moments (skew 1.30 -> 1.64) and frequency bias move
    "sweep": False,
    # a policy's samples (`data candidates --policy`): not yet measured against fp32 (the
    # mean gold of the samples over seeds), so fp32
    "generate": False,
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


def hold_weights(model, precision: str):
    """``model`` as a pass in ``precision`` (resolved) holds it: in bf16 the weights and
    biases of its linear layers cast to bfloat16 once, in place, every other tensor left
    fp32 (embeddings, norms, the output embeddings a causal LM scores tokens with, and what
    is added later: LoRA adapters, heads), and its forward run under bf16 autocast, which
    feeds the matmuls bf16 and keeps the residual stream fp32. A copy cast back to fp32
    (``.float()``) runs in fp32 again: autocast is on while its first linear layer is bf16.
    fp32: ``model`` as it is."""
    import torch
    from torch import nn

    if precision != "bf16":
        return model
    out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    linears = [m for m in model.modules() if isinstance(m, nn.Linear) and m is not out]
    for layer in linears:
        layer.to(torch.bfloat16)
    if linears and not hasattr(model, "_rmlens_autocast"):
        model._rmlens_autocast = []  # the autocast contexts of the calls under way
        model.register_forward_pre_hook(functools.partial(_enter_autocast, linears[0]))
        model.register_forward_hook(_exit_autocast, always_call=True)
    return model


def _enter_autocast(probe, model, args) -> None:
    import torch

    kind = probe.weight.device.type
    ctx = torch.autocast(kind, torch.bfloat16, enabled=probe.weight.dtype == torch.bfloat16)
    ctx.__enter__()
    model._rmlens_autocast.append(ctx)


def _exit_autocast(model, args, output) -> None:
    if model._rmlens_autocast:
        model._rmlens_autocast.pop().__exit__(None, None, None)


def held_precision(model) -> str:
    """The precision ``model``'s linear layers are held in (:func:`hold_weights`)."""
    import torch
    from torch import nn

    modules = model.modules() if isinstance(model, nn.Module) else []
    layer = next((m for m in modules if isinstance(m, nn.Linear)), None)
    return "bf16" if layer is not None and layer.weight.dtype == torch.bfloat16 else "fp32"


def torch_dtype(precision: str):
    """The torch dtype of a resolved precision."""
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
