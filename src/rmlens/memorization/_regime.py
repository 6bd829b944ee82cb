"""What each run of an audit trains: the trainers' defaults, and the regime in words.

``audit_head`` and ``audit_train`` are the defaults of :class:`AuditConfig`'s ``head`` and
``train`` (so of ``rmlens memorize``'s options); the words here (the objective, the
validation groups) make up ``config.json``'s ``regime`` (``_config.regime_words``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rmlens.rewards import HeadConfig, ObjectiveConfig, TrainConfig
from rmlens.rewards.objectives import objective_of

# numpy is imported when a function runs: AuditConfig (and so ``rmlens --help``) reads
# this module's defaults without it
if TYPE_CHECKING:
    import pandas as pd


# how a one-checkpoint audit's regime begins for an RM trained outside rmlens
TRAINED_ELSEWHERE = "one RM trained outside rmlens"

def audit_head() -> HeadConfig:
    """Frozen runs of an audit: the convex head, whose paired counterfactuals are exact up
    to about 1e-6 (its Newton steps against exact refits)."""
    return HeadConfig(head="logistic")


def audit_train() -> TrainConfig:
    """Fine-tuned runs of an audit: LoRA that fits its training pairs, as a practitioner's RM.

    ``rmlens train``'s own defaults (at most 4 epochs, early stopping with patience 1 and the
    best epoch kept, lr 3e-4, head lr 2e-3), with two differences. The rate is chosen per run
    by the validation rule: each rate of ``lr_grid`` trains from the base weights, and the one
    with the lowest validation loss is kept (budget: 2 rates x at most 4 epochs). A run's
    validation pairs are whole groups carved from its own training groups
    (``AuditConfig.val_fraction``, never its held-out groups), so ``eval_fraction`` is 0.
    """
    return TrainConfig(lr_grid=(1e-4, 3e-4), eval_fraction=0.0)


def objective_words(trainer: ObjectiveConfig) -> str:
    """The objective of a ``HeadConfig`` or ``TrainConfig`` in words (none for ``bt``)."""
    return objective_of(trainer).words(trainer)


def validation_count(fraction: float, n_train: int) -> int:
    """Validation groups of a run with ``n_train`` training groups (``carve_validation``):
    ``round(fraction * n_train)``, at least 1 when ``fraction > 0``, always leaving 1 to
    train on."""
    if fraction <= 0:
        return 0
    return max(0, min(n_train - 1, max(1, int(round(fraction * n_train)))))


def planned_validation(
    n_groups: int, *, kind: str, folds: int, fraction: float
) -> list[tuple[int, int]]:
    """(validation groups, training groups) of the runs of one repeat of a plan over
    ``n_groups`` groups: ``make_plan`` splits the groups into near-equal parts (K folds, or
    two halves) and ``carve_validation`` takes whole groups from each run's training part."""
    import numpy as np

    k = folds if kind == "kfold" else 2
    held = [len(part) for part in np.array_split(np.arange(n_groups), k)]
    return [(validation_count(fraction, n_groups - n_out), n_groups - n_out) for n_out in held]


def plan_validation(plan: pd.DataFrame) -> list[tuple[int, int]] | None:
    """(validation groups, training groups with them) of each run of a plan as written to
    plan.parquet; None when the plan has no ``validation`` column.

    Parameters
    ----------
    plan : DataFrame or None
        The plan as written to ``plan.parquet``: one row per run and group, with ``run``,
        ``in_train`` and ``validation`` (bool).

    Returns
    -------
    list of (int, int) or None
        Per run, in increasing run number: its validation groups and its training groups
        with them (rows with ``in_train`` or ``validation``); None when ``plan`` is None or
        lacks any of ``run``, ``in_train``, ``validation``.
    """
    import numpy as np

    if plan is None or not {"run", "in_train", "validation"} <= set(plan.columns):
        return None
    val = plan["validation"].to_numpy(bool)
    train = plan["in_train"].to_numpy(bool) | val
    runs = plan["run"].to_numpy()
    return [(int(val[runs == r].sum()), int(train[runs == r].sum()))
            for r in np.unique(runs)]  # fmt: skip


def _span(values: Sequence[int]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:,}" if lo == hi else f"{lo:,} to {hi:,}"


def validation_words(fraction: float, counts: Sequence[tuple[int, int]] | None = None) -> str:
    """Which of a run's training groups are its validation groups, in words.

    Parameters
    ----------
    fraction : float
        ``val_fraction``, the share asked for.
    counts : sequence of (int, int), optional
        Per run, its validation groups and its training groups (validation included), from
        :func:`plan_validation` or :func:`planned_validation`.

    Returns
    -------
    str
        ``"1 of each run's 3 training groups (share 0.2, whole groups)"``, with ranges when
        runs differ; without ``counts``, the share with its rounding rule.

    Examples
    --------
    >>> validation_words(0.2, [(1, 3)] * 4)
    "1 of each run's 3 training groups (share 0.2, whole groups)"
    >>> validation_words(0.2)
    "a 0.2 share of each run's training groups, rounded to whole groups (at least 1)"
    """
    if not counts:
        return (f"a {fraction:g} share of each run's training groups, rounded to whole groups "
                "(at least 1)")  # fmt: skip
    val, train = [c[0] for c in counts], [c[1] for c in counts]
    text = (f"{_span(val)} of each run's {_span(train)} training groups (share {fraction:g}, "
            "whole groups)")  # fmt: skip
    without = sum(1 for v in val if v == 0)
    if without and without < len(val):
        text += f"; {without} of {len(val)} runs had none (one training group)"
    return text


def checkpoint_regime(ckpt) -> str:
    """How the one RM audited was trained, in words (``config.json``'s ``regime``): once, on
    every given pair, its evaluation split aside; an audit's per-run words would describe
    runs and validation pairs that a checkpoint never had."""
    if ckpt.unchecked:
        return f"{TRAINED_ELSEWHERE} (its regime is not recorded), read on every pair"
    t = ckpt.train
    what = (f"one RM: {t.model} fine-tuned ({t.finetune}, {t.rm_kind} RM) once, lr {t.lr:g}, "
            f"head lr {t.head_lr:g}, weight decay {t.weight_decay:g}, at most {t.epochs} "
            f"epochs{objective_words(t)}")  # fmt: skip
    if not ckpt.has_eval:
        return what + ", on every pair (no evaluation split)"
    stop = (f"early stopping with patience {t.patience} on it" if t.patience
            else "every epoch trained, the last kept")  # fmt: skip
    return (what + f", on every pair but its evaluation split (a {t.eval_fraction:g} share of "
            f"the pairs, never trained on, neither in nor out; {stop})")
