"""The Configuration section's settings: config.json as labelled rows, with the values that
ran rather than the ones left unset.

config.json of an audit holds the settings as resolved by the config (``audit``, where an
unset option is ``null``) and, beside them, what the audit resolved at run time: the
estimator, the grouping column, the folds used, the truncation. A row shows the value that
ran; an option left unset says so in brackets.
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

import pandas as pd

from rmlens._errors import InputError
from rmlens.memorization import EXECUTION_FIELDS, AuditConfig
from rmlens.rewards import STEP_FIELDS
from rmlens.rewards.objectives import FIELDS as OBJECTIVE_FIELDS
from rmlens.rewards.objectives import REGISTRY

from .._html import esc, fmt, humanise, readable_rows, table

# readable names of the settings (the option that sets each is shown beside it)
LABELS = {
    "model": "backbone",
    "mode": "training mode",
    "estimator": "estimator",
    "runs": "runs",
    "folds": "folds per repeat of the plan",
    "plan": "run plan",
    "group_by": "grouped by",
    "dedupe": "repeated data across groups",
    "val_fraction": "validation share of each run's training groups",
    "cm_threshold": "CM at or above which a pair is memorized",
    "n_boot": "bootstrap resamples over runs",
    "target_reliability": "target reliability of CM",
    "max_runs": "most runs a target may grow to",
    "max_length": "tokens per prompt + response",
    "format": "input format",
    "check_exact": "groups refitted exactly per run (exactness check)",
    "seed": "seed",
    "head": "reward head",
    "l2_grid": "L2 penalties tried (lambda)",
    "hidden_dim": "hidden units of the MLP head",
    "dropout": "dropout on the head's input",
    "lr": "learning rate",
    "epochs": "most epochs",
    "batch_size": "pairs per step",
    "weight_decay": "weight decay",
    "patience": "early-stopping patience (epochs)",
    "objective": "training objective",
    "use_margin": "Bradley-Terry with margin",
    "center_coef": "reward-centering coefficient",
    "smoothing": "label smoothing (eps)",
    "bias_features": "features of the bias-only model",
    "gamma": "weight exponent (gamma)",
    "dro_groups": "groups of the objective",
    "dro_step": "step size of the group weights",
    "guide_folds": "folds of the nested audit",
    "curate_weight": "loss weight of pairs not learned",
    "rm_kind": "reward model",
    "influence": "paired counterfactuals of a fine-tuned run",
    "influence_blocks": "last blocks whose adapters Gauss-Newton reads (0: all)",
    "finetune": "fine-tuning",
    "lora_r": "LoRA rank",
    "lora_alpha": "LoRA alpha",
    "lora_dropout": "LoRA dropout",
    "lora_targets": "LoRA target modules",
    "beta": "beta of the implicit reward",
    "loss": "loss",
    "grad_accum": "forward passes per optimizer step",
    "head_lr": "learning rate of the reward head",
    "lr_grid": "learning rates tried",
    "schedule": "learning-rate schedule",
    "warmup_ratio": "warmup share of the steps",
    "max_grad_norm": "gradient clipping norm",
    "eval_fraction": "share of training pairs evaluated each epoch",
    "save_steps": "checkpoint every (optimizer steps)",
    "packing": "prompt encoded once per pair (packing)",
    "device": "device",
    "precision": "precision of every model pass",
    "backend": "backend",
    "address": "Ray cluster address",
    "cpus_per_run": "CPUs per run (Ray)",
    "gpus_per_run": "GPUs per run (Ray)",
    "retries": "retries of a failing run",
    "abort_after": "stop after this many failed runs in a row",
    "encode_batch_size": "texts per encoding batch",
    "data_sha1": "data fingerprint (SHA-1)",
    "version": "rmlens version of the audit",
}
# the audit's own settings, in reading order (execution settings apart)
AUDIT_ORDER = ("model", "mode", "estimator", "runs", "folds", "plan", "group_by", "dedupe",
               "val_fraction", "cm_threshold", "n_boot", "target_reliability", "max_runs",
               "max_length", "format", "precision", "check_exact", "seed")  # fmt: skip
# why a setting left unset has the value it ran with, where the config's own words are long
_UNSET = {
    "estimator": "chosen by the audit",
    "group_by": "user_id if present, else the prompt",
    "check_exact": "1 with the paired estimator and the logistic head, else no check",
}
# what a one-checkpoint audit never reads: it has one run, no plan of folds or validation
# groups (the RM's own evaluation split stands in), nothing to resample or grow
_NOT_CHECKPOINT = ("folds", "plan", "val_fraction", "n_boot", "target_reliability", "max_runs",
                   "check_exact")  # fmt: skip
_RAY_FIELDS = ("address", "cpus_per_run", "gpus_per_run")
# top-level keys of an audit's config.json shown through the rows above (or elsewhere)
_SHOWN = {"audit", "version", "regime", "estimator", "estimator_note", "data_sha1", "n_pairs",
          "group_by", "group_note", "n_groups", "folds_used", "dedupe", "truncation",
          "format", "checkpoint", "precision"}  # fmt: skip


def setting_text(value: Any) -> str:
    """A setting as written: numbers without padded decimals (0.0003, 100), yes/no, lists
    joined, ``none`` for an unset value."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return fmt(value)
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(setting_text(v) for v in value) if value else "none"
    return str(value)


