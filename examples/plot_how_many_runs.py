"""
How many runs does an audit need?
=================================

Per-pair CM is a small difference of two large means, so the ranking of pairs by CM can be
mostly run-to-run noise. Every audit therefore reports the *split-half reliability* of TM,
TG and CM: the whole repeats of the run plan are split into two halves, each half
estimates the scores, the two estimates are correlated across pairs (Spearman), and the
Spearman-Brown formula corrects that half-length correlation to the full run count,

.. math:: \\mathrm{rel}(k n) = \\frac{k\\, r}{1 + (k - 1)\\, r}.

Solved for k (the *prophecy* formula), it says how many runs would reach a target such as
0.8. Here we audit 400 synthetic pairs with 40 runs, measure the reliability of CM on the
first 10, 20, 30 and 40 runs with both estimators rmlens offers, and compare it with what
the prophecy formula predicts from the full audit. Is 25 runs enough? It depends on the
estimator, and the audit tells you. The data are small to keep the example near a minute;
real audits have thousands of pairs, which changes the numbers but not the method.
"""

# %%
# One audit, both estimators
# --------------------------
# The default audit (frozen ``minilm``, logistic head) uses the *paired* estimator: every
# run also scores each pair with its user removed or added, so every run gives every pair
# an in-side and an out-side probability and the between-run noise cancels in CM. Its runs
# also hold the plain scores ``r_chosen, r_rejected``, from which the *brute-force*
# estimator (the pair's in-runs against its out-runs) is computed, so one audit gives both.

import json
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import rmlens
from rmlens.memorization import estimate
from rmlens.stats import prophecy_factor, spearman, spearman_brown

pairs = rmlens.synthesize(rmlens.SynthConfig(n_pairs=400, n_users=40, seed=0))
out = Path(tempfile.mkdtemp()) / "audit"
FOLDS, RUNS = 5, 40
_ = rmlens.audit(pairs, rmlens.AuditConfig(runs=RUNS, folds=FOLDS, n_boot=0, check_exact=0),
                 out=out, quiet=True)

# %%
# What the audit reports
# ----------------------
# ``summary.json``'s ``reliability`` gives, per score, the split-half correlation, its
# Spearman-Brown correction (means over 20 splits of the repeats) and ``runs_for_0_8``,
# the run count the prophecy formula predicts for a reliability of 0.8.

summary = json.loads((out / "summary.json").read_text())
rel = summary["reliability"]
print(f"{rel['n_runs']} runs in {rel['n_repeats']} repeats, {rel['n_splits']} splits")
for score in ("tm", "tg", "cm"):
    part = rel[score]
    print(f"{score.upper()}: split-half {part['split_half']:.3f}, "
          f"Spearman-Brown {part['spearman_brown']:.3f}, runs for 0.8: {part['runs_for_0_8']}")

# %%
# Reliability on the first runs
# -----------------------------
# Every run folder holds its scores (``runs/<run>/scores.parquet``) and its manifest (the
# pairs it trained on and the validation pairs it set aside). We read them into the long
# tables :func:`rmlens.memorization.estimate` takes, then repeat the audit's computation on
# the first 2, 4, 6 and 8 repeats of the plan: split the repeats into two halves, estimate
# CM on each, correlate, and correct with :func:`rmlens.stats.spearman_brown`.

scores, membership = [], []
for run in range(RUNS):
    folder = out / "runs" / f"{run:03d}"
    s = pd.read_parquet(folder / "scores.parquet").assign(run=run)
    manifest = json.loads((folder / "manifest.json").read_text())
    scores.append(s)
    membership.append(pd.DataFrame({
        "run": run, "id": s.id,
        "in_train": s.id.isin(manifest["train_ids"]),
        "validation": s.id.isin(manifest.get("val_ids") or []),
    }))
scores = pd.concat(scores, ignore_index=True)
membership = pd.concat(membership, ignore_index=True)
repeat_of = scores.run // FOLDS

