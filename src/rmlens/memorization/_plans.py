"""Run plans: which groups each run trains on (DESIGN.md section 3), and the audit's plan step.

Groups are in or out of a run's training set as a whole, so no group's pairs cross
train/test. Repeated grouped K-fold: run r holds out fold r mod K of a seeded shuffle of the
groups for repeat r div K and trains on the other K - 1 folds. Halves: each repeat draws a
random half of the groups for run 2q and gives the complement to run 2q + 1, so every group
is in exactly half of the runs of a complete repeat.

The audit's plan step (``first_runs`` to ``check_training_pairs``): how many runs, which
groups each trains on, and the refusal of a plan whose run would train on no usable pair.
Both plan steps (``make_plan``, ``carve_validation``) are seeded per repeat and per run, so
the plan of more runs starts with the plan of fewer: a grown audit's finished runs keep
their training groups.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pyarrow as pa

from rmlens._errors import InputError, RmlensNote
from rmlens.experiment import AuditDir
from rmlens.memorization._config import AuditConfig
from rmlens.memorization._reliability import split_half, target_status, whole_repeats
from rmlens.memorization._run_folders import load_matrices

PLANS = ("kfold", "halves")


def runs_per_repeat(kind: str, n_folds: int) -> int:
    """Runs in one repeat of a plan: K for ``kfold``, 2 for ``halves``.

    Parameters
    ----------
    kind : str
        The plan's kind (``kfold`` or ``halves``).
    n_folds : int
        K.

    Returns
    -------
    int
    """
    return n_folds if kind == "kfold" else 2


def make_plan(
    groups, *, n_runs: int = 25, n_folds: int = 5, kind: str = "kfold", seed: int = 0
) -> pd.DataFrame:
    """One row per (run, group).

    Parameters
    ----------
    groups : array-like of str
        Group labels (duplicates allowed; the plan is over the unique, sorted labels).
    n_runs : int, default=25
    n_folds : int, default=5
        K of the grouped K-fold (ignored by ``halves``).
    kind : {"kfold", "halves"}
    seed : int, default=0

    Returns
    -------
    DataFrame with columns ``run`` (int), ``group`` (str), ``in_train`` (bool).
    """
    labels = np.array(sorted({str(g) for g in groups}), dtype=object)
    if kind not in PLANS:
        raise ValueError(f"The 'kind' parameter of make_plan must be one of {PLANS}. Got {kind!r}.")
    k = runs_per_repeat(kind, n_folds)
    if n_runs < 1:
        raise ValueError(f"The 'n_runs' parameter of make_plan must be an int >= 1. Got {n_runs}.")
    if k < 2 or len(labels) < k:
        raise ValueError(
            f"a {kind} plan needs at least {max(k, 2)} groups and folds >= 2; "
            f"got {len(labels)} groups and {k} folds"
        )
    in_train = []
    for run in range(n_runs):
        repeat, fold = divmod(run, k)
        rng = np.random.default_rng([seed, repeat])
        folds = np.array_split(rng.permutation(len(labels)), k)
        member = np.ones(len(labels), dtype=bool)
        member[folds[fold]] = False
        in_train.append(member)
    # the group column built in Arrow, without one Python string per (run, group) row
    group = pa.DictionaryArray.from_arrays(
        pa.array(np.tile(np.arange(len(labels), dtype=np.int32), n_runs)),
        pa.array(labels, pa.large_string()),
    ).cast(pa.large_string())
    return pd.DataFrame(
        {
            "run": np.repeat(np.arange(n_runs, dtype=np.int64), len(labels)),
            "group": group.to_pandas(),
            "in_train": np.concatenate(in_train),
        }
    )


def carve_validation(plan: pd.DataFrame, fraction: float, *, seed: int = 0) -> pd.DataFrame:
    """Set aside a seeded share of each run's training groups as its validation groups.

    Validation pairs are what a run may look at to make choices (early stopping): they come
    from the run's own training groups, never from its held-out groups (that would leak
    into TG). Their groups get ``in_train = False`` (the run's RM takes no gradients on
    them) and ``validation = True``; the estimators count them neither in nor out for
    that run. Per run, ``round(fraction * n_train_groups)`` groups, at least 1 when
    ``fraction > 0``, always leaving one group to train on (a run with one training group
    gets no validation group).

    Returns
    -------
    A copy of ``plan`` with the column ``validation`` (bool).
    """
    plan = plan.copy()
    in_train = plan.in_train.to_numpy(bool).copy()
    validation = np.zeros(len(plan), dtype=bool)
    if fraction > 0:
        for run, rows in plan.groupby("run", sort=True).indices.items():
            train_rows = rows[in_train[rows]]
            n_val = min(len(train_rows) - 1, max(1, int(round(fraction * len(train_rows)))))
            if n_val <= 0:
                continue
            rng = np.random.default_rng([seed, int(run), 1])
            chosen = train_rows[rng.permutation(len(train_rows))[:n_val]]
            validation[chosen] = True
            in_train[chosen] = False
    plan["in_train"] = in_train
    plan["validation"] = validation
    return plan


def planned_runs(
    groups, *, n_runs: int, n_folds: int, kind: str, seed: int, val_fraction: float = 0.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """In-runs and out-runs each group gets from a plan (validation runs count as neither).

    Returns the sorted labels and two int arrays of the same shape: runs that train on the
    group, runs that hold it out.
    """
    plan = carve_validation(
        make_plan(groups, n_runs=n_runs, n_folds=n_folds, kind=kind, seed=seed),
        val_fraction,
        seed=seed,
    )
    labels = np.array(sorted({str(g) for g in groups}), dtype=object)
    index = pd.Index(labels).get_indexer(plan.group.astype(str))
    n_in = np.bincount(index, weights=plan.in_train.to_numpy(float), minlength=len(labels))
    out = (~plan.in_train & ~plan.validation).to_numpy(float)
    n_out = np.bincount(index, weights=out, minlength=len(labels))
    return labels, n_in.astype(int), n_out.astype(int)


def runs_needed(
    groups,
    *,
    n_runs: int,
    n_folds: int,
    kind: str,
    seed: int,
    val_fraction: float = 0.0,
    at_least: int = 3,
    limit: int | None = None,
) -> int | None:
    """The smallest run count (above ``n_runs``) whose plan gives every group at least
    ``at_least`` in-runs and out-runs, with the same folds, kind, seed and validation share.

    The plan is built for each candidate, so partial repeats and validation groups count as
    they will; None when no count up to ``limit`` (default: 10 more repeats) does.
    """
    k = runs_per_repeat(kind, n_folds)
    limit = n_runs + 10 * k if limit is None else limit
    for runs in range(max(n_runs + 1, 2), limit + 1):
        _, n_in, n_out = planned_runs(
            groups, n_runs=runs, n_folds=n_folds, kind=kind, seed=seed, val_fraction=val_fraction
        )
        if n_in.min() >= at_least and n_out.min() >= at_least:
            return runs
    return None


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


def target_now(exp: AuditDir, config: AuditConfig, n_runs: int, k: int) -> dict:
    """Whether the audit stops adding repeats (``target_status``), from the runs on disk."""
    m = load_matrices(exp, n_runs)
    reliability = split_half(
        m.p, m.member, m.val, np.asarray(m.runs) // k, folds=k, p_cf=m.p_cf, seed=config.seed,
        deterministic=config.deterministic,
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


def write_plan(exp: AuditDir, record: dict, plan: pd.DataFrame, n_runs: int) -> None:
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
