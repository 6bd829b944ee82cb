"""How good each run's RM is, and the audit's warnings in plain words (DESIGN.md section 3).

An audit only says what reward models memorize if its RMs behave like reward models: they
should fit their training pairs without interpolating them, and do better than chance on
pairs they never saw. Each run is measured on three disjoint sets of pairs:

    in_train    pairs the run's RM took gradients on (its manifest's ``train_ids``)
    validation  pairs of its validation groups (``val_ids``): read by early stopping only
    held_out    pairs of the groups the run holds out: what TG averages over

with accuracy (share of pairs with r+ > r-, a tie counting 1/2) and log-loss
-mean log sigmoid(r+ - r-) (the Bradley-Terry loss without margin).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rmlens._io import number
from rmlens.data import word_counts
from rmlens.memorization._config import AuditConfig
from rmlens.memorization._plans import runs_needed
from rmlens.memorization._summary import idle_runs
from rmlens.stats import log_loss, pairwise_accuracy

CHANCE = 0.5  # accuracy of a reward model that guesses
NEAR_CHANCE = 0.05  # held-out accuracy within this of chance: the RMs barely generalize
INTERPOLATED_TM = 0.99  # TM above this for most pairs: the RMs interpolate
WEAK_ACCURACY = 0.6  # held-out accuracy below this: the RMs are weak
WEAK_MARGIN = 0.05  # held-out accuracy within this of the length-only rule: weak
WEAK_NOT_LEARNED = 0.25  # this share of pairs with TM < 1/2 or more: weak
MIN_RUNS = 3  # fewer in- or out-runs than this: an estimate from too few runs
SPLITS = ("in_train", "validation", "held_out")
EDGE_SHARE = 0.1  # runs whose lambda is at an edge of --l2-grid: warned from this share on


def split_quality(p: np.ndarray) -> dict[str, float]:
    """Pairs, accuracy and log-loss of the probabilities p = sigmoid(r+ - r-), shape (n,)."""
    p = np.asarray(p, dtype=float)
    p = p[np.isfinite(p)]
    if not p.size:
        return {"n": 0, "accuracy": float("nan"), "log_loss": float("nan")}
    accuracy = pairwise_accuracy(p, 0.5)  # p == 0.5: a tie (r+ == r-), counts 1/2
    return {"n": int(p.size), "accuracy": accuracy, "log_loss": log_loss(p)}


def run_quality(p: np.ndarray, member: np.ndarray, val: np.ndarray) -> dict[str, dict]:
    """One run's quality on its in-train, validation and held-out pairs; arrays (n_pairs,)."""
    p = np.asarray(p, dtype=float)
    scored = np.isfinite(p)
    return {
        "in_train": split_quality(p[member & scored]),
        "validation": split_quality(p[val & scored]),
        "held_out": split_quality(p[~member & ~val & scored]),
    }


def _mean_std(values: list[float]) -> dict[str, float]:
    x = np.asarray([v for v in values if np.isfinite(v)], dtype=float)
    if not x.size:
        return {"mean": float("nan"), "std": float("nan")}
    return {"mean": float(x.mean()), "std": float(x.std(ddof=1)) if x.size > 1 else 0.0}


def rm_quality(
    p: np.ndarray, member: np.ndarray, val: np.ndarray, runs: list[int], extra: list[dict]
) -> dict:
    """``summary.json``'s ``rm_quality``: every run, then mean and std over runs.

    Parameters
    ----------
    p, member, val : ndarray of shape (n_pairs, n_runs)
        sigmoid(r+ - r-) (NaN: not scored), training membership and validation membership.
    runs : list of int
        The run number of each column.
    extra : list of dict
        Per run, more to record (epochs trained, best epoch), from the run's manifest.
    """
    per_run = []
    for j, run in enumerate(runs):
        record = {"run": int(run), **run_quality(p[:, j], member[:, j], val[:, j])}
        record.update(extra[j])
        per_run.append(record)
    summary: dict = {"chance_accuracy": CHANCE}
    for split in SPLITS:
        if split == "validation" and not any(r["validation"]["n"] for r in per_run):
            continue
        summary[split] = {
            metric: _mean_std([r[split][metric] for r in per_run])
            for metric in ("accuracy", "log_loss")
        }
    summary["runs"] = per_run
    return summary


