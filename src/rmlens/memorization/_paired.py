"""Which estimator an audit uses, and how exact its paired counterfactuals are.

The paired estimator (``_estimate``) compares, within each run, the run's RM with the RM
whose training set differs by one group. Brute force compares runs whose training sets have
equal size. The two estimands coincide only while one group is a small share of a run's
training pairs: with 4 annotators, removing one changes a run's training set by a third.
So an audit left to choose (``estimator`` None) takes the paired estimator with the convex
head unless its largest group holds more than ``MAX_GROUP_SHARE`` of a run's training
pairs, and says why either way.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rmlens.influence import REFINE_SHARE
from rmlens.memorization._config import AuditConfig
from rmlens.memorization._damping import INFLUENCE_WORDS
from rmlens.memorization._plans import carve_validation, make_plan, runs_per_repeat
from rmlens.stats import spearman

MAX_GROUP_SHARE = 0.1  # above: a group is too large a share of a run for pairing
# the counterfactuals are off when the median |p_cf - p_refit| is above OFF_MEDIAN, its
# largest above OFF_MAX, or the Spearman correlation of their effects below OFF_SPEARMAN
OFF_MEDIAN = 0.01
OFF_MAX = 0.1
OFF_SPEARMAN = 0.9


def group_share(groups: pd.Series, config: AuditConfig, folds: int) -> float:
    """The largest share one group holds of a run's training pairs, over the first repeat of
    the plan (its training groups less its validation groups), so at most 1.

    From the plan itself, not from the expected number of training pairs: with few groups
    that expectation (2 groups in 2 folds, less 20% validation: 0.8 pairs) can be smaller
    than one group, and the share came out above 100%. The plan grows by its own prefix, so
    the first repeat's runs are those of every audit of these groups and settings.
    """
    if not len(groups):
        return 0.0
    k = runs_per_repeat(config.plan, folds)
    try:
        plan = make_plan(groups, n_runs=k, n_folds=folds, kind=config.plan, seed=config.seed)
    except ValueError:  # too few groups for the plan: the audit refuses it later
        return 0.0
    share = config.val_fraction if config.validates else 0.0
    plan = carve_validation(plan, share, seed=config.seed)
    sizes = groups.astype(str).value_counts()
    trained = plan[plan.in_train.to_numpy(bool)]
    pairs = sizes.reindex(trained.group.astype(str)).to_numpy()
    by_run = pd.DataFrame({"run": trained.run.to_numpy(), "pairs": pairs}).groupby("run").pairs
    return float((by_run.max() / by_run.sum()).max())


def choose_estimator(config: AuditConfig, share: float) -> tuple[str, str, dict | None]:
    """The estimator, a sentence saying why, and a warning for an explicit ``paired`` where
    a group is a large share of a run."""
    shown = f"the largest group holds {share:.1%} of a run's training pairs"
    large = share > MAX_GROUP_SHARE
    if config.estimator == "brute":
        return "brute", "brute force (`estimator` brute): in-runs against out-runs", None
    if config.estimator == "paired":
        warning = None
        if large:
            warning = {
                "code": "paired_large_groups",
                "message": (
                    f"`estimator` paired with large groups: {shown} (more than "
                    f"{MAX_GROUP_SHARE:.0%}), so removing or adding one changes a run's "
                    "training set by that much, while brute force compares training sets of "
                    "equal size: paired CM answers a different question here"
                ),
                "group_share": share,
            }
        how = ""
        if config.counterfactuals in INFLUENCE_WORDS:
            how = (f": {INFLUENCE_WORDS[config.counterfactuals]}, its damping calibrated so "
                   "that the mean paired CM equals brute force's over the same runs")  # fmt: skip
        return "paired", f"paired (`estimator` paired){how}; {shown}", warning
    if not config.pairable:
        why = "the convex head only" if config.mode == "frozen" else "frozen heads only"
        note = f"brute force: paired counterfactuals are exact for {why}"
        if config.counterfactuals in INFLUENCE_WORDS:
            note += (f" (`estimator` paired: {config.counterfactuals} influence, calibrated to "
                     "brute force)")  # fmt: skip
        return "brute", note, None
    if large:
        return "brute", (
            f"brute force: {shown}, more than {MAX_GROUP_SHARE:.0%}, so a group's removal "
            "would change a run by that much and paired CM would answer a different question "
            "(`estimator` paired forces it)"
        ), None
    return "paired", (
        "paired: each run also scores every pair with its group removed or added (a Newton "
        f"step of the convex head, and two chord steps for groups above "
        f"{REFINE_SHARE:.0%} of a run); {shown}"
    ), None


def exactness_summary(records: list[dict]) -> dict | None:
    """The runs' exactness checks pooled: |p_cf - p_refit| (median, 90th percentile, max),
    the true effects |p_refit - p| (median), and the Spearman correlation of the Newton
    step's effects p_cf - p with the refits' p_refit - p; None when no run checked."""
    checks = [r for r in records if r]
    if not checks:
        return None
    p, p_cf, p_refit = (np.concatenate([np.asarray(c[k], float) for c in checks])
                        for k in ("p", "p_cf", "p_refit"))  # fmt: skip
    error = np.abs(p_cf - p_refit)
    effect = p_refit - p
    rho = spearman(effect, p_cf - p, nan_policy="propagate")
    return {
        "runs": len(checks),
        "groups": int(sum(c["groups"] for c in checks)),
        "groups_removed": int(sum(c["removed"] for c in checks)),
        "pairs": int(len(p)),
        "median_abs_error": float(np.median(error)),
        "p90_abs_error": float(np.quantile(error, 0.9)),
        "max_abs_error": float(error.max()),
        "median_abs_effect": float(np.median(np.abs(effect))),
        "effect_spearman": float(rho),
        "method": "exact refits (Newton to convergence, same lambda and scaling) with the "
        "group removed or added, against the counterfactual p_cf (a Newton step, and chord "
        "steps for groups above 1% of the run)",
    }


def exactness_warning(summary: dict | None) -> dict | None:
    """A plain warning when the Newton step is far from the refits."""
    if not summary:
        return None
    median, rho = summary["median_abs_error"], summary["effect_spearman"]
    worst = summary["max_abs_error"]
    if median <= OFF_MEDIAN and worst <= OFF_MAX and not (np.isfinite(rho) and rho < OFF_SPEARMAN):
        return None
    return {
        "code": "paired_inexact",
        "message": (
            f"the paired counterfactuals are off: |p_cf - p_refit| median {median:.4f}, max "
            f"{worst:.3f} (true effects: median {summary['median_abs_effect']:.4f}), Spearman "
            f"of the effects {rho:.2f}, over {summary['groups']} refitted groups; the Newton "
            "step is exact only for groups that are a small share of a run near a strongly "
            "convex optimum: use `estimator` brute, or raise the values of `l2_grid`"
        ),
    }
