"""
The SAE lens: latents that name a shortcut, and debiasing without retraining
=============================================================================

The hand-built features of :func:`rmlens.attribute` name what someone thought of.
:func:`rmlens.fit_sae` (``rmlens sae DIR``) lets the data name the rest: it trains a TopK
sparse autoencoder on the response features the audit's heads read (from the audit's
embedding cache: nothing is encoded again) and gives every latent a name card: its
top-activating responses, its Spearman correlation with the hand-built features, and its
weight in the audited heads. The latents, chosen minus rejected per pair, join the
attribution as features. :func:`rmlens.sae.debias` then projects the decoder directions of
shortcut latents out of every run's head, after SteerRM, and re-scores the runs without
training anything.

In the synthetic world a signature phrase ("As Atlas, I'm glad to help!") opens every
response of one model, which wins its pairs regardless of quality. We check that one latent
is that phrase, that the heads lean on it, and what suppressing it costs. The audit is
small (500 pairs, 10 runs) to run in about a minute; ``benchmarks/sae.py`` and
``benchmarks/sae_debias.py`` run the same steps on 1,500 pairs and 25 runs.
"""

# %%
# A small audit
# -------------
# The default frozen audit: the offline ``minilm`` backbone and a logistic head per run.
# Ten runs are two repeats of the 5-fold plan, so the debiasing rule below can compare
# the two halves of the runs.

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import rmlens
from rmlens.comparison import load_audit
from rmlens.sae import debias
from rmlens.stats import pairwise_correct

synth = rmlens.SynthConfig(n_pairs=500, n_users=20, seed=0)
pairs = rmlens.synthesize(synth)
root = Path(tempfile.mkdtemp())
out = root / "audit"
# check_exact=0: skip the exactness check of the paired estimator (see the first example)
_ = rmlens.audit(pairs, rmlens.AuditConfig(runs=10, n_boot=200, check_exact=0), out=out, quiet=True)

# %%
# Fit the SAE
# -----------
# On its defaults: 512 latents, k = 16 active per response, 100 epochs, 10% of the distinct
# responses held out. The fraction of variance unexplained (FVU) is measured on the held-out
# responses; a dead latent never fires. The SAE is saved in sae-lens's format in
# ``out/sae/`` (``cfg.json``, ``sae_weights.safetensors``) with the name cards
# (``cards.json``), the pair latents (``latents.parquet``) and the correlations
# (``correlations.parquet``).

lens = rmlens.fit_sae(out, quiet=True)
record = lens.record
print(f"{record['n_responses']} responses, {record['n_heldout']} held out; "
      f"FVU {record['fvu']:.3f}; dead latents {record['dead_latents']} of {lens.sae.n_latents}")

# %%
# The name cards
# --------------
# The latents the heads weigh most: the head's weight on the raw features along each
# latent's unit decoder direction, mean and standard deviation over the 10 runs, and the
# hand-built feature each latent correlates with most.

by_weight = sorted(lens.cards, key=lambda c: -abs(c["head_weight"]["mean"]))
pd.DataFrame([{
    "latent": c["name"],
    "head weight": f"{c['head_weight']['mean']:+.2f} ± {c['head_weight']['std']:.2f}",
    "correlate": c["correlates"][0]["feature"],
    "Spearman": round(c["correlates"][0]["spearman"], 2),
    "top response": c["top_responses"][0]["text"][:50],
} for c in by_weight[:8]])

# %%
# The latent most correlated with the signature model (``model=atlas-7b``, 1 where that
# system wrote the response) is the signature phrase: its top responses all open with it.
# The phrase says "I'm glad", a first-person feeling, so the hand-built anthropomorphism
# feature ties with the latent about as strongly as the model identity does.

rho = lens.correlations.set_index("latent")
signature = int(rho[f"model={synth.signature_model}"].idxmax())
card = next(c for c in lens.cards if c["latent"] == signature)
rank = [c["latent"] for c in by_weight].index(signature) + 1
print(f"sae_{signature}: Spearman {rho.loc[signature, f'model={synth.signature_model}']:.2f} "
      f"with the signature model; head weight {card['head_weight']['mean']:+.2f} "
      f"(rank {rank} of {len(lens.cards)} active latents)")
print("correlates: " + ", ".join(f"{c['feature']} {c['spearman']:+.2f}"
                                 for c in card["correlates"][:3]))
for top in card["top_responses"]:
    print(f"  {top['activation']:5.2f}  {top['text'][:75]}")