def runs_warning(
    table: pd.DataFrame, planned: pd.DataFrame, runs: int, fix: int | None
) -> dict | None:
    """Pairs the plan leaves with fewer than ``MIN_RUNS`` in- or out-runs, and the fix.

    ``planned`` holds each pair's planned ``n_in`` and ``n_out`` (validation runs count as
    neither); ``fix`` is the smallest ``--runs`` that gives every pair enough of both.
    """
    few_in = planned.n_in.to_numpy() < MIN_RUNS
    few_out = planned.n_out.to_numpy() < MIN_RUNS
    n = int((few_in | few_out).sum())
    if not n:
        return None
    how = (
        f"`runs` {fix} gives every pair at least {MIN_RUNS} of each"
        if fix
        else "more runs (or more folds) would give them more"
    )
    return {
        "code": "few_runs",
        "message": (
            f"the plan of {runs} runs leaves {n} of {len(table)} pairs with fewer than "
            f"{MIN_RUNS} in-runs or out-runs ({int(few_in.sum())} with fewer than {MIN_RUNS} "
            f"in, {int(few_out.sum())} with fewer than {MIN_RUNS} out): their TM, TG and CM "
            f"rest on few runs; {how}"
        ),
        "pairs": n,
        "runs_that_fix_it": fix,
    }


def learning_warning(quality: dict, config: AuditConfig, *, foreign: bool = False) -> dict | None:
    """The runs whose RM did not learn, the first one's reason and what to change; None when
    every run learned. Listed first among the warnings: such runs' TM, TG and CM measure
    noise. ``foreign``: one RM trained outside rmlens, whose settings rmlens does not know,
    so the advice names what to check, never rmlens's defaults."""
    runs = quality.get("runs") or []
    idle = idle_runs(quality)
    if not idle:
        return None
    if foreign:
        fix = ("check how it was trained: its training logs (did the loss fall?), the "
               "epochs and learning rate you set, and that --data holds the pairs it was "
               "trained on, chosen and rejected the right way round")
    elif config.mode == "finetune":
        t = config.train
        fix = f"raise `epochs` (now {t.epochs}), `lr` (now {t.lr:g}) or `lora_r` (now {t.lora_r})"
    elif config.head.convex:
        grid = ", ".join(f"{x:g}" for x in config.head.l2_grid)
        fix = f"give `l2_grid` smaller penalties (now {grid}), or check the features"
    else:
        fix = f"raise `epochs` (now {config.head.epochs}) or `lr` (now {config.head.lr:g})"
    which = ("the RM did not learn (" if len(runs) == 1
             else f"{len(idle)} of {len(runs)} runs' RMs did not learn (run {idle[0][0]}: ")
    return {
        "code": "not_learned",
        "message": f"{which}{idle[0][1]}): TM, TG and CM measure noise; {fix}",
        "runs": [int(run) for run, _ in idle],
    }


def audit_warnings(table: pd.DataFrame, quality: dict) -> list[dict]:
    """The plain-word warnings about the RMs themselves (``code``, ``message``)."""
    warnings = []
    held = number(quality.get("held_out", {}).get("accuracy", {}).get("mean"))
    if np.isfinite(held) and abs(held - CHANCE) <= NEAR_CHANCE:
        warnings.append(
            {
                "code": "barely_generalize",
                "message": (
                    f"the RMs barely generalize: held-out accuracy {held:.3f} is within "
                    f"{NEAR_CHANCE} of chance ({CHANCE}); TG is near 0.5 for most pairs, "
                    "and CM mostly reflects fitting"
                ),
            }
        )
    else:
        weak = weak_rm_warning(table, held)
        if weak:
            warnings.append(weak)
    tm = table.tm.to_numpy(float)
    tm = tm[np.isfinite(tm)]
    high = float(np.mean(tm > INTERPOLATED_TM)) if tm.size else 0.0
    if high > 0.5:
        warnings.append(
            {
                "code": "interpolate",
                "message": (
                    f"the RMs interpolate their training pairs: {high:.0%} of pairs have "
                    f"TM > {INTERPOLATED_TM}; TM carries no information"
                ),
            }
        )
    return warnings


def length_rule_accuracy(table: pd.DataFrame) -> float:
    """Accuracy of the rule "the longer response (in words) wins" on the audit's pairs (a
    tie counts 1/2): what a length-only RM gets without training."""
    d = word_counts(table["chosen"]) - word_counts(table["rejected"])
    return pairwise_accuracy(d) if len(d) else float("nan")


