"""Split-half reliability of the per-pair scores TM, TG, CM (DESIGN.md section 3).

How much of the ranking of pairs by a score is run-to-run noise. The finished whole repeats
of the plan are split into two halves (each half: complete grouped K-folds), each half
estimates TM, TG, CM per pair with the audit's estimator, and the two estimates are
correlated across pairs (Spearman). Spearman-Brown then corrects the half-length
correlation to the full run count:

    rel(factor * n) = factor * r / (1 + (factor - 1) * r)        (Spearman 1910; Brown 1910)

and the prophecy formula inverts it: the run count that would reach a target reliability is

    n_target = n * target * (1 - rel) / (rel * (1 - target))

The alternating split (repeats 0, 2, 4, ... against 1, 3, ...) comes first; further seeded
random splits of the repeats give the mean and the spread (std) over splits.

With the paired estimator the units split are the runs themselves, not whole repeats: each
paired run scores every pair on both sides (in and out), so any set of runs estimates TM, TG
and CM of every pair, and 5 paired runs (one repeat of a 5-fold plan) already give a
reliability with its spread. Brute force keeps whole repeats: a half of it needs both in-
and out-runs for every pair, which only complete K-folds guarantee. The halves of an odd
number of units differ by one; Spearman-Brown's factor is then n / n_half of the smaller
half, a slight under-correction.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rmlens.stats import prophecy_factor, spearman, spearman_brown

SCORES = ("tm", "tg", "cm")
TARGET = 0.8  # reliability that runs_for_0_8 aims at
WARN_BELOW = 0.7  # Spearman-Brown below this: a warning


# the two sides of every (pair, run), in and out, and their means over runs: the core of
# every memorization estimate (``_estimate``), of damping calibration (``_damping``) and of
# reliability (here)


def run_sides(
    p: np.ndarray, member: np.ndarray, val: np.ndarray | None = None, p_cf: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The in-side and out-side probability of every (pair, run), NaN where a run gives none.

    A run's validation pairs (``val``) are neither in nor out. Brute force (``p_cf`` None):
    p is in-side where the run trained on the pair, else out-side. Paired: the run's p is
    one side and its counterfactual p_cf the other.

    Parameters
    ----------
    p : ndarray of shape (n_pairs, n_runs)
        sigmoid(r+ - r-) per run.
    member : ndarray of shape (n_pairs, n_runs), bool
        The runs' training pairs.
    val : ndarray of shape (n_pairs, n_runs), bool, or None, default=None
        The runs' validation pairs.
    p_cf : ndarray of shape (n_pairs, n_runs) or None, default=None
        The paired counterfactuals; None for a brute-force audit.

    Returns
    -------
    p_in, p_out : ndarray of shape (n_pairs, n_runs)
        The in-side and out-side probabilities.
    """
    if val is not None:
        p = np.where(val, np.nan, p)
    if p_cf is None:
        return np.where(member, p, np.nan), np.where(member, np.nan, p)
    if val is not None:
        p_cf = np.where(val, np.nan, p_cf)
    return np.where(member, p, p_cf), np.where(member, p_cf, p)


