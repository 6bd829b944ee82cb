"""
Best-of-n overoptimization
==========================

An RM is trained to be optimized against. Best-of-n sampling is the simplest optimizer:
draw n responses, keep the one the RM scores highest. As n grows the RM's own (proxy)
reward of the pick only rises, but its true (gold) quality rises, peaks and may fall once
the RM's shortcuts take over: Goodhart's law, as drawn by Gao et al. (2023), with the
distance from the base policy measured by KL_bon = log n - (n - 1) / n.

:func:`rmlens.overoptimize` draws these curves for every run of an audit and for
ensembles of the runs, on a candidate pool whose gold reward is known. Here the pool comes
from :func:`rmlens.generate_candidates` in the same synthetic world as the training pairs;
with ``policy="anticorrelated"`` its shortcuts (padding, the signature model's phrase, a
taste sentence) are likelier on *worse* answers, so an RM that rewards them picks worse
answers as n grows. Sizes are tiny (400 pairs, 10 runs, 20 prompts x 32 candidates) to
finish in about a minute; ``rmlens data candidates`` defaults to 200 prompts x 256.
"""

# %%
# The RMs: a small audit
# ----------------------
# Every run of an audit saves its RM (``runs/<run>/rm``), and those are the RMs pushed
# through best-of-n.

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt

import rmlens

pairs = rmlens.synthesize(rmlens.SynthConfig(n_pairs=400, n_users=40, seed=0))
work = Path(tempfile.mkdtemp())
_ = rmlens.audit(pairs, rmlens.AuditConfig(runs=10, n_boot=200, check_exact=0), out=work / "bt",
                 quiet=True)

# %%
# The candidate pool
# ------------------
# One row per candidate: its prompt, response, ``gold`` (the planted quality level, 0-3)
# and the shortcuts it carries, which gold never counts. ``n_users`` matches the pairs', so
# the taste sentences are the ones the RMs saw.

pool = rmlens.generate_candidates(
    rmlens.CandidatesConfig(n_prompts=20, n_responses=32, policy="anticorrelated", n_users=40)
)
# per gold level: mean filler sentences, share opening with the signature phrase, share
# ending with a taste sentence
print(pool.assign(taste=pool.taste != "").groupby("gold")[["padding", "signature", "taste"]]
      .mean().round(2))
pool[["prompt_id", "gold", "padding", "signature", "taste", "response"]].head(3)

# %%
# Best-of-n curves
# ----------------
# For each n the expected gold and proxy reward of the best-of-n pick are computed exactly
# from each prompt's 32 candidates sorted by the RM, then averaged over prompts; the
# proxy is each run's reward standardized over the pool. The oracle picks by gold itself:
# the ceiling. Intervals resample runs and prompts together.

found = rmlens.overoptimize([work / "bt"], pool, out=work, n_boot=200, quiet=True)
curves = found.curves
curves[["rm", "kind", "n", "kl", "gold", "lo", "hi", "proxy"]].head(8)

# %%
# Gold and proxy against KL
# -------------------------

fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
for rm, part in curves.groupby("rm", sort=False):
    kind = part.kind.iloc[0]
    style = {"oracle": dict(color="black", ls="--"), "runs": dict(color="tab:blue", lw=2)}.get(
        kind, dict(lw=1, alpha=0.8))
    left.plot(part.kl, part.gold, label=rm, **style)
    if kind != "ensemble":
        left.fill_between(part.kl, part.lo, part.hi, alpha=0.15, color=style.get("color"))
    if kind != "oracle":
        right.plot(part.kl, part.proxy, label=rm, **style)
left.set(xlabel="KL_bon = log n - (n - 1) / n", ylabel="gold reward of the pick (0-3)",
         title="gold: what the pick is worth")
right.set(xlabel="KL_bon = log n - (n - 1) / n", ylabel="proxy reward (standardized)",
          title="proxy: what the RM thinks it is worth")
left.legend(fontsize=7)
fig.suptitle("Best-of-n on an anticorrelated pool")
fig.tight_layout()

# %%
# The proxy rises with n for every RM, as it must. Gold does not: on this pool it falls
# from the first doublings on, because the RMs reward padding, the signature phrase and
# taste sentences more than the planted quality, and the anticorrelated pool puts those on
# worse answers. Ensembles of the runs (``mean``, the worst case ``min``, and ``uwo``,
# mean minus lambda times the variance) barely help here: all runs learned the same
# shortcuts from the same pairs. On an ``independent`` pool, where the shortcuts say
# nothing about quality, the same RMs give Gao et al.'s shape instead: gold rises a little
# for small n, peaks (at n = 4 with these settings) and then slowly falls while the oracle
# keeps climbing.

# %%
# The summary
# -----------
# Per RM: gold at the largest n, the n where gold peaks and the drop from that peak, the
# area between the oracle's and the RM's gold curves, and the within-prompt Spearman
# correlation of proxy and gold.

cols = ["rm", "gold_at_max_n", "peak_n", "gold_peak", "gold_drop", "oracle_gap_area",
        "spearman"]
found.summary[[c for c in cols if c in found.summary]].round(3)

# %%
# ``out`` got ``overoptimization.parquet``, ``overoptimization.json`` and the plots
# ``overoptimization*.png``, which ``report.html`` and ``compare.html`` show when they sit
# beside the audits. ``rmlens mitigate ... --candidates pool.jsonl`` draws the curves of
# every objective at once.

print(sorted(p.name for p in work.glob("overoptimization*")))