def weak_rm_warning(table: pd.DataFrame, held: float) -> dict | None:
    """The RMs are weak when their held-out accuracy is under ``WEAK_ACCURACY``, or within
    ``WEAK_MARGIN`` of (or below) the length-only rule on the same pairs, or when
    ``WEAK_NOT_LEARNED`` of the pairs or more are not learned even when trained on (TM below
    1/2): then TG and CM describe a weak RM, and many pairs are neither learned nor
    memorized. (Chance-level RMs get the ``barely_generalize`` warning instead.)"""
    if not np.isfinite(held):
        return None
    tm = table.tm.to_numpy(float)
    tm = tm[np.isfinite(tm)]
    not_learned = float(np.mean(tm < 0.5)) if tm.size else 0.0
    length = length_rule_accuracy(table) if {"chosen", "rejected"} <= set(table) else np.nan
    reasons, readings = [], []
    if held < WEAK_ACCURACY:
        reasons.append(f"held-out accuracy {held:.3f} is below {WEAK_ACCURACY}")
    if np.isfinite(length) and held < length + WEAK_MARGIN:
        reasons.append(f"held-out accuracy {held:.3f} is {held - length:+.3f} from a rule that "
                       f"picks the longer response ({length:.3f} on the same pairs)")
        readings.append("what they generalize may be mostly length")
    if not_learned >= WEAK_NOT_LEARNED:
        reasons.append(f"{not_learned:.0%} of pairs are not learned even when trained on "
                       "(TM < 0.5)")
        readings.append("many pairs are neither learned nor memorized")  # fmt: skip
    if not reasons:
        return None
    why = f" ({'; '.join(readings)})" if readings else ""
    return {
        "code": "weak_rm",
        "message": (f"the RMs are weak: {'; '.join(reasons)}: read TG and CM as those of a "
                    f"weak RM{why}"),
        "heldout_accuracy": held,
        "length_rule_accuracy": length,
        "not_learned_share": not_learned,
    }  # fmt: skip


def interval_note(table: pd.DataFrame) -> dict:
    """How many intervals are NaN, and why (``summary.json``'s ``intervals``)."""
    n_in, n_out = table.n_in.to_numpy(), table.n_out.to_numpy()
    few = (n_in < 2) | (n_out < 2)
    return {
        "level": 0.95,
        "method": "percentile bootstrap over runs",
        "nan": {
            "tm": int((n_in < 2).sum()),
            "tg": int((n_out < 2).sum()),
            "cm": int(few.sum()),
        },
        "why_nan": "fewer than 2 in-runs (TM, CM) or out-runs (TG, CM): a bootstrap over "
        "one run has no spread",
    }


def interval_warning(note: dict, n_pairs: int) -> dict | None:
    n = note["nan"]["cm"]
    if not n:
        return None
    return {
        "code": "nan_intervals",
        "message": (
            f"{n} of {n_pairs} pairs have no CM interval (NaN): fewer than 2 in-runs or "
            "out-runs, and a bootstrap over one run has no spread"
        ),
        "pairs": n,
    }


def validation_note(config: AuditConfig, quality: dict) -> dict:
    """How the runs chose when to stop, and how their validation pairs are counted."""
    runs = quality["runs"]
    note = {
        "used": config.validates,
        "fraction": config.val_fraction if config.validates else 0.0,
        "patience": config.patience,
        "membership": "A pair is in a run only if the run's RM took gradients on it. "
        "Validation pairs come from the run's own training groups (never its held-out "
        "groups, which would leak into TG); the run's choices (early stopping, or the "
        "logistic head's lambda) read them, so the estimators count them neither in n_in nor "
        "in n_out for that run (manifest: val_ids).",
    }
    if config.validates:
        note["runs_without_validation"] = sum(1 for r in runs if not r["n_val"])
    lams = [r["l2"] for r in runs if "l2" in r]
    if lams:
        grid = sorted(config.head.l2_grid)
        note["l2"] = {"min": min(lams), "median": float(np.median(lams)), "max": max(lams),
                      "grid": grid}  # fmt: skip
        if len(grid) > 1:
            note["runs_at_grid_edge"] = {"smallest": sum(1 for x in lams if x == grid[0]),
                                         "largest": sum(1 for x in lams if x == grid[-1])}
        return note
    if config.validates:
        epochs = [r["best_epoch"] for r in runs if "best_epoch" in r]
        if epochs:
            note["best_epoch"] = {"min": min(epochs), "median": float(np.median(epochs)),
                                  "max": max(epochs)}  # fmt: skip
        budget = config.head.epochs if config.mode == "frozen" else config.train.epochs
        note["epoch_budget"] = budget
        note["runs_at_epoch_budget"] = sum(1 for r in runs if r.get("epochs") == budget)
    return note


