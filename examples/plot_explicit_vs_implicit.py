"""
Explicit against implicit reward models under a token shift
===========================================================

An *explicit* RM (EX-RM) puts a linear head on a language model's hidden state; an
*implicit* RM (IM-RM) is the DPO reward, beta times the log-ratio of the tuned model's
likelihood of the response to the reference model's. Razin et al. (2025) show that the two
can fit the same training pairs equally well and still generalize differently: the
implicit RM leans on the exact tokens of the answers, so a rewrite that keeps the meaning
but changes the tokens hurts it more.

:func:`rmlens.generalize` trains both on the same pairs and backbone and scores them on
the training split, held-out prompts (in distribution) and shifted splits. Its built-in
``persona`` task is the controlled token shift of the paper: a persona agrees with
prosocial statements and disagrees with antisocial ones; training answers are
"Yes"/"Sure" against "No"/"Never", the shifted answers mean the same with other tokens,
"Certainly"/"Absolutely" against "Not really"/"Nope".

The paper fine-tunes pretrained LMs (``rmlens generalize --task persona`` uses LoRA on
SmolLM2-135M). To build in seconds, this page first runs the call on a tiny *random* causal
LM that knows no English: it can learn which statements the persona agrees with and the
training answers, but it has no reason to know that "Certainly" means "Yes". Read those
figures for the shape of the call and its outputs. The last section shows the measured
result with the pretrained backbone, three seeds, from the findings page
(``python benchmarks/findings.py ex-vs-im``), labelled as such.
"""

# %%
# The task and a tiny backbone
# ----------------------------
# :func:`rmlens.generalization.persona_splits` builds the splits ``generalize`` uses: the
# training statements with the training answers, held-out statements with the same
# answers (``in_distribution``) and with the shifted answers (``token_shift``), and the
# training statements with the shifted answers (``token_shift:train_prompts``). The
# backbone is a random 2-layer Llama over a word-level vocabulary of exactly these texts,
# built from a config and saved as a local model folder.

import json
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from transformers.utils import logging

import rmlens
from rmlens.generalization import persona_splits

logging.set_verbosity_error()
logging.disable_progress_bar()

N_STATEMENTS = 200
splits = persona_splits(N_STATEMENTS, test_fraction=0.2, seed=0)
for name, frame in splits.items():
    print(f"{name:26s} {len(frame):4d} pairs, answers {sorted(set(frame.chosen))}")

split_words = pre_tokenizers.Sequence(
    [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
)
texts = {t for f in splits.values() for c in ("prompt", "chosen", "rejected") for t in f[c]}
words = sorted({w for t in texts for w, _ in split_words.pre_tokenize_str(t)})
SPECIAL = ["<pad>", "<unk>", "<s>", "</s>", "<|user|>", "<|assistant|>"]
core = Tokenizer(models.WordLevel({t: i for i, t in enumerate(SPECIAL + words)}, "<unk>"))
core.pre_tokenizer = split_words
tokenizer = PreTrainedTokenizerFast(
    tokenizer_object=core, pad_token="<pad>", unk_token="<unk>", bos_token="<s>",
    eos_token="</s>", additional_special_tokens=SPECIAL[4:],
)
tokenizer.chat_template = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }}"
    "{{ eos_token }}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
torch.manual_seed(0)
lm = LlamaForCausalLM(LlamaConfig(
    vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
    num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128,
    pad_token_id=0, bos_token_id=2, eos_token_id=3,
))
work = Path(tempfile.mkdtemp())
lm.save_pretrained(work / "backbone")
tokenizer.save_pretrained(work / "backbone")
splits["train"][["prompt", "chosen", "rejected"]].head(3)

# %%
# Train both RMs and score every split
# ------------------------------------
# ``train`` holds everything about training and both RMs share it (its ``rm`` is set to
# explicit, then implicit). The tiny model is fine-tuned fully, on the CPU, for ten
# epochs. ``shifts`` adds rewrites of the held-out responses (synonyms, casing,
# punctuation, whitespace); the persona task brings its own token shift, so we add none.

