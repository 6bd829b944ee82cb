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
    k = n_folds if kind == "kfold" else 2
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
