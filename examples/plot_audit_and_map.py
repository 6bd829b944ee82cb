"""
Audit synthetic pairs and read the memorization map
===================================================

A counterfactual memorization audit trains many reward models (RMs) on user-grouped splits
of the same preference pairs. For every pair it compares the RMs that trained on it (TM,
the training-set probability that the chosen response wins) with the RMs that did not (TG,
the generalization probability); CM = TM - TG is how much the pair's own label was
memorized rather than learned from the other pairs.

Here the pairs come from :func:`rmlens.synthesize`, whose world has *planted* mechanisms:
each pair is decided by response quality, the annotator's own taste, the longer response,
the signature model, or a flipped label (noise). The audit does not see the ``mechanism``
column, so we can check afterwards whether the pairs it says are memorized are the ones we
expect. The settings are tiny (400 pairs, 10 runs) so that the example runs in about a
minute on a CPU; real audits use thousands of pairs and 25 runs or more.
"""

# %%
# Make the pairs
# --------------
# 400 pairs from 40 annotators. Every pair has a ``user_id``, so the audit groups by user:
# a run holds out whole users, never single pairs of a user it trains on.

import json
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import rmlens

pairs = rmlens.synthesize(rmlens.SynthConfig(n_pairs=400, n_users=40, seed=0))
print(pairs["mechanism"].value_counts().to_string())
pairs[["prompt", "chosen", "rejected", "user_id", "mechanism"]].head(3)

# %%
# Audit
# -----
# The defaults are the ones of ``rmlens memorize``: the offline ``minilm`` backbone stays
# frozen, each run fits the logistic Bradley-Terry head (solved exactly, no seed), and the
# paired estimator also scores every pair with its user removed or added, which makes CM
# reliable from few runs. Embeddings are cached (``$RMLENS_CACHE``), so running the example
# again skips the encoding. We only shrink the number of runs.

out = Path(tempfile.mkdtemp()) / "audit"
config = rmlens.AuditConfig(model="minilm", runs=10, folds=5, n_boot=200)
table = rmlens.audit(pairs, config, out=out, quiet=True)
table[["id", "mechanism", "tm", "tg", "cm", "cm_lo", "cm_hi", "category"]].head()

# %%
# Before reading CM, read the RMs' quality: an RM near chance on the pairs it held out
# memorizes by fitting alone, and its TG stays near 0.5. ``summary.json`` holds the held-out
# accuracy, the split-half reliability of TM, TG and CM, and plain-word warnings.

summary = json.loads((out / "summary.json").read_text())
print("estimator:", summary["estimator"])
held_out = summary["rm_quality"]["held_out"]["accuracy"]
print(f"held-out accuracy: {held_out['mean']:.3f} (std over runs {held_out['std']:.3f})")
for score in ("tm", "tg", "cm"):
    print(f"{score.upper()} reliability (Spearman-Brown): "
          f"{summary['reliability'][score]['spearman_brown']:.3f}")
for warning in summary["warnings"]:
    print("warning:", warning["message"])

# %%
# The paired estimator checks itself: in every run it refits the head exactly with one
# random user removed or added (``check_exact``, default 1) and compares the refit with
# the Newton-step counterfactual. ``summary.json``'s ``exactness`` gives the errors beside
# the true effects. On data this small a user is a sizeable share of a run and the chosen
# penalty is weak, so a pair with a large effect can be off by much more than the typical
# pair; the audit then warns, as it may have done above. The ranking of the effects
# (``effect_spearman``) is what CM's ranking of pairs rests on.

exactness = summary["exactness"]
print({k: round(exactness[k], 4) for k in ("median_abs_error", "p90_abs_error",
                                           "max_abs_error", "median_abs_effect",
                                           "effect_spearman")})

# %%
# CM by planted mechanism
# -----------------------
# Pairs whose label is flipped (``noise``) or decided by one annotator's taste cannot be
# predicted from the other users' pairs: only the RMs that saw them prefer their chosen
# response, so their CM is high. Pairs won by a shortcut every user shares (the longer
# response, the signature model's phrase) are predicted just as well by RMs that never saw
# them: CM near 0. Quality pairs sit in between: 400 pairs teach a frozen-feature head the
# planted quality levels only in part, so some of them are still fitted rather than
# learned.

order = (table.groupby("mechanism")["cm"].median().sort_values(ascending=False).index)
values = [table.loc[table.mechanism == m, "cm"].dropna().to_numpy() for m in order]

fig, ax = plt.subplots(figsize=(7, 4))
ax.boxplot(values, showfliers=False)
ax.set_xticks(range(1, len(order) + 1), order)
rng = np.random.default_rng(0)
for i, v in enumerate(values, start=1):
    ax.scatter(i + rng.uniform(-0.18, 0.18, len(v)), v, s=8, alpha=0.5)
ax.axhline(config.cm_threshold, color="grey", ls="--", lw=1,
           label=f"memorized from CM >= {config.cm_threshold}")
ax.set_ylabel("CM = TM - TG")
ax.set_title("Counterfactual memorization by planted mechanism")
ax.legend(loc="upper right")
fig.tight_layout()

# %%
# The share of pairs of each mechanism in each category (``memorized``: CM at or above the
# threshold; ``generalized``: TG at least 0.5; ``not_learned``: TM below 0.5).

print(table.groupby("mechanism")["category"].value_counts(normalize=True)
      .unstack(fill_value=0).round(2).to_string())

# %%
# The memorization map
# --------------------
# Every audit also draws its memorization map, ``memorization_map.png``: the density of
# pairs over TM (x: how well a pair is fitted by the RMs trained on it) and TG (y: how well
# the RMs that held it out predict it). Generalized pairs sit near the diagonal at the top
# right; memorized pairs lie below it, by CM.

image = plt.imread(out / "memorization_map.png")
fig, ax = plt.subplots(figsize=(7, 7))
ax.imshow(image)
ax.axis("off")
fig.tight_layout()