def option(name: str) -> str:
    """The command-line option of a config field (``l2_grid`` -> ``--l2-grid``)."""
    return "--" + name.replace("_", "-")


def settings_html(config: dict[str, Any], summary: dict[str, Any] | None) -> str:
    """Labelled tables of config.json: the audit's settings with the values that ran, the
    trainer of its mode, how the runs were executed, and anything else recorded; a record
    that is not an audit's as labelled rows."""
    audit = config.get("audit")
    if not isinstance(audit, dict):
        rows = readable_rows(config, "config.json")
        if not rows:
            return ""
        return table(pd.DataFrame(rows, columns=["setting", "value"]), classes="settings")
    html = ""
    if config.get("regime"):
        html += f'<p class="note">Training regime: {esc(config["regime"])}.</p>'
    html += _rows_table(_audit_rows(config, audit, summary or {}), "the audit")
    for key, spec in AuditConfig._nested.items():
        nested = audit.get(key)
        if not isinstance(nested, dict) or (spec.when and audit.get(spec.when[0]) != spec.when[1]):
            continue
        skip = set(spec.shared) | set(spec.owned)
        rows = [_row(name, nested[name]) for name in nested
                if name not in skip and _applies(name, nested)]  # fmt: skip
        what = "the head trained in every run" if key == "head" else (
            "the fine-tuning of every run")  # fmt: skip
        mode = f" ({spec.when[1]} mode)" if spec.when else ""
        html += _rows_table(rows, what + mode)
    ray = audit.get("backend") == "ray"  # Ray's own settings are read only on Ray
    execution = [_row(name, audit[name]) for name in EXECUTION_FIELDS
                 if name in audit and name not in AUDIT_ORDER
                 and (ray or name not in _RAY_FIELDS)]  # fmt: skip
    html += _rows_table(execution, "how the runs were executed (never changes the results)")
    known = {f.name for f in fields(AuditConfig)} | set(AuditConfig._nested)
    extra_audit = {k: v for k, v in audit.items() if k not in known}
    extra = {k: v for k, v in config.items() if k not in _SHOWN}
    rows = readable_rows({**({"audit": extra_audit} if extra_audit else {}), **extra},
                         "config.json")  # fmt: skip
    if rows:
        html += table(pd.DataFrame(rows, columns=["recorded", "value"]), classes="settings",
                      caption="also recorded in config.json")  # fmt: skip
    return html


