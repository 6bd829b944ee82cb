"""The audit's plan step: how many runs, which groups each trains on, and the refusal of a
plan whose run would train on no usable pair.

Both plan steps (``make_plan``, ``carve_validation``) are seeded per repeat and per run, so
the plan of more runs starts with the plan of fewer: a grown audit's finished runs keep
their training groups.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from rmlens._errors import InputError, RmlensNote
from rmlens.experiment import ExperimentDir
from rmlens.memorization._config import AuditConfig
from rmlens.memorization._plan import carve_validation, make_plan
from rmlens.memorization._reliability import split_half, target_status, whole_repeats
from rmlens.memorization._runs import load_matrices


def first_runs(config: AuditConfig, k: int) -> int:
    """The runs an audit starts from: ``runs``, rounded up to whole repeats of ``k`` runs with
    a target reliability (checked against ``max_runs``)."""
    if config.target_reliability is None:
        return config.runs
    first = whole_repeats(config.runs, k, up=True)
    cap = whole_repeats(config.max_runs, k, up=False)
    if first > cap:
        raise InputError(
            f"`max_runs` {config.max_runs} holds {cap // k} whole repeat(s) of {k} runs, fewer "
            f"than `runs` {config.runs} rounded up to whole repeats ({first} runs); raise "
            "`max_runs` or lower `runs`"
        )
    return first


def start_runs(config: AuditConfig, saved: dict | None, first: int, k: int) -> int:
    """The plan's run count to start from: ``runs``; with a target, never fewer than the
    saved audit has (its finished runs are kept), in whole repeats."""
    if config.target_reliability is None:
        return config.runs
    had = (saved or {}).get("audit", {}).get("runs")
    if first != config.runs:
        warnings.warn(
            f"`runs` {config.runs} is not a whole number of repeats of {k} runs: "
            f"starting from {first} runs",
            RmlensNote,
            stacklevel=3,
        )
    return whole_repeats(max(first, had if isinstance(had, int) else 0), k, up=True)


def target_now(exp: ExperimentDir, config: AuditConfig, n_runs: int, k: int) -> dict:
    """Whether the audit stops adding repeats (``target_status``), from the runs on disk."""
    m = load_matrices(exp, n_runs)
    reliability = split_half(
        m.p, m.member, m.val, np.asarray(m.runs) // k, folds=k, p_cf=m.p_cf, seed=config.seed
    )
    return target_status(
        reliability,
        config.target_reliability,
        runs=n_runs,
        max_runs=config.max_runs,
        folds=k,
        missing=n_runs - len(m.runs),
    )


def build_plan(
    groups: pd.Series, n_runs: int, folds: int, config: AuditConfig, note: str
) -> pd.DataFrame:
    """The plan of ``n_runs`` runs, with each run's validation groups for early stopping
    (carved from its own training groups)."""
    try:
        plan = make_plan(groups, n_runs=n_runs, n_folds=folds, kind=config.plan, seed=config.seed)
    except ValueError as err:
        raise InputError(f"{err} ({note})") from err
    share = config.val_fraction if config.validates else 0.0
    return carve_validation(plan, share, seed=config.seed)


def write_plan(exp: ExperimentDir, record: dict, plan: pd.DataFrame, n_runs: int) -> None:
    """The plan in plan.parquet, and ``n_runs`` in config.json: the real run count (a target
    grows it past ``runs``); a killed writer's temporary files go (one audit per folder)."""
    record["audit"]["runs"] = n_runs
    exp.write_record(record)
    exp.write_plan(plan)
    for folder in (exp.path, *(exp.run_dir(r) for r in range(n_runs))):
        exp.clean_stale(folder)


def membership_matrix(
    plan: pd.DataFrame, groups: pd.Series, runs: int, which: str = "in_train"
) -> np.ndarray:
    """(n_runs, n_pairs) bool: whether each run's plan puts each pair's group in training
    (``which="in_train"``) or in validation (``which="validation"``)."""
    n = len(plan) // runs
    column = plan.group.array
    blocks = len(plan) == n * runs and np.array_equal(
        plan.run.to_numpy(), np.repeat(np.arange(runs), n)
    )
    if blocks and all(bool((column[r * n : (r + 1) * n] == column[:n]).all()) for r in range(runs)):
        # make_plan's layout: every run lists the same groups in the same order, so only one
        # run's labels are hashed (not n_runs x n_groups strings)
        labels = pd.Index(column[:n])
        by_group = plan[which].to_numpy(bool).reshape(runs, n)
    else:
        labels = pd.Index(np.sort(plan.group.unique()))
        by_group = np.zeros((runs, len(labels)), dtype=bool)
        by_group[plan.run.to_numpy(), labels.get_indexer(plan.group)] = plan[which].to_numpy(bool)
    codes = labels.get_indexer(groups.astype(str))
    return by_group[:, codes] & (codes >= 0)


def check_training_pairs(kept: np.ndarray, member: np.ndarray, val: np.ndarray,
                         pending: list[int], groups: pd.Series) -> None:  # fmt: skip
    """Refuse a plan with a run that would train on no usable pair (``InputError``)."""
    trains = (kept & member[pending] & ~val[pending]).sum(axis=1)
    empty = [run for run, n in zip(pending, trains) if n == 0]
    if not empty:
        return
    dropped = int((~kept).sum())
    shown = ", ".join(map(str, empty[:5])) + (", ..." if len(empty) > 5 else "")
    raise InputError(
        f"{int(kept.sum())} usable pair(s) left of {len(kept)} ({dropped} dropped: chosen == "
        f"rejected after truncation), in {groups[kept].nunique()} of {groups.nunique()} "
        f"groups; {len(empty)} run(s) of the plan ({shown}) would train on none, and every "
        "run needs at least one: give more pairs, or more groups with usable pairs"
    )
