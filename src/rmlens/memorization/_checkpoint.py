"""The one-checkpoint audit: TM, TG and CM of every pair from an RM's single training run.

An RM trained on all the pairs is one run in which every group is in (its own evaluation
split aside: read by its early stopping, so neither in nor out). Each group's removal,
a Gauss-Newton step through the RM's trained parameters (LoRA adapters and head, or every
weight of a full fine-tune)
(``rmlens.rewards._influence.gauss_newton_counterfactuals``), gives its pairs' out-side:
TM_i = p_i, TG_i = p_i with i's group removed, CM_i = TM_i - TG_i, the paired estimator of
one run. No brute force exists to calibrate the damping on, so it is the value that
calibration chose on the benchmark (``CHECKPOINT_DAMPING``), and the summary states how
far one-checkpoint CM agreed there with a multi-run paired audit (``STANDING``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

from rmlens._errors import InputError
from rmlens.data._fingerprint import data_sha1
from rmlens.experiment import ExperimentDir
from rmlens.memorization._config import AuditConfig
from rmlens.memorization._directory import check_resume, group_pairs, make_record, output_errors
from rmlens.memorization._finish import finish
from rmlens.memorization._notes import say_summary
from rmlens.memorization._plans import write_plan
from rmlens.memorization._quality import run_quality
from rmlens.memorization._run_folders import RunOutput, write_run
from rmlens.progress import status
from rmlens.rewards._config import TrainConfig

# The damping (x tr(G)/min(q, n)) that calibration to brute force chose for LoRA RMs on
# the benchmark (benchmarks/finetune_paired.py), and what the one-checkpoint CM reached
# there against a 5-run paired audit of the same pairs.
CHECKPOINT_DAMPING = 1.0
STANDING = (
    "one-checkpoint CM: one training, each group removed by a Gauss-Newton step at the "
    "damping calibrated on the benchmark; its agreement with a multi-run paired audit is "
    "measured in benchmarks/finetune_paired.py"
)


def trained_record(rm: Path) -> tuple[dict, dict]:
    """The RM's ``rm_config.json`` and the ``train.json`` of its training; refuses, in one
    line, an RM whose training pairs cannot be matched."""
    config, train = rm / "rm_config.json", rm / "train.json"
    if not config.is_file():
        raise InputError(
            f"`rm` {rm}: no rm_config.json; the one-checkpoint audit takes an RM folder written "
            "by `rmlens train` (a fine-tuned explicit RM)"
        )
    saved = json.loads(config.read_text())
    if saved.get("kind") != "explicit_finetuned":
        raise InputError(
            f"`rm` {rm}: a {saved.get('kind')} RM; the one-checkpoint audit runs through the "
            "trained parameters of a fine-tuned explicit RM (`rmlens train`)"
        )
    if not train.is_file():
        raise InputError(
            f"`rm` {rm}: no train.json, so the pairs it was trained on cannot be matched "
            "(the one-checkpoint audit needs the RM's own training record)"
        )
    record = json.loads(train.read_text())
    if int((record.get("train_config") or {}).get("ensemble", 1)) > 1:
        raise InputError(f"`rm` {rm}: an ensemble; audit one member's folder")
    return saved, record


def audit_rm(
    pairs: pd.DataFrame,
    rm: str | Path,
    config: AuditConfig | None = None,
    *,
    out: str | Path,
    damping: float | None = None,
    device: str = "auto",
    quiet: bool = False,
) -> pd.DataFrame:
    """Audit an existing fine-tuned RM from its one training run.

    Parameters
    ----------
    pairs : DataFrame
        Exactly the pairs the RM was trained on (their fingerprint is checked against the
        RM's ``train.json``).
    rm : str or Path
        A folder written by ``rmlens train`` (explicit RM, LoRA or full).
    config : AuditConfig, optional
        Grouping (``group_by``), ``n_boot``, ``cm_threshold``; the training settings are
        the RM's own.
    out : str or Path
        The audit directory (the usual files, one run).
    damping : float, optional
        Damping of the Gauss-Newton step, relative to tr(G) / min(q, n); default
        ``CHECKPOINT_DAMPING``, the value calibrated on the benchmark.
    device : str, default="auto"
        Where the gradients are computed.
    quiet : bool, default=False
        No status lines.

    Returns
    -------
    DataFrame
        The memorization table, as :func:`rmlens.memorization.audit` returns it.
    """
    from rmlens.rewards import load_rm
    from rmlens.rewards._finetune_torch import examples_of, influence_scores
    from rmlens.rewards._trainer_base import group_codes
    from rmlens.rewards.finetune import eval_split

    folder = Path(rm)
    damping = CHECKPOINT_DAMPING if damping is None else float(damping)
    _, trained = trained_record(folder)
    if data_sha1(pairs) != trained.get("data_sha1"):
        raise InputError(
            f"`data`: not the pairs `rm` {folder} was trained on ({len(pairs)} pairs, "
            f"fingerprint {data_sha1(pairs)[:12]}; its train.json: {trained.get('n_train')} "
            f"pairs, {str(trained.get('data_sha1'))[:12]}): pass its training file as it was"
        )
    train_cfg = TrainConfig.from_dict(trained["train_config"])
    config = _config_of(config or AuditConfig(), train_cfg)
    grouping = group_pairs(pairs, config)
    exp = ExperimentDir(out)
    trained_part = "every weight" if train_cfg.finetune == "full" else "its LoRA adapters and head"
    note = (f"one checkpoint ({folder}): each group removed by a Gauss-Newton step through "
            f"{trained_part}, damping {damping:g} x tr(G)/min(q, n)")  # fmt: skip
    record = make_record(pairs, config, grouping, "paired", note)
    record["checkpoint"] = {"rm": str(folder), "damping": damping, "standing": STANDING,
                            "rm_data_sha1": trained.get("data_sha1")}  # fmt: skip
    with output_errors(exp):
        saved = check_resume(exp, record)
    if saved is None or not exp.run_done(0):
        start = time.perf_counter()
        if not quiet:
            status(f"{folder}: gradients of {len(pairs)} pairs through {trained_part}")
        model = load_rm(folder, device=device)
        net = model.net
        for name, param in net.named_parameters():  # what training moved
            param.requires_grad_(train_cfg.finetune == "full" or "lora_" in name
                                 or name.startswith("head."))  # fmt: skip
        backbone = model.backbone
        backbone.format = model.format
        examples, kept = examples_of(pairs, backbone, train_cfg, implicit=False)
        fit, held = eval_split(np.flatnonzero(kept), train_cfg.eval_fraction, train_cfg.seed)
        margin = pairs["margin"].to_numpy(float) if "margin" in pairs else None
        state = SimpleNamespace(config_=train_cfg, net_=net, examples_=examples, kept_=kept,
                                runtime_=model.runtime, margin_=margin,
                                groups_codes_=group_codes(grouping.groups))  # fmt: skip
        r, (p, p_cf, _) = influence_scores(state, fit, held, damping=(damping,))
        member = np.zeros(len(pairs), bool)
        member[fit] = True
        val = np.zeros(len(pairs), bool)
        val[held] = True
        plan = pd.DataFrame({"run": 0, "group": pd.unique(grouping.groups.astype(str)),
                             "in_train": True, "validation": False})  # fmt: skip
        record["format"] = model.format
        with output_errors(exp):
            write_plan(exp, record, plan, 1)
        ids = pairs.id.to_numpy()
        manifest = {
            "run": 0, "seed": train_cfg.seed, "n_train": int(len(fit)),
            "train_ids": ids[fit].tolist(), "n_val": int(len(held)),
            "val_ids": ids[held].tolist(), "estimator": "paired",
            "quality": run_quality(np.where(kept, p, np.nan), kept & member, kept & val),
            "metrics": {"influence_seconds": time.perf_counter() - start, "damping": damping},
        }  # fmt: skip
        output = RunOutput(r[:, 0], r[:, 1], manifest["metrics"], None, p, p_cf[:, 0])
        with output_errors(exp):
            write_run(exp, 0, ids, kept, output, manifest)
    with output_errors(exp):
        table = finish(pairs, grouping.groups, config, exp, quiet=quiet)
        summary = exp.read_json("summary.json")
        summary["checkpoint"] = record["checkpoint"]
        summary["reliability"]["reason"] = (
            "one training run: no split-half reliability; how far one-checkpoint CM agrees "
            f"with a multi-run paired audit was measured on the benchmark ({STANDING})"
        )
        exp.write_json(summary, "summary.json")
    say_summary(summary)
    return table


def _config_of(config: AuditConfig, train: TrainConfig) -> AuditConfig:
    """The audit's settings: the user's grouping and outputs, the RM's training."""
    if config.dedupe != "none":
        raise InputError(
            f"`dedupe` {config.dedupe}: the RM was trained on every given pair; the "
            "one-checkpoint audit reads them as they are (`dedupe` none)"
        )
    return config.replace(
        mode="finetune", train=train, model=train.model, max_length=train.max_length,
        format=train.format, seed=train.seed, estimator="paired", check_exact=None, runs=1,
        n_boot=0,  # one run: no run to resample
    )  # fmt: skip