# %%
# The latents as pair features
# ----------------------------
# ``features=("sae",)`` adds each latent's chosen-minus-rejected activation beside the
# hand-built features. One regressor (LightGBM with TreeSHAP) and no stability refits keep
# it fast; we leave out the synthetic world's planted truth, as in the attribution example.
# Running :func:`rmlens.fit_sae` again afterwards (the SAE is reused) puts each latent's
# SHAP share for TM, TG and CM on its card.

planted = ("mechanism", "quality_chosen", "quality_rejected")
attributor = rmlens.attribute(out, features=("sae",), regressors=("lightgbm",), exclude=planted,
                              stability=False, plots=False, quiet=True)
tg = attributor.importance_.query("target == 'tg'").sort_values("rank")
latents = tg[tg.feature.str.match(r"^sae_\d+$")]
print(f"sae_{signature} for TG: rank {int(tg.set_index('feature').loc[f'sae_{signature}', 'rank'])}"
      f" of {len(tg)} features, {list(latents.feature).index(f'sae_{signature}') + 1} among the "
      f"{len(latents)} latents that joined them")
tg.head(8)[["feature", "importance", "rank"]]

# %%
# On this data the length differences lead for TG; the signature latent ranks high too,
# near ``chosen_model``, the hand-built feature that names the same shortcut by the
# system's name.

# %%
# Debias without retraining
# -------------------------
# With ``suppress="auto"`` the rule picks a latent tied to a shortcut feature (a Spearman
# correlation of 0.5 or more, either sign, with a length feature, a model identity or
# refusal), weighted by the heads (its mean weight in the top 10% of the active latents,
# with the same sign in 80% of the runs) and stable across the two halves of the runs.
# Its unit decoder direction is projected out of each run's head, the reward of the mean
# training response kept, and the re-scored runs form an experiment directory that
# :func:`rmlens.compare` reads beside the audit.

found = debias(out, out=root / "debiased", quiet=True)
for latent in found.latents:
    print(f"sae_{latent}: {found.record['why'][str(latent)]}")

# %%
# Before and after
# ----------------
# ``found.figures`` holds each run's figures on the pairs it held out, before and after:
# accuracy, and the absolute correlation of the reward margin with the length difference in
# words. We add the accuracy on the pairs that quality decided and on those the signature
# model won regardless of quality (the ``mechanism`` column is the synthetic world's planted
# truth, which real data would not have), from the two experiment directories.


def accuracy_by_mechanism(directory: Path, mechanism: str) -> float:
    audit = load_audit(directory, directory.name)
    rows = (audit.table["mechanism"] == mechanism).to_numpy()[:, None] & audit.held_out
    margins = audit.margins
    return float(np.mean([pairwise_correct(margins[rows[:, r], r]).mean()
                          for r in range(margins.shape[1]) if rows[:, r].any()]))


reported = found.figures
figures = pd.DataFrame({
    when: {
        "held-out pairs": reported["heldout_accuracy"][when]["mean"],
        "quality pairs": accuracy_by_mechanism(directory, "quality"),
        "signature pairs": accuracy_by_mechanism(directory, "model_identity"),
        "|corr(margin, length)|": reported["margin_length_corr_abs"][when]["mean"],
    }
    for when, directory in (("before", out), ("after", found.out))
})
print(figures.round(3))

fig, ax = plt.subplots(figsize=(8, 4))
x = np.arange(len(figures))
ax.bar(x - 0.2, figures.before, width=0.4, label="audit (bt)", color="steelblue")
suppressed = ", ".join(f"sae_{j}" for j in found.latents)
ax.bar(x + 0.2, figures.after, width=0.4, label=f"{suppressed} projected out", color="indianred")
ax.axhline(0.5, color="grey", ls="--", lw=1)
ax.set_xticks(x, ["accuracy\nheld-out pairs", "accuracy\nquality pairs",
                  "accuracy\nsignature pairs", "|corr(margin,\nlength diff.)|"])
ax.set_ylim(0, 1)
ax.set_title("Suppressing the signature latent, mean over runs on held-out pairs")
ax.legend(loc="lower left")
fig.tight_layout()

# %%
# The signature shortcut is gone: the pairs it won fall toward chance, while the pairs
# quality decided lose little. Overall held-out accuracy drops more, because the signature
# itself decided some held-out labels in this world. Length is left alone (the default
# rule takes a latent only with a tie of 0.5 or more, and the length latents stay below),
# so the margins lean on it as much as before or more. A suppressed direction can carry
# real quality too; read the held-out accuracy beside the shortcut figures, or side by
# side with other objectives through ``rmlens compare DIR DEBIASED_DIR``.
