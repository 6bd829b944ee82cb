"""
Optimal and pessimal tokens of a reward model
=============================================

Ask an RM "What, in one word, is the greatest thing ever?" and score *every* token of its
vocabulary as the one-token answer: the highest-scoring tokens are its optimal tokens, the
lowest its pessimal ones. :func:`rmlens.sweep` does this for any RM that
:func:`rmlens.load_rm` loads (an RM folder, an experiment directory, a sequence classifier
or a hub id), scoring the shared prompt once and every candidate token from its cached
state, and writes the scores, their moments, the top and bottom tokens, and how the
framing of the prompt (best / worst) moves them.

A real sweep runs on a real RM over tens of thousands of tokens. Nothing can be downloaded
here, so we build a stand-in: a tiny random causal LM (2 layers, 32 wide) over a
vocabulary of about 130 whole words, give it a reward head trained on a handful of
one-word answers, and sweep its whole vocabulary in seconds.
"""

# %%
# A tiny backbone
# ---------------
# A word-level tokenizer with a chat template (the sweep formats every candidate as the
# assistant's answer to the prompt) and a random 2-layer Llama built from a config, saved
# as a local model folder: anything ``rmlens`` takes as ``--model``.

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from transformers.utils import logging

import rmlens
from rmlens.rewards import FrozenHeadTrainer, HeadConfig, save_head_rm

logging.set_verbosity_error()
logging.disable_progress_bar()

GOOD = "love peace joy kindness friendship hope freedom music laughter family"
BAD = "war hate pain cruelty greed fear disease poverty violence loneliness"
OTHER = (
    "what in one word is the greatest best worst thing ever a an of and to it this that you "
    "i we they yes no maybe sure never please thanks sorry hello goodbye cat dog tree river "
    "mountain sun moon rain snow bread water coffee tea book chair table door window car "
    "train city road paper stone glass red blue green black white big small old new fast "
    "slow hot cold good bad nice awful great terrible happy sad calm angry truth lies money "
    "time work sleep dream home school science art nothing everything"
)
SPECIAL = ["<pad>", "<unk>", "<s>", "</s>", "<|user|>", "<|assistant|>"]
words = list(dict.fromkeys(f"{GOOD} {BAD} {OTHER}".split() + [",", "?", ".", "!"]))
core = Tokenizer(models.WordLevel({t: i for i, t in enumerate(SPECIAL + words)}, "<unk>"))
core.pre_tokenizer = pre_tokenizers.Sequence(
    [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
)
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
print(len(tokenizer), "tokens in the vocabulary")

# %%
# A tiny RM
# ---------
# The head is the logistic Bradley-Terry head fitted on the frozen backbone's features of
# a few pairs: six good one-word answers chosen over six bad ones (one L2 penalty: with no
# validation pairs there is nothing to choose it on). :func:`rmlens.rewards.save_head_rm`
# writes the RM folder (``rm_config.json`` and the head) that ``load_rm`` and ``sweep``
# read. The other four good and bad words are never trained on.

prompt = "What, in one word, is the greatest thing ever?"
good, bad = GOOD.split(), BAD.split()
train_good, train_bad = good[:6], bad[:6]
pairs = pd.DataFrame({
    "id": [f"p{i}" for i in range(36)],
    "prompt": prompt,
    "chosen": [g for g in train_good for _ in train_bad],
    "rejected": [b for _ in train_good for b in train_bad],
})
trainer = FrozenHeadTrainer(HeadConfig(head="logistic", l2_grid=(1.0,)),
                            model=str(work / "backbone"), cache_dir=False)
trainer.fit(pairs, quiet=True)
rm_dir = save_head_rm(work / "rm", str(work / "backbone"), head=trainer.head_)

# %%
# Sweep the vocabulary
# --------------------
# Three prompts, the default ones of ``rmlens sweep``: the greatest, best and worst thing
# ever, in one word. Special tokens are skipped; ``max_tokens`` sweeps only the first ids
# of a large vocabulary, for a quick look.

summary = rmlens.sweep(str(rm_dir), out=work / "sweep", threads=1, quiet=True)
slug, stats = next(iter(summary["models"].items()))
table = pd.read_parquet(work / "sweep" / slug / "sweep.parquet")
print(stats["n_tokens"], "tokens swept per prompt;", stats["n_skipped_special"], "special skipped")
table.head()

# %%
# The distribution of token scores
# --------------------------------
# For the first prompt, with the words the head was trained on and the held-back good and
# bad words marked below the histogram.

first = table[table.prompt == prompt].set_index("decoded")
kinds = {
    "trained chosen": train_good, "trained rejected": train_bad,
    "held-back good": good[6:], "held-back bad": bad[6:],
}
fig, ax = plt.subplots(figsize=(8, 4))
ax.hist(first.score, bins=40, color="lightgrey", label="every token")
for (kind, group), color in zip(kinds.items(), ("seagreen", "indianred", "lime", "orange")):
    scores = first.score.reindex(group).dropna()
    ax.plot(scores, [-0.3] * len(scores), "|", ms=14, mew=2, color=color, label=kind)
ax.set(xlabel="reward of the one-token answer", ylabel="tokens")
ax.set_title(prompt, fontsize=10)
ax.legend(fontsize=8)
fig.tight_layout()

# %%
# Optimal and pessimal tokens
# ---------------------------
# The ten best and ten worst tokens of the first prompt (``stats.json``'s ``top`` and
# ``bottom`` hold them for every prompt). The head ranks its training words the right way
# round, chosen above rejected, yet neither end belongs to them: the extremes are tokens it
# never saw, whose features happen to lie farther along the head's direction than any
# training answer, and the held-back good and bad words fall anywhere (a random backbone
# knows no meaning to carry over). That is the point of sweeping: an RM's optimal tokens
# are seldom the answers anyone would pick, and only a sweep of the whole vocabulary finds
# them.

ends = pd.concat([first.nlargest(10, "score"), first.nsmallest(10, "score").iloc[::-1]])
colors = ["seagreen" if w in good else "indianred" if w in bad else "grey" for w in ends.index]
fig, ax = plt.subplots(figsize=(7, 5))
ax.barh(range(len(ends)), ends.score, color=colors)
ax.set_yticks(range(len(ends)), ends.index)
ax.invert_yaxis()
ax.set_xlabel("reward (green: a good word, red: a bad word, grey: neither)")
ax.set_title("Top and bottom 10 tokens", fontsize=10)
fig.tight_layout()

# %%
# How much the framing of the prompt moves the ranking: ``framing`` correlates the scores
# under every two prompts. An RM that reads the question should rank tokens in reverse
# under "best" and "worst"; a high positive correlation means it mostly ignores it (ours
# was trained on one prompt only).

pd.DataFrame(stats["framing"])[["prompt_a", "prompt_b", "spearman", "top_overlap"]]