def budget_warning(note: dict, n_runs: int) -> dict | None:
    """Runs that trained every epoch of the budget: early stopping never ended them; or, in
    at least ``EDGE_SHARE`` of the runs, logistic heads whose lambda is at an edge of the grid
    (the best may lie beyond it; one run of many there is the validation loss's noise)."""
    edge = note.get("runs_at_grid_edge") or {}
    if sum(edge.values()) >= EDGE_SHARE * n_runs and any(edge.values()):
        which = [f"{n} at the {side} ({note['l2']['grid'][0 if side == 'smallest' else -1]:g})"
                 for side, n in edge.items() if n]  # fmt: skip
        return {
            "code": "l2_grid_edge",
            "message": (
                f"of {n_runs} runs, {' and '.join(which)} lambda of `l2_grid` kept the lowest "
                "validation loss: the best penalty may lie beyond the grid; extend `l2_grid`"
            ),
            "runs": int(sum(edge.values())),
        }
    n = note.get("runs_at_epoch_budget", 0)
    if not n:
        return None
    return {
        "code": "epoch_budget",
        "message": (
            f"{n} of {n_runs} runs trained all {note['epoch_budget']} epochs without early "
            "stopping (their validation loss was still falling): they may be under-trained; "
            "raise `epochs`"
        ),
        "runs": n,
    }


def coverage_warning(
    table: pd.DataFrame, plan: pd.DataFrame, config: AuditConfig, folds: int
) -> dict | None:
    """Pairs the plan gives fewer than 3 in- or out-runs, and the ``--runs`` that fixes it."""
    val = plan["validation"] if "validation" in plan else pd.Series(False, index=plan.index)
    counts = plan.assign(out=~plan.in_train & ~val).groupby("group")[["in_train", "out"]].sum()
    planned = pd.DataFrame(
        {
            "n_in": table.group.astype(str).map(counts.in_train).fillna(0).to_numpy(int),
            "n_out": table.group.astype(str).map(counts.out).fillna(0).to_numpy(int),
        }
    )
    if (planned.min() >= 3).all():
        return None
    fix = runs_needed(
        counts.index,
        n_runs=config.runs,
        n_folds=folds,
        kind=config.plan,
        seed=config.seed,
        val_fraction=config.val_fraction if config.validates else 0.0,
    )
    return runs_warning(table, planned, config.runs, fix)


def duplicates_warnings(duplicates: dict, conflicts: dict | None, *,
                        dedupe: str = "none") -> list[dict]:  # fmt: skip
    """Pairs repeated across groups (TG is optimistic), and pairs another group judged the
    other way (their CM is disagreement between groups), from ``summary.json``'s
    ``duplicates`` and ``memorized_conflicts``, each naming the ``dedupe`` that fixes it
    (``dedupe``: the one the audit used)."""
    found = []
    by = f"'{duplicates['group_by']}'"
    repeated = duplicates["pairs_repeated_across_groups"]
    if repeated:
        texts = duplicates["texts"]
        found.append({
            "code": "duplicates_across_groups",
            "message": (
                f"{repeated} of {duplicates['unique_pairs'] + duplicates['repeated_pairs']} "
                f"pairs occur (same prompt, chosen and rejected) under more than one group "
                f"({by}), and {texts['in_several_groups']} of {texts['unique']} unique "
                "responses appear under several groups: TG is optimistic, since a held-out "
                "pair may have been seen through another group's copy; `dedupe` pairs keeps "
                "one copy of each pair, `dedupe` texts joins the groups that share a "
                "response (or `group_by` a column that keeps copies together)"
            ),
            "pairs": repeated,
        })  # fmt: skip
    n = duplicates["conflicts_across_groups"]
    if n:
        memorized = ""
        if conflicts and conflicts["memorized"]:
            memorized = (f"; {conflicts['count']} of the {conflicts['memorized']} memorized "
                         f"pairs are such conflicts ({conflicts['share']:.0%})")  # fmt: skip
        found.append({
            "code": "conflicts_across_groups",
            "message": (
                f"{n} pairs were judged the other way by another group ({by}: same prompt, "
                "chosen and rejected swapped): their TG is pulled down by the other label, so "
                "their CM measures disagreement between groups (user idiosyncrasy), not "
                f"recall of one judgement{memorized}; see the `conflict` column ("
                + ("kept by `dedupe` pairs" if dedupe == "pairs" else "`dedupe` pairs keeps "
                   "them while it drops repeated copies")
                + ": they are the disagreement signal; `dedupe` texts puts both judgements "
                "in one group)"
            ),
            "pairs": n,
        })  # fmt: skip
    return found


