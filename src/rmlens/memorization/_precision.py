"""The precision an audit's model passes run in (``backbones.resolve_precision``)."""

from __future__ import annotations

from rmlens.backbones import precision_note, resolve_precision
from rmlens.memorization._config import AuditConfig
from rmlens.rewards import resolve_device


def audit_precision(config: AuditConfig) -> tuple[str, str]:
    """The resolved precision (fp32 or bf16) of the audit's runs here, and the console's line
    on it: the fine-tuned runs' training and scoring, or the frozen backbone's encoding."""
    typed, device, task = config.precision, "cpu", "encode"
    if config.mode == "finetune":
        train = config.train
        typed, device, task = train.precision, resolve_device(train.device), "finetune"
    return resolve_precision(typed, device, task=task), precision_note(typed, device, task=task)
