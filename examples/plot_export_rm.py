"""
Take an rmlens RM to transformers, TRL and RewardBench
======================================================

An RM trained with rmlens is meant to be used: as the reward of TRL's PPO or GRPO, in
RewardBench, on the hub. :func:`rmlens.hub.export_rm` (``rmlens export``) writes it as
a standard ``AutoModelForSequenceClassification`` folder with a model card, and checks that
the folder scores as rmlens does. Here we train a linear head on the offline
SmolLM2-135M-Instruct backbone (``smollm2-135m``), export it, and score the same pairs with
rmlens and with transformers alone.
"""

# %%
# Train a small RM
# ----------------
# A logistic head on SmolLM2's last-token features, fitted on 60 synthetic pairs whose
# chosen responses tend to be the better written ones. The backbone stays frozen.

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer
from transformers.utils import logging

import rmlens
from rmlens.hub import export_rm
from rmlens.rewards import FrozenHeadTrainer, HeadConfig

logging.set_verbosity_error()
pairs = rmlens.synthesize(rmlens.SynthConfig(n_pairs=80, n_users=8, seed=0))
train, test = pairs.iloc[:60], pairs.iloc[60:].reset_index(drop=True)
trainer = FrozenHeadTrainer(HeadConfig(head="logistic"), model="smollm2-135m")
trainer.fit(train, quiet=True)
rm = trainer.rm_
r_c, r_r = rm.score_pairs(test)
print(f"rmlens: held-out accuracy {np.mean(r_c > r_r):.3f} on {len(test)} pairs")

# %%
# Export
# ------
# The head on standardized features is folded into the classifier's ``score`` layer. That
# layer has no bias in causal LMs, so the constant part of the reward is recorded as
# ``rmlens_reward_offset`` in ``config.json``: every difference r+ - r- is unchanged. The
# folder truncates nothing, so the RM was left at the model's own length limit
# (``max_length``, the default): an RM that cut its pairs shorter scores long pairs
# differently from the folder, and the card says so.

out = Path(tempfile.mkdtemp()) / "rm-hf"
exported = export_rm(rm, out)
print(f"format {exported.format}, offset {exported.offset:.4f}, "
      f"check on probe pairs: max |difference| {exported.max_abs_diff:.1e}")
print((out / "README.md").read_text().split("## Use it")[0])

# %%
# Score with transformers alone
# -----------------------------
# The way a user of the folder would: the chat template, then the model. No rmlens.

model = AutoModelForSequenceClassification.from_pretrained(out).eval()
tokenizer = AutoTokenizer.from_pretrained(out)


def hf_rewards(prompts, responses) -> np.ndarray:
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": p},
                                            {"role": "assistant", "content": r}], tokenize=False)
             for p, r in zip(prompts, responses)]
    batch = tokenizer(texts, add_special_tokens=False, padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(**batch).logits[:, 0].numpy()


h_c, h_r = hf_rewards(test.prompt, test.chosen), hf_rewards(test.prompt, test.rejected)
print(f"transformers: accuracy {np.mean(h_c > h_r):.3f}; "
      f"max |margin difference| {np.abs((h_c - h_r) - (r_c - r_r)).max():.1e}")

fig, ax = plt.subplots(figsize=(4.5, 4.5))
ax.scatter(r_c - r_r, h_c - h_r, s=12)
lims = [min(ax.get_xlim()[0], ax.get_ylim()[0]), max(ax.get_xlim()[1], ax.get_ylim()[1])]
ax.plot(lims, lims, color="grey", lw=0.8, ls="--")
ax.set(xlabel="rmlens: r+ - r-", ylabel="exported folder in transformers: r+ - r-",
       title="The same RM, two libraries")
fig.tight_layout()

# %%
# Elsewhere
# ---------
# ``GRPOTrainer(reward_funcs=str(out), ...)`` in TRL and ``rewardbench --model=<out>``
# load the folder as it is; :doc:`../guide/elsewhere` covers both, and the formatting and
# truncation choices that every score depends on.
