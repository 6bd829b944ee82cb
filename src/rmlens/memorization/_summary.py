"""Pair categories on the memorization map, and the end-of-audit summary, with what the
runs say of their training objective (summary.json's ``objective``, and a warning when its
mechanism stayed inactive: DESIGN.md section 2)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rmlens._io import number
from rmlens.experiment import AuditDir
from rmlens.rewards import inactive_message, not_learned
from rmlens.stats import group_draws, percentile_interval, spearman, wilson_interval

# In the order they are applied: a pair gets the first that holds.
CATEGORIES = ("undefined", "not_learned", "memorized", "generalized", "other")
# every defined pair's category when categories are withheld (``_quality.withheld_reason``):
# the RM did not learn, or CM's size is not calibrated
WITHHELD = "withheld"
RULES = {
    "undefined": "n_in = 0 or n_out = 0 (no TM, TG or CM)",
    "not_learned": "TM < {learned}: not learned even when trained on",
    "memorized": "CM >= {cm}",
    "generalized": "TG >= {learned}",
    "other": "the rest (TG < {learned}, CM < {cm})",
}


def categorize(
    table: pd.DataFrame, *, cm_threshold: float = 0.1, learned: float = 0.5
) -> pd.Series:
    """Each pair's category, the first rule that holds, in this order (DESIGN.md section 3):

    1. ``undefined``: n_in = 0 or n_out = 0 (TM, TG and CM are NaN);
    2. ``not_learned``: TM < ``learned``: the RMs that trained on it do not prefer its
       chosen response, so it is not memorized whatever its CM;
    3. ``memorized``: CM >= ``cm_threshold``;
    4. ``generalized``: TG >= ``learned``;
    5. ``other``: the rest (learned, CM below the threshold, TG below ``learned``).

    Parameters
    ----------
    table : DataFrame
        The memorization table: ``tm``, ``tg``, ``cm`` and, if present, ``n_in`` and
        ``n_out``.
    cm_threshold : float, default=0.1
        CM at and above which a learned pair is ``memorized``.
    learned : float, default=0.5
        TM below which a pair is ``not_learned``, and TG at and above which it is
        ``generalized``.

    Returns
    -------
    Series of str
        The category of each pair, indexed like ``table``.
    """
    tm, tg, cm = (table[k].to_numpy(float) for k in ("tm", "tg", "cm"))
    undefined = np.isnan(tm) | np.isnan(tg) | np.isnan(cm)
    if {"n_in", "n_out"} <= set(table.columns):
        undefined |= (table.n_in.to_numpy() == 0) | (table.n_out.to_numpy() == 0)
    with np.errstate(invalid="ignore"):
        conditions = [undefined, tm < learned, cm >= cm_threshold, tg >= learned]
    return pd.Series(
        np.select(conditions, list(CATEGORIES[:4]), default="other"), index=table.index
    )


def idle_runs(quality: dict) -> list[tuple[int, str]]:
    """``(run, why)`` of each run whose RM did not learn (``rewards._metrics.not_learned`` of
    its accuracy on the pairs it trained on)."""
    runs = quality.get("runs") or []
    return [(r["run"], why) for r in runs if r["in_train"]["n"]
            for why in [not_learned(number(r["in_train"]["accuracy"]), r["in_train"]["n"])]
            if why]  # fmt: skip


def withheld_reason(quality: dict, damping_edge: str | None = None) -> str | None:
    """Why the pairs get no category, or None: every run's RM did not learn (its TM, TG and
    CM measure noise), or a one-checkpoint damping at its grid's edge (CM's size is the
    grid's limit, not calibrated, and the memorized category reads CM's size)."""
    runs, idle = quality.get("runs") or [], idle_runs(quality)
    if runs and len(idle) == len(runs):
        who = "the RM" if len(runs) == 1 else f"none of the {len(runs)} runs' RMs"
        return (f"categories withheld: {who} did not learn ({idle[0][1]}), so TM, TG and CM "
                "measure noise")
    if damping_edge:
        return (f"categories withheld: the one-checkpoint damping is not calibrated (it sits "
                f"at the grid's {damping_edge} value), so CM's size, which the memorized "
                "category reads, is the grid's limit; rank pairs by CM")
    return None


def cm_significant(table: pd.DataFrame) -> pd.Series:
    """Whether CM's interval lies above 0 (its lower bound > 0); False where it is NaN."""
    return pd.Series(table.cm_lo.to_numpy(float) > 0, index=table.index)


