"""Run plans: which groups each run trains on (DESIGN.md section 3).

Groups are in or out of a run's training set as a whole, so no group's pairs cross
train/test. Repeated grouped K-fold: run r holds out fold r mod K of a seeded shuffle of the
groups for repeat r div K and trains on the other K - 1 folds. Halves: each repeat draws a
random half of the groups for run 2q and gives the complement to run 2q + 1, so every group
is in exactly half of the runs of a complete repeat.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

PLANS = ("kfold", "halves")


def runs_per_repeat(kind: str, n_folds: int) -> int:
    """Runs in one repeat of a plan: K for ``kfold``, 2 for ``halves``."""
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