SHORTCUT_R2 = 0.25
"""The share of TG's variance across pairs that one metadata column alone explains (R^2 of
TG on the column's mean per value, the correlation ratio eta^2) from which the summary names
that column as the audit's shortcut. At 0.25, knowing only which value a pair has (which system
wrote its chosen response, say) accounts for a quarter of the spread in how strongly held-out
RMs prefer its chosen response (a correlation of 0.5): the held-out accuracy rests on that
column, not only on what the responses say. With no effect at all the share is about
(values - 1) / (pairs - 1), under 0.05 here (at most ``SHORTCUT_VALUES`` values, each on
``SHORTCUT_MIN_PAIRS`` pairs or more)."""
SHORTCUT_MIN_PAIRS = 20  # a value on fewer pairs is left out: its mean TG is mostly noise
SHORTCUT_VALUES = 20  # a column with more values is no metadata category (ids, texts)
# memorization.parquet's own columns, the pair's texts, and the synthetic generator's record
# of which mechanism decided the label (the label's cause, not something the RM can read):
# never a shortcut
AUDIT_COLUMNS = ("id", "prompt", "chosen", "rejected", "tm", "tg", "cm", "n_in", "n_out",
                 "group", "category", "cm_significant", "conflict", "mechanism")  # fmt: skip


def strongest_shortcut(table: pd.DataFrame, group_by: str | None = None) -> dict | None:
    """The metadata column that alone best predicts TG, when it explains at least
    ``SHORTCUT_R2`` of TG's variance across pairs (``summary.json``'s ``shortcut``).

    Parameters
    ----------
    table : DataFrame
        An audit's memorization table (``tg`` and the pairs' metadata columns).
    group_by : str, optional
        The grouping column, never a shortcut: a group's pairs are held out together, so
        their TG is alike by construction.

    Returns
    -------
    dict or None
        ``column``, ``r2`` (the share of TG's variance it explains: the correlation ratio),
        ``high`` and ``low`` (the values with the highest and lowest mean TG, each
        ``(value, mean TG, pairs)``) and ``threshold`` (``SHORTCUT_R2``); None when no
        column reaches it. Columns: text, category or boolean metadata with 2 to
        ``SHORTCUT_VALUES`` values, not the audit's own (``AUDIT_COLUMNS``, intervals);
        values on fewer than ``SHORTCUT_MIN_PAIRS`` pairs are left out.
    """
    tg = pd.to_numeric(table["tg"], errors="coerce")
    best = None
    for column in table.columns:
        values = table[column]
        if (column in AUDIT_COLUMNS or column == group_by or column.endswith(("_lo", "_hi"))
                or pd.api.types.is_float_dtype(values)):
            continue  # fmt: skip
        keys = values.astype("string")  # a list or dict cell as its text
        if keys.nunique() > SHORTCUT_VALUES:
            continue
        size = keys[tg.notna()].value_counts()
        kept = tg.notna() & keys.isin(size.index[size >= SHORTCUT_MIN_PAIRS]).fillna(False)
        if keys[kept].nunique() < 2:
            continue
        y, by = tg[kept], keys[kept]
        means, counts = y.groupby(by).mean(), y.groupby(by).size()
        total = float(((y - y.mean()) ** 2).sum())
        r2 = float((counts * (means - y.mean()) ** 2).sum()) / total if total > 0 else 0.0
        if r2 >= SHORTCUT_R2 and (best is None or r2 > best["r2"]):
            high, low = means.idxmax(), means.idxmin()
            best = {"column": column, "r2": r2,
                    "high": (high, float(means[high]), int(counts[high])),
                    "low": (low, float(means[low]), int(counts[low]))}  # fmt: skip
    return None if best is None else {**best, "threshold": SHORTCUT_R2}


def shortcut_sentence(found: dict | None) -> str | None:
    """The strongest single shortcut in one sentence, for the console and the report alike.

    Parameters
    ----------
    found : dict or None
        :func:`strongest_shortcut`'s result (``summary.json``'s ``shortcut``).

    Returns
    -------
    str or None
        "held-out accuracy rests on COLUMN: TG ... for VALUE vs ... for VALUE; ..."; None
        without a shortcut.
    """
    if not found:
        return None
    (hi, hi_tg, hi_n), (lo, lo_tg, lo_n) = found["high"], found["low"]
    return (f"held-out accuracy rests on {found['column']}: TG {hi_tg:.2f} for {hi} ({hi_n} "
            f"pairs) vs {lo_tg:.2f} for {lo} ({lo_n} pairs); {found['column']} alone explains "
            f"{found['r2']:.0%} of TG's variance across pairs (a shortcut from "
            f"{found['threshold']:.0%})")  # fmt: skip
