"""
Evaluate a reward model you downloaded
======================================

:func:`rmlens.evaluate` measures any reward model on a set of pairs: accuracy (ties count
1/2), calibration of sigmoid(r+ - r-) as a preference probability (ECE, Brier score,
log-loss, a reliability diagram), the reward distribution, accuracy broken down by columns
of the pairs, and *shortcut probes*: edits that should not change a response's quality
(padding it, adding a compliance phrase, ...) and the share of pairs whose preference they
flip.

The RM is anything :func:`rmlens.load_rm` loads: a hub id of a sequence-classification RM
(``rmlens.load_rm("OpenAssistant/reward-model-deberta-v3-large-v2")``), a local folder of
one, an RM folder that rmlens saved, or an audit's experiment directory (the ensemble of
its runs). A hub id and a local path are passed the same way. Nothing can be downloaded
here, so we first *save* a small RM, a logistic head on the frozen ``minilm`` backbone
trained on synthetic pairs, and then load it from its folder exactly as we would load a
downloaded one.
"""

# %%
# Save a small RM
# ---------------
# Train on 30 of the 40 synthetic annotators and keep the other 10 for the evaluation.
# ``rm_.save(folder)`` writes ``rm_config.json`` and the head; an audit saves each run's
# RM the same way (``runs/<run>/rm``).

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import rmlens
from rmlens.rewards import FrozenHeadTrainer

pairs = rmlens.synthesize(rmlens.SynthConfig(n_pairs=400, n_users=40, seed=0))
held_out_users = sorted(pairs.user_id.unique())[30:]
test = pairs[pairs.user_id.isin(held_out_users)].reset_index(drop=True)
train = pairs[~pairs.user_id.isin(held_out_users)].reset_index(drop=True)

work = Path(tempfile.mkdtemp())
trainer = FrozenHeadTrainer(rmlens.HeadConfig(head="logistic"), model="minilm")
trainer.fit(train.iloc[:240], eval_data=train.iloc[240:], quiet=True)  # lambda on the rest
folder = trainer.rm_.save(work / "my-rm")
print(sorted(p.name for p in folder.iterdir()))

# %%
# Load it and evaluate
# --------------------
# ``load_rm`` gives an object with ``score(prompts, responses)`` and ``score_pairs(pairs)``;
# ``evaluate`` also takes the path itself (``rm="path/or/hub-id"``). ``by`` breaks the
# accuracy down by a column, here the planted ``mechanism`` of the synthetic pairs. The
# probes edit a seeded sample of ``probe_pairs`` pairs (default 200; 50 here, to stay
# fast, so their flip rates are rough).

rm = rmlens.load_rm(folder)
metrics = rmlens.evaluate(test, rm=rm, by=["mechanism"], n_bins=5, probe_pairs=50,
                          out=work / "eval", quiet=True)
print(f"{metrics['n_pairs']} pairs: accuracy {metrics['accuracy']:.3f}, "
      f"ECE {metrics['ece']:.3f}, Brier {metrics['brier']:.3f}, "
      f"log-loss {metrics['log_loss']:.3f}")
for warning in metrics["warnings"]:
    print("warning:", warning)

# %%
# Calibration, accuracy and probe flip rates
# ------------------------------------------
# Left: the reliability diagram, mean confidence max(p, 1 - p) against how often the
# preferred response is the chosen one, in equal-mass bins. Middle: accuracy per planted
# mechanism (flipped ``noise`` pairs should be *below* chance for a good RM). Right: for
# each probe, the share of pairs whose preference flips when the edit is applied to the
# chosen or to the rejected response.

bins = pd.DataFrame(metrics["calibration"]["bins"])
by = pd.DataFrame(metrics["by"]["mechanism"]).T  # one row per mechanism: accuracy, n
probes = pd.DataFrame(metrics["probes"])

fig, axes = plt.subplots(1, 3, figsize=(14, 4))
ax = axes[0]
ax.plot([0.5, 1], [0.5, 1], color="grey", ls="--", lw=1)
ax.plot(bins.confidence, bins.accuracy, "o-")
ax.set(xlabel="confidence", ylabel="accuracy", title=f"reliability (ECE {metrics['ece']:.3f})")

ax = axes[1]
ax.bar(range(len(by)), by["accuracy"], color="steelblue")
ax.set_xticks(range(len(by)), [f"{m}\n({int(n)})" for m, n in by["n"].items()], fontsize=8)
ax.axhline(0.5, color="grey", ls="--", lw=1)
ax.set(ylim=(0, 1), ylabel="accuracy", title="accuracy by mechanism")

ax = axes[2]
table = probes.pivot(index="probe", columns="side", values="flip_rate")
y = np.arange(len(table))
for i, side in enumerate(table.columns):
    ax.barh(y + (i - (len(table.columns) - 1) / 2) * 0.4, table[side], 0.4, label=f"edit {side}")
ax.set_yticks(y, table.index, fontsize=8)
ax.set(xlabel="flip rate", title="shortcut probes")
ax.legend(fontsize=8)
fig.tight_layout()

# %%
# ``out`` holds ``metrics.json``, ``probes.parquet``, ``scores.parquet`` and the plots
# ``reliability.png``, ``rewards.png`` and ``probes.png``; ``rmlens evaluate --rm FOLDER
# --data pairs.jsonl --out DIR`` writes the same from the command line.

print(sorted(p.name for p in (work / "eval").iterdir()))