train = rmlens.TrainConfig(model=str(work / "backbone"), finetune="full", epochs=10,
                           batch_size=8, lr=3e-3, head_lr=6e-3, max_length=64, beta=0.1,
                           device="cpu", seed=0)
config = rmlens.GeneralizeConfig(task="persona", n_statements=N_STATEMENTS, shifts="none",
                                 train=train)
table = rmlens.generalize(None, config, out=work / "generalize", quiet=True)
table.pivot(index="split", columns="rm", values="accuracy").round(3)

# %%
# Accuracy in and out of distribution
# -----------------------------------
# ``norm_margin`` is the mean ``|r+ - r-|`` divided by the standard deviation of the RM's
# rewards on its training split: how confidently the RM separates the answers, comparable
# across splits and between the two RMs.

order = ["train", "in_distribution", "token_shift:train_prompts", "token_shift"]
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
x = np.arange(len(order))
for ax, metric, label in ((axes[0], "accuracy", "accuracy (ties 1/2)"),
                          (axes[1], "norm_margin", "|r+ - r-| / std(r)")):
    for i, (rm, color) in enumerate((("explicit", "tab:blue"), ("implicit", "tab:orange"))):
        values = table[table.rm == rm].set_index("split").reindex(order)[metric]
        ax.bar(x + (i - 0.5) * 0.38, values, 0.38, label=f"{rm} RM", color=color)
    ax.set_xticks(x, order, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(label)
axes[0].axhline(0.5, color="grey", ls="--", lw=1)
axes[0].set_ylim(0, 1)
axes[0].legend(fontsize=8)
axes[0].set_title("accuracy by split")
axes[1].set_title("normalized absolute margin")
fig.tight_layout()

# %%
# Both RMs learn the training statements and carry that over to held-out statements with
# the same answers. Under the token shift both drop towards chance, whichever statements
# are asked: in a random backbone the shifted answers' tokens have embeddings that
# training never touched, so nothing links "Certainly" to "Yes". With a pretrained
# backbone the meaning is there to use, and the question becomes which RM uses it: in the
# paper's experiments the explicit RM keeps most of its accuracy under the shift, the
# implicit one much less.

# %%
# ``out`` also holds the per-pair scores (``scores.parquet``), the same figure as
# ``generalization.png`` and both trained RMs (``rms/explicit``, ``rms/implicit``), which
# :func:`rmlens.load_rm` loads; running the call again on the same folder reuses them.

print(sorted(str(p.relative_to(work / "generalize")) for p in (work / "generalize").glob("*")))

# %%
# With the pretrained backbone (measured, not run here)
# -----------------------------------------------------
# ``python benchmarks/findings.py ex-vs-im`` runs ``rmlens generalize`` with the pretrained
# SmolLM2-135M-Instruct and the command's defaults at three seeds: on the persona task, and
# on HH-RLHF harmless pairs with their token shifts and SQuALITY pairs as the domain shift
# (about an hour on 2 CPU cores). It writes ``docs/findings/ex-vs-im.json``, which this
# section reads: the accuracy each RM loses under each shift, with its 95% t-interval over
# the seeds. These are the pretrained figures; everything above is the random backbone's.

here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
found = next(p / "docs" / "findings" for p in (here, *here.parents)
             if (p / "docs" / "findings").is_dir())
measured = json.loads((found / "ex-vs-im.json").read_text())
drops = [(f["label"], f["value"], f["lo"], f["hi"]) for f in measured["figures"]]
fig, ax = plt.subplots(figsize=(9, 0.35 * len(drops) + 1))
for y, (label, value, lo, hi) in enumerate(drops[::-1]):
    ax.errorbar(value, y, xerr=[[value - lo], [hi - value]], fmt="o", capsize=3,
                color="black" if "minus" in label else "tab:orange" if "IM-RM" in label
                else "tab:blue")  # fmt: skip
ax.set_yticks(range(len(drops)), [d[0] for d in drops[::-1]], fontsize=7)
ax.axvline(0, color="grey", lw=0.8)
ax.set_xlabel("held-out accuracy lost under the shift (pretrained SmolLM2, 3 seeds)")
fig.tight_layout()
print(f"verdict: {measured['verdict']}. {measured['reading']}")