def _audit_rows(config: dict, audit: dict, summary: dict) -> list[dict[str, str]]:
    """The audit's settings in reading order, each with the value that ran."""
    truncation = config.get("truncation")
    resolved = {
        "estimator": config.get("estimator") or summary.get("estimator"),
        "group_by": config.get("group_by"),
        "folds": config.get("folds_used"),
        "max_length": truncation.get("max_length") if isinstance(truncation, dict) else None,
        "format": config.get("format") or summary.get("format"),
        "precision": config.get("precision", "fp32"),  # a record before bf16: fp32
        "check_exact": _check_exact(config, summary) if audit.get("check_exact") is None
        else None,
    }  # fmt: skip
    unset = {f.name: f.metadata.get("unset") for f in fields(AuditConfig)}
    rows = []
    skip = _NOT_CHECKPOINT if config.get("checkpoint") else ()
    for name in AUDIT_ORDER:
        if name not in audit or name in skip:
            continue
        value, ran = audit[name], resolved.get(name)
        if name == "max_runs" and audit.get("target_reliability") is None:
            continue  # read only with a target
        why = _UNSET.get(name) or unset.get(name)
        if ran is not None and ran != value:
            how = f"left unset: {why or 'chosen by the audit'}" if value is None else (
                f"resolved from {setting_text(value)}")  # fmt: skip
            text = f"{setting_text(ran)} ({how})"
        elif value is None and why:
            text = why if why.startswith("none") else f"none ({why})"
        else:
            text = setting_text(value)
        if name == "group_by" and config.get("n_groups") is not None:
            text += f"; {setting_text(config['n_groups'])} groups"
        rows.append(_row(name, text))
    rows += _checkpoint_rows(config.get("checkpoint"), summary.get("checkpoint"))
    for key, label in (("n_pairs", "pairs audited"), ("data_sha1", LABELS["data_sha1"]),
                       ("version", LABELS["version"])):  # fmt: skip
        if config.get(key) is not None:
            rows.append({"setting": label, "value": setting_text(config[key]), "option": ""})
    return rows


def _checkpoint_rows(record: Any, ran: Any) -> list[dict[str, str]]:
    """A one-checkpoint audit's RM, its damping (as given, or the value that ran and how it
    was chosen) and its training pairs; its standing is the Reward models section's."""
    if not isinstance(record, dict):
        return []
    ran = ran if isinstance(ran, dict) else {}
    if record.get("damping") is not None:
        damping = setting_text(record["damping"])
    elif ran.get("damping") is not None:
        how = ran.get("damping_how") or "chosen by the audit"
        damping = f"{setting_text(ran['damping'])} (left unset: {how})"
    else:
        damping = "none (left unset: calibrated on the RM's evaluation split, if it has one)"
    rows = [
        {"setting": "RM audited (one checkpoint)", "value": setting_text(record.get("rm")),
         "option": "--rm"},
        {"setting": "damping of its Gauss-Newton step, x tr(G)/min(q, n)", "value": damping,
         "option": "--checkpoint-damping"},
    ]  # fmt: skip
    if record.get("blocks"):
        rows.append({"setting": "gradients read through",
                     "value": f"the linear layers of its last {record['blocks']} blocks and "
                              "its head (a cheaper reading)",
                     "option": "--checkpoint-blocks"})  # fmt: skip
    if record.get("training_pairs"):
        rows.append({"setting": "its training pairs", "value": str(record["training_pairs"]),
                     "option": ""})  # fmt: skip
    return rows


def _check_exact(config: dict, summary: dict) -> int | None:
    """Groups refitted per run when ``check_exact`` was left unset, by the audit's own rule
    (``AuditConfig.exact_checks``); None when the estimator or the settings are unknown."""
    estimator = config.get("estimator") or summary.get("estimator")
    if not estimator:
        return None
    try:
        return AuditConfig.from_dict(config.get("audit") or {}).exact_checks(estimator)
    except InputError:  # settings of another version
        return None


def _applies(name: str, nested: dict) -> bool:
    """Whether a field of the head or fine-tuning config is read with its other values: the
    logistic head has no steps, and an objective's own fields only matter under it."""
    if nested.get("head") == "logistic" and name in STEP_FIELDS:
        return False
    if name == "hidden_dim" and nested.get("head") != "mlp":
        return False
    if name == "l2_grid" and nested.get("head") != "logistic":
        return False
    if name not in OBJECTIVE_FIELDS:
        return True
    objective = REGISTRY.get(nested.get("objective"))
    return objective is not None and name in objective.fields


def _row(name: str, value: Any) -> dict[str, str]:
    """One labelled row; ``value`` a setting, or its text already written."""
    text = value if isinstance(value, str) else setting_text(value)
    return {"setting": LABELS.get(name, humanise(name)), "value": text, "option": option(name)}


def _rows_table(rows: list[dict[str, str]], caption: str) -> str:
    if not rows:
        return ""
    return table(
        pd.DataFrame(rows), classes="settings", caption=caption, cell_classes={"option": "option"}
    )