def rank_memorized(table: pd.DataFrame, top: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``top`` pairs categorized ``memorized``, highest CM first, and the ``top`` pairs
    of largest CM among the rest (a pair's category decides first: a high-CM pair with
    TM < 0.5 is ``not_learned``, and is never listed as memorized)."""
    scored = table.dropna(subset=["cm"])
    memorized = scored.category == "memorized"
    order = {"ascending": False, "kind": "stable"}
    return (
        scored[memorized].sort_values("cm", **order).head(top),
        scored[~memorized].sort_values("cm", **order).head(top),
    )


def memorized_conflicts(table: pd.DataFrame) -> dict | None:
    """How many memorized pairs another group judged the other way (``conflict``): their
    CM is disagreement between groups (user idiosyncrasy), not recall of one judgement."""
    if "conflict" not in table:
        return None
    memorized = (table.category == "memorized").to_numpy()
    conflict = table.conflict.fillna(False).to_numpy(bool)
    n, k = int(memorized.sum()), int((memorized & conflict).sum())
    return {
        "count": k,
        "memorized": n,
        "share": k / n if n else None,
        "conflicts": int(conflict.sum()),
        "rule": "conflict: another group judged the same prompt and responses the other way "
        "(chosen and rejected swapped)",
    }


# Group sizes in which the share of memorized pairs is given (the upper bound inclusive)
SIZE_BINS = ((1, 1, "alone"), (2, 5, "in groups of 2 to 5"), (6, None, "in groups of 6 or more"))


def cm_links(
    table: pd.DataFrame, *, min_groups: int = 10, n_boot: int = 400, seed: int = 0
) -> dict:
    """What CM follows besides memory: its Spearman correlation across pairs with the size
    of each pair's group (the pairs of the audit in it) and with the pair's ``margin``.

    A run holds a group out whole, so a pair's TG is measured without any of its group-mates
    and its TM mostly with all of them: in groups whose pairs share a prompt or a response,
    CM counts what the group taught the RM together. Each interval is a 95% bootstrap over
    groups (the pairs of a group are not independent).

    Parameters
    ----------
    table : DataFrame
        The memorization table: ``cm``, ``group``, ``category`` and, if present, ``margin``.
    min_groups : int, default=10
        Fewest groups whose bootstrap gives a link an interval worth stating.
    n_boot : int, default=400
        Bootstrap draws over groups.
    seed : int, default=0
        Seed of the draws.

    Returns
    -------
    dict
        Empty under ``min_groups`` groups; else ``group_size`` when the groups differ in
        size, ``margin`` when the table has a margin that varies; each ``spearman``, ``lo``,
        ``hi``, ``n_pairs`` and ``n_groups``.
        ``group_size`` adds ``by_size``: per size bin (``SIZE_BINS``: alone, in groups of 2
        to 5, of 6 or more) its pairs, mean CM and share categorized memorized.
    """
    ok = np.isfinite(table.cm.to_numpy(float))
    frame = table.loc[ok, [c for c in ("cm", "group", "category", "margin") if c in table]]
    if "group" not in frame or frame.group.nunique() < min_groups:
        return {}
    frame = frame.assign(size=frame.groupby("group").cm.transform("size"))
    draws = group_draws(frame.group.to_numpy(), n_boot, seed)
    n_groups = int(frame.group.nunique())
    links: dict = {}
    for name, column in (("group_size", "size"), ("margin", "margin")):
        if column not in frame or frame[column].nunique() < 2:
            continue
        x, cm = frame[column].to_numpy(float), frame.cm.to_numpy(float)
        lo, hi = percentile_interval([spearman(x[i], cm[i]) for i in draws])
        links[name] = {"spearman": spearman(x, cm), "lo": lo, "hi": hi,
                       "n_pairs": int(len(frame)), "n_groups": n_groups}  # fmt: skip
    if "group_size" in links:
        links["group_size"]["by_size"] = [
            {"sizes": label, "n_pairs": int(inside.sum()),
             "mean_cm": float(frame.cm[inside].mean()) if inside.any() else None,
             "memorized": float((frame.category[inside] == "memorized").mean())
             if inside.any() else None}
            for low, high, label in SIZE_BINS
            for inside in [(frame["size"] >= low) & (frame["size"] <= (high or np.inf))]
        ]  # fmt: skip
    return links


def summarize_audit(
    table: pd.DataFrame, *, cm_threshold: float, learned: float = 0.5, top: int = 10,
    withheld: str | None = None,
) -> dict:
    """The end-of-audit summary of a categorized memorization table (``summary.json``).

    Parameters
    ----------
    table : DataFrame
        The memorization table with its ``category`` column (:func:`categorize`) and,
        optionally, ``cm_significant`` (else computed from ``cm_lo``) and ``conflict``.
    cm_threshold : float
        The CM threshold the categories used.
    learned : float, default=0.5
        The TM and TG threshold the categories used.
    top : int, default=10
        Pairs listed in ``most_memorized`` and ``largest_cm_not_memorized``.
    withheld : str, optional
        Why the table's categories are withheld (its defined pairs are all ``withheld``):
        then the only categories are ``undefined`` and ``withheld``, this reason its rule,
        ``categories_withheld`` and ``most_memorized_note``.

    Returns
    -------
    dict
        ``n_pairs``, ``thresholds``, ``category_order``, ``category_rules``, ``counts`` per
        category, ``cm_significant`` (how many pairs' CM interval lies above 0, and how many
        of them are memorized), the ``mean`` TM, TG and CM; ``most_memorized``: up to
        ``top`` pairs categorized memorized, highest CM first (id, TM, TG, CM, category,
        conflict, group or mechanism where present), its ``most_memorized_rule`` and, when
        fewer than ``top`` pairs are memorized, ``most_memorized_note``;
        ``largest_cm_not_memorized``: the ``top`` largest CM among the other pairs, with their
        category; ``memorized_conflicts`` (with a ``conflict`` column): how many memorized
        pairs another group judged the other way; ``links`` (with a ``group`` column): CM's
        Spearman with group size and margin (:func:`cm_links`).
    """
    counts = table.category.value_counts()
    order = ["undefined", WITHHELD] if withheld else list(CATEGORIES)
    rules = ({"undefined": RULES["undefined"], WITHHELD: withheld} if withheld else
             {c: RULES[c].format(learned=learned, cm=cm_threshold) for c in CATEGORIES})
    ranked, rest = rank_memorized(table, top)
    cols = [c for c in ("id", "tm", "tg", "cm", "category", "conflict", "group", "mechanism")
            if c in table]  # fmt: skip
    significant = table.cm_significant if "cm_significant" in table else cm_significant(table)
    summary = {
        "n_pairs": int(len(table)),
        "thresholds": {"cm_memorized": cm_threshold, "learned": learned},
        "category_order": order,
        "category_rules": rules,
        "counts": {c: int(counts.get(c, 0)) for c in order},
        "cm_significant": {
            "count": int(significant.sum()),
            "memorized": int((significant & (table.category == "memorized")).sum()),
            "rule": "the lower bound of CM's 95% bootstrap interval is above 0",
        },
        "mean": {k: float(table[k].mean()) for k in ("tm", "tg", "cm")},
        "most_memorized": _records(ranked[cols]),
        "most_memorized_rule": f"pairs categorized memorized (the category rules first: TM >= "
        f"{learned}, CM >= {cm_threshold}), highest CM first; at most {top}",
        "largest_cm_not_memorized": _records(rest[cols]),
    }
    if withheld:
        summary["categories_withheld"] = withheld
        summary["most_memorized_note"] = withheld
    elif len(ranked) < top:
        summary["most_memorized_note"] = memorized_note(len(ranked))
    conflicts = memorized_conflicts(table)
    if conflicts is not None:
        summary["memorized_conflicts"] = conflicts
    links = cm_links(table)
    if links:
        summary["links"] = links
    return summary


def memorized_note(n: int) -> str:
    """What a memorized-pairs table shorter than asked says.

    Parameters
    ----------
    n : int
        How many pairs are categorized memorized (all of them are listed).

    Returns
    -------
    str
        ``"no pair is categorized memorized"`` for 0, else ``"only 3 pairs are categorized
        memorized: all are listed"`` (``"only 1 pair is ..."``); lower case, no final period.
    """
    if not n:
        return "no pair is categorized memorized"
    return f"only {n} pair{' is' if n == 1 else 's are'} categorized memorized: all are listed"


def _records(frame: pd.DataFrame) -> list[dict]:
    """JSON-ready rows (numpy booleans as bool)."""
    records = frame.to_dict(orient="records")
    for row in records:
        if "conflict" in row:
            row["conflict"] = bool(row["conflict"]) if pd.notna(row["conflict"]) else None
    return records


def objective_summary(exp: AuditDir, runs: list[int]) -> dict:
    """What the runs' objective did: its name, the runs where its mechanism stayed inactive
    (and why), and the mean over runs of its recorded weights (loss-weight spread, pairs
    left out, group weights, nested-audit means)."""
    records = [(exp.manifest(r).get("metrics") or {}) for r in runs]
    names = {m.get("objective", "bt") for m in records}
    out: dict = {"objective": names.pop() if len(names) == 1 else sorted(names)}
    idle = [{"run": r, "why": m.get("objective_inactive_why")}
            for r, m in zip(runs, records) if m.get("objective_active") is False]  # fmt: skip
    out["runs_inactive"] = idle
    for key in ("weight_cv", "weight_min", "weight_max", "n_zero_weight", "dro_q_max"):
        values = [m[key] for m in records if isinstance(m.get(key), (int, float))]
        if values:
            out[f"mean_{key}"] = float(np.mean(values))
    guides = [m["guide"] for m in records if isinstance(m.get("guide"), dict)]
    for key in ("tm_mean", "tg_mean", "cm_mean", "n_not_learned"):
        values = [g[key] for g in guides if key in g]
        if values:
            out[f"guide_{key}"] = float(np.mean(values))
    if guides:
        out["guide_margin_from"] = guides[0].get("margin_from")
    out["n_runs"] = len(records)
    return out


def objective_warning(record: dict) -> dict | None:
    """A warning when the objective's mechanism stayed inactive in some run."""
    activities = [{"active": False, "why": i["why"]} for i in record["runs_inactive"]]
    activities += [{"active": True}] * (record["n_runs"] - len(activities))
    message = inactive_message(str(record["objective"]), activities)
    if message is None:
        return None
    return {"code": "objective_inactive", "message": message,
            "runs": [i["run"] for i in record["runs_inactive"]]}  # fmt: skip


def accuracy_interval(quality: dict, split: str) -> tuple[float, float] | None:
    """95% Wilson interval of a one-run audit's accuracy on ``split`` (a tie counts 1/2).

    Parameters
    ----------
    quality : dict
        ``summary.json``'s ``rm_quality``.
    split : {"in_train", "validation", "held_out"}

    Returns
    -------
    (float, float), or None with several runs or no pairs
    """
    runs = quality.get("runs") or []
    part = (runs[0].get(split) or {}) if len(runs) == 1 and isinstance(runs[0], dict) else {}
    n, accuracy = part.get("n") or 0, number(part.get("accuracy"))
    if not n or not np.isfinite(accuracy):
        return None
    lo, hi = wilson_interval(accuracy * n, n)
    return float(lo), float(hi)