def side_means(
    p_in: np.ndarray, p_out: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """TM, TG for run weights: weighted means of the in-side and out-side probabilities.

    Only runs that gave a side count for it (a NaN is no run of that side).

    Parameters
    ----------
    p_in, p_out : ndarray of shape (n_pairs, n_runs)
        The sides of :func:`run_sides`.
    weights : ndarray of shape (n_runs, n_draws)
        Each draw's weight of each run (one column of ones: the plain means).

    Returns
    -------
    tm, tg : ndarray of shape (n_pairs, n_draws)
    """
    has_in, has_out = ~np.isnan(p_in), ~np.isnan(p_out)
    w32 = weights.astype(np.float32)
    n_in = (has_in.astype(np.float32) @ w32).astype(np.float64)  # exact: integer counts
    n_out = (has_out.astype(np.float32) @ w32).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        tm = (np.where(has_in, p_in, 0.0) @ weights) / n_in
        tg = (np.where(has_out, p_out, 0.0) @ weights) / n_out
    return tm, tg


def runs_needed(rel: float, n_runs: int, target: float = TARGET, *, folds: int = 1) -> int | None:
    """Runs that would reach ``target``, from reliability ``rel`` at ``n_runs`` runs, rounded
    up to whole repeats of ``folds`` runs (at least one repeat); None where rel is not > 0."""
    factor = prophecy_factor(rel, target)
    if not np.isfinite(factor):
        return None
    if rel >= 1:
        return folds
    repeats = max(1, math.ceil(n_runs * factor / folds - 1e-9))
    return repeats * folds


def complete_repeats(repeat: np.ndarray, folds: int) -> np.ndarray:
    """The repeats all of whose runs finished: the units that split-half reliability splits.

    Parameters
    ----------
    repeat : ndarray of shape (n_finished,), int
        Each finished run's repeat (run // K).
    folds : int
        Runs per repeat (K).

    Returns
    -------
    ndarray of int
        The complete repeats, sorted.
    """
    reps, counts = np.unique(np.asarray(repeat), return_counts=True)
    return reps[counts == folds]


def split_half(
    p: np.ndarray,
    member: np.ndarray,
    val: np.ndarray,
    repeat: np.ndarray,
    *,
    folds: int,
    p_cf: np.ndarray | None = None,
    n_splits: int = 20,
    seed: int = 0,
    deterministic: bool = False,
) -> dict:
    """Split-half reliability of TM, TG and CM.

    Parameters
    ----------
    p : ndarray of shape (n_pairs, n_runs)
        sigmoid(r+ - r-) per finished run; NaN where the run did not score the pair.
    member, val : ndarray of shape (n_pairs, n_runs), bool
        In-training and validation pairs per run (validation pairs count neither in nor out).
    repeat : ndarray of shape (n_runs,), int
        Each run's repeat of the plan (run // K); without ``p_cf`` only repeats with all
        ``folds`` runs finished are used.
    folds : int
        Runs per repeat (K).
    p_cf : ndarray of shape (n_pairs, n_runs), optional
        The paired counterfactuals: each half then estimates with the paired estimator, and
        the runs themselves are split (module docstring).
    n_splits : int, default=20
        Splits of the units into two halves: the alternating one, then seeded random ones.
    deterministic : bool, default=False
        Whether a run's RM is a function of its training set (the solved logistic head):
        then runs that repeat a training set repeat its model, and when both halves of the
        alternating split hold the same training sets they agree by construction, so
        nothing is reported (NaN scores and a ``reason``).

    Returns
    -------
    dict with ``split`` (``runs`` with ``p_cf``, else ``repeats``), ``n_runs`` (runs used:
    every finished run when paired, else those of whole repeats), ``n_repeats`` (whole
    repeats finished), ``n_splits``, and per
    score (``tm``, ``tg``, ``cm``): ``split_half``, ``spearman_brown`` (means over splits),
    their ``_std``, ``alternating`` (the first split's split-half) and ``runs_for_0_8``.
    With fewer than 2 units (runs when paired, whole repeats otherwise): NaN scores and a
    ``reason``. ``distinct_training_sets``: how many different (training, validation)
    sets the runs used have.
    """
    repeat = np.asarray(repeat)
    paired = p_cf is not None
    unit = np.arange(len(repeat)) if paired else repeat  # paired: every run is a unit
    whole = unit if paired else complete_repeats(repeat, folds)
    n_runs = int(len(whole) * (1 if paired else folds))
    out: dict = {"n_runs": n_runs, "n_repeats": int(len(complete_repeats(repeat, folds))),
                 "split": "runs" if paired else "repeats"}  # fmt: skip
    keys = ("split_half", "spearman_brown", "split_half_std", "spearman_brown_std", "alternating")
    nan = {**dict.fromkeys(keys, math.nan), "runs_for_0_8": None}
    if len(whole) < 2:
        out["n_splits"] = 0
        out["reason"] = (f"{len(whole)} finished run(s); split-half needs 2" if paired else
                         f"{len(whole)} finished whole repeat(s) of the plan; split-half "
                         "needs 2")  # fmt: skip
        return out | {s: dict(nan) for s in SCORES}
    signature = training_sets(member, val)
    used = np.isin(unit, whole)
    out["distinct_training_sets"] = len(set(signature[used]))
    first, second = (set(signature[np.isin(unit, whole[h::2])]) for h in (0, 1))
    if deterministic and first == second:
        out["n_splits"] = 0
        out["reason"] = (
            f"the {n_runs} runs train on {out['distinct_training_sets']} distinct training "
            "sets, and both halves of the plan hold the same ones: a solved head gives one "
            "model per training set, so the halves agree by construction (audit more groups)"
        )
        return out | {s: dict(nan) for s in SCORES}
    rng = np.random.default_rng([seed, 7])
    orders = [np.arange(len(whole))] + [rng.permutation(len(whole)) for _ in range(n_splits - 1)]
    # run weights, one column per half of each split: (n_runs, 2 * n_splits)
    weights = np.zeros((len(repeat), 2 * len(orders)))
    for j, order in enumerate(orders):
        first, second = whole[order[0::2]], whole[order[1::2]]  # alternating: 0,2,4 / 1,3
        weights[:, 2 * j] = np.isin(unit, first)
        weights[:, 2 * j + 1] = np.isin(unit, second)
    tm, tg = side_means(*run_sides(p, member, val, p_cf), weights)  # (n_pairs, 2 * n_splits)
    halves = {"tm": tm, "tg": tg, "cm": tm - tg}  # the estimator's NaN: no in- or out-runs
    out["n_splits"] = len(orders)
    for score, est in halves.items():
        r = np.array([spearman(est[:, 2 * j], est[:, 2 * j + 1]) for j in range(len(orders))])
        sb = spearman_brown(r, len(whole) / (len(whole) // 2))  # 2 for even halves
        ok = np.isfinite(r)
        if not ok.any():
            out[score] = dict(nan)
            continue
        mean_sb = float(sb[ok].mean())
        out[score] = {
            "split_half": float(r[ok].mean()),
            "spearman_brown": mean_sb,
            "split_half_std": float(r[ok].std(ddof=1)) if ok.sum() > 1 else 0.0,
            "spearman_brown_std": float(sb[ok].std(ddof=1)) if ok.sum() > 1 else 0.0,
            "alternating": float(r[0]),
            "runs_for_0_8": runs_needed(mean_sb, n_runs, TARGET, folds=folds),
        }
    return out


def training_sets(member: np.ndarray, val: np.ndarray) -> np.ndarray:
    """One label per run (columns of ``member`` and ``val``, (n_pairs, n_runs) bool): equal
    for runs that train and validate on the same pairs."""
    bits = np.packbits(np.concatenate([member, val], axis=0).astype(bool), axis=0)
    return np.array([bits[:, r].tobytes() for r in range(member.shape[1])], dtype=object)


def same_partition(plan: pd.DataFrame, folds: int) -> bool:
    """Whether every whole repeat of the plan holds out the same sets of groups.

    E.g. K equal to the number of groups (leave one group out): then halves differ only in
    seeds.

    Parameters
    ----------
    plan : DataFrame
        The run plan (``run``, ``group``, ``in_train`` and, when used, ``validation``).
    folds : int
        Runs per repeat (K).

    Returns
    -------
    bool
        True when at least two whole repeats exist and all hold out the same groups.
    """
    out = ~plan.in_train.to_numpy(bool)
    if "validation" in plan:
        out &= ~plan.validation.to_numpy(bool)
    held = plan[out]
    partitions = {}
    for run, groups in held.groupby("run").group:
        partitions.setdefault(int(run) // folds, set()).add(frozenset(groups.astype(str)))
    whole = [frozenset(s) for s in partitions.values() if len(s) == folds]
    return len(whole) >= 2 and len(set(whole)) == 1


def reliability_warnings(reliability: dict) -> list[dict]:
    """A plain warning per score whose Spearman-Brown reliability is below ``WARN_BELOW``."""
    warnings = []
    for score in SCORES:
        part = reliability.get(score) or {}
        sb = part.get("spearman_brown", math.nan)
        if not np.isfinite(sb) or sb >= WARN_BELOW:
            continue
        need = part.get("runs_for_0_8")
        how = (
            f"about {need} runs would reach {TARGET}"
            if need
            else f"no run count reaches {TARGET} by the Spearman-Brown formula"
        )
        warnings.append(
            {
                "code": "unreliable",
                "score": score,
                "message": (
                    f"the ranking of pairs by {score.upper()} is not yet reliable (split-half "
                    f"{part['split_half']:.2f}, Spearman-Brown {sb:.2f}); {how}"
                ),
                "runs_for_0_8": need,
            }
        )
    return warnings


def whole_repeats(runs: int, folds: int, *, up: bool) -> int:
    """``runs`` rounded up (``up``) or down to a whole number of repeats of ``folds`` runs."""
    return (-(-runs // folds) if up else runs // folds) * folds


def target_status(
    reliability: dict, target: float, *, runs: int, max_runs: int, folds: int, missing: int = 0
) -> dict:
    """Whether an audit with a target reliability stops adding repeats, and why.

    The score is CM's Spearman-Brown reliability (mean over splits, as ``summary.json``'s
    ``reliability`` reports it) at the audit's ``runs``. It stops when the score reaches
    ``target`` (``target_reached``), when runs of the plan are not finished (``failed_runs``:
    growing on an incomplete repeat would not raise the score), or when one more repeat of
    ``folds`` runs would pass ``max_runs`` (``max_runs``); else ``stopped_because`` is None
    (the audit adds a repeat). ``runs_predicted``: the runs the prophecy formula predicts for
    the target from the score now, in whole repeats (None where the score is not > 0).
    """
    part = reliability.get("cm") or {}
    score = float(part.get("spearman_brown", math.nan))
    used = int(reliability.get("n_runs", 0))
    reached = bool(np.isfinite(score) and score >= target)
    predicted = runs_needed(score, used, target, folds=folds) if used else None
    cap = whole_repeats(max_runs, folds, up=False)
    repeats_models = "distinct_training_sets" in reliability and "reason" in reliability
    if reached:
        why = "target_reached"
    elif missing:
        why = "failed_runs"
    elif runs + folds > cap or repeats_models:  # more repeats add copies of the same models
        why = "max_runs"
    else:
        why = None
    shown = f"{score:.3f}" if np.isfinite(score) else "not yet measurable"
    at = f"CM reliability (Spearman-Brown) {shown} at {runs} runs"
    if why == "target_reached":
        message = f"target reliability {target:g} reached: {at}; no more runs added"
    elif why == "failed_runs":
        message = (
            f"target reliability {target:g} not reached: {at}, and {missing} run(s) of the plan "
            "failed; start the same command again to retry them and go on adding repeats"
        )
    elif why == "max_runs":
        cap_text = f"`max_runs` {max_runs}" + (
            f" ({cap} runs in whole repeats of {folds})" if cap != max_runs else ""
        )
        if predicted is None:
            need = (
                f"{reliability.get('reason', 'CM shows no reliability yet')}: the prophecy "
                "formula predicts no run count"
            )
        else:
            need = f"the Spearman-Brown prophecy formula predicts about {predicted} runs"
        message = (
            f"target reliability {target:g} cannot be reached within {cap_text}: {at}; {need}"
        )
        if repeats_models:
            message = (f"target reliability {target:g} cannot be reached: {at}; "
                       f"{reliability['reason']}, and more runs only repeat them")
    else:
        message = f"target reliability {target:g} not reached yet: {at}"
    return {
        "target": target,
        "score": "cm",
        "statistic": "spearman_brown (mean over splits)",
        "reached": reached,
        "reliability": score,
        "runs": runs,
        "runs_per_repeat": folds,
        "max_runs": max_runs,
        "runs_predicted": predicted,
        "stopped_because": why,
        "message": message,
    }