ESTIMATORS = {
    "paired": ["run", "id", "r_chosen", "r_rejected", "p", "p_cf"],
    "brute force": ["run", "id", "r_chosen", "r_rejected"],  # no counterfactuals
}


def cm_of(repeats, columns):
    """CM per pair (sorted by id) from the runs of some repeats of the plan."""
    runs = scores.run[repeat_of.isin(repeats)].unique()
    s = scores.loc[scores.run.isin(runs), columns]
    m = membership[membership.run.isin(runs)]
    return estimate(s, m, n_boot=0).cm.to_numpy()


def reliability(n_repeats, columns, n_splits=10, seed=0):
    """Split-half CM reliability (Spearman-Brown, mean over splits) of the first repeats."""
    rng = np.random.default_rng(seed)
    orders = [np.arange(n_repeats)] + [rng.permutation(n_repeats) for _ in range(n_splits - 1)]
    values = []
    for order in orders:
        a, b = cm_of(order[0::2], columns), cm_of(order[1::2], columns)
        ok = np.isfinite(a) & np.isfinite(b)
        values.append(spearman_brown(spearman(a[ok], b[ok]), 2.0))
    return float(np.mean(values))


measured = {
    name: {k * FOLDS: reliability(k, columns) for k in (2, 4, 6, 8)}
    for name, columns in ESTIMATORS.items()
}
pd.DataFrame(measured).rename_axis("runs").round(3)

# %%
# Measured against predicted
# --------------------------
# From the reliability at all 40 runs, Spearman-Brown predicts the reliability at any other
# run count n, ``spearman_brown(rel_40, n / 40)``, and :func:`rmlens.stats.prophecy_factor`
# gives the factor that reaches 0.8 (rounded up to whole repeats of the plan, as the
# audit's ``runs_for_0_8`` is). The measured points at 10 to 30 runs should lie near the
# curve: the formula assumes that runs are exchangeable, which the repeats of a grouped
# K-fold plan are, and each point is itself an estimate from few repeats.

TARGET = 0.8
n = np.linspace(2, 200, 400)
fig, ax = plt.subplots(figsize=(7, 4.5))
for (name, points), color in zip(measured.items(), ("tab:blue", "tab:orange")):
    full = points[RUNS]
    need = RUNS * prophecy_factor(full, TARGET)
    repeats = max(1, int(np.ceil(need / FOLDS - 1e-9)))  # whole repeats, as the audit says
    ax.plot(n, spearman_brown(full, n / RUNS), color=color,
            label=f"{name}: prophecy from {RUNS} runs (0.8 from {repeats * FOLDS} runs)")
    ax.plot(list(points), list(points.values()), "o", color=color,
            label=f"{name}: measured on the first runs")
    if need <= n.max():
        ax.axvline(need, color=color, ls=":", lw=1)
ax.axhline(TARGET, color="grey", ls="--", lw=1)
ax.axvline(25, color="black", lw=0.8, alpha=0.4)
ax.text(26, 0.05, "25 runs", fontsize=8)
ax.set(xlabel="runs", ylabel="CM reliability (Spearman-Brown)", ylim=(0, 1.02), xlim=(0, 200))
ax.set_title("Is 25 runs enough? Reliability of CM against the number of runs")
ax.legend(fontsize=7, loc="lower right")
fig.tight_layout()

# %%
# With the paired estimator a handful of runs already ranks the pairs reliably; brute force
# needs far more runs for the same reliability. On your own data you need not compute any
# of this: ``rmlens memorize --target-reliability 0.8 --max-runs 200`` (or
# ``rmlens.audit(pairs, target_reliability=0.8, max_runs=200)``) adds whole repeats of the
# plan until CM's reliability reaches the target, and ``summary.json``'s
# ``target_reliability`` says whether it did and how many runs the prophecy predicts.
