"""
Converting PRISM-style data into pairs
======================================

The paper audits RMs trained on PRISM (``HannahRoseKirk/prism-alignment``): real
participants, several models per prompt, and a 1-100 slider score for every response.
:func:`rmlens.data.convert` turns its published layout into rmlens pairs with
``user_id``, ``chosen_model``/``rejected_model``, ``margin`` (the score difference), the
turn, the sampling field (``conversation_type``) and PRISM's own ids, and counts what it
read, wrote and dropped.

Nothing is downloaded here: we write a tiny ``conversations.jsonl`` in PRISM's layout, with
invented texts, and convert that. The same call takes the real file (or its folder, or the
hub id when the hub is reachable), and ``rmlens data convert --from prism FILE --out
prism.jsonl`` does it from the command line.
"""

# %%
# A tiny conversations.jsonl
# --------------------------
# One record per conversation. ``conversation_history`` lists the messages of every turn:
# the user's, then the rated model responses (``score``, ``if_chosen``,
# ``within_turn_id``). In turn 0 up to four different models answer; in later turns the
# chosen model answers twice. PRISM stores an empty response as ``"EMPTY STRING"``.

import json
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import rmlens.data


def user(turn, text):
    return {"turn": turn, "role": "user", "content": text}


def model(turn, within, name, text, score, chosen=False):
    return {"turn": turn, "role": "model", "content": text, "model_name": name,
            "model_provider": name.split("-")[0], "score": score, "if_chosen": chosen,
            "within_turn_id": within}


conversations = [
    ("c1", "user01", "unguided", [
        user(0, "How do I keep bread from going stale?"),
        model(0, 0, "gpt-4", "Keep it in a bread box, or slice and freeze it.", 88, True),
        model(0, 1, "claude-2", "Wrap it in a cloth bag at room temperature.", 71),
        model(0, 2, "falcon-7b", "EMPTY STRING", 1),
        model(0, 3, "llama-2-13b", "Put it in the fridge.", 22),
        user(1, "Does freezing change the taste?"),
        model(1, 0, "gpt-4", "Hardly, if you toast the slices straight from frozen.", 80, True),
        model(1, 1, "gpt-4", "A little; thaw it wrapped so it does not dry out.", 64),
    ]),
    ("c2", "user01", "values guided", [
        user(0, "Is it fine to lie to spare a friend's feelings?"),
        model(0, 0, "claude-2", "Small kind omissions can be fine; lies that matter are not.",
              75, True),
        model(0, 1, "command-light", "Never lie.", 30),
        model(0, 2, "gpt-4", "It depends on what is at stake for your friend.", 75),
    ]),
    ("c3", "user02", "controversy guided", [
        user(0, "Should homework be banned in primary school?"),
        model(0, 0, "llama-2-13b", "Short homework helps some children, and tires others.",
              58),
        model(0, 1, "command-light", "Yes, ban it.", 12),
        model(0, 2, "gpt-4", "Research finds little benefit before age ten; reading helps.",
              90, True),
        model(0, 3, "claude-2", "I would rather not take sides.", 35),
    ]),
    ("c4", "user02", "unguided", [
        user(0, "Suggest a name for a grey cat."),
        model(0, 0, "falcon-7b", "Smokey.", 66, True),
        model(0, 1, "gpt-4", "Ash, Pebble or Earl Grey.", 61),
        user(1, "Something more unusual?"),
        model(1, 0, "falcon-7b", "Nimbus.", 84, True),
        model(1, 1, "falcon-7b", "Tungsten.", 47),
    ]),
    ("c5", "user03", "unguided", [
        user(0, "What is a quick vegetarian dinner?"),
        model(0, 0, "claude-2", "Chickpea curry with rice, about twenty minutes.", 93, True),
        model(0, 1, "llama-2-13b", "A salad.", 40),
        model(0, 2, "command-light", "Pasta with tomato, garlic and spinach.", 81),
        model(0, 3, "gpt-4", "An omelette with vegetables.", 55),
    ]),
]
path = Path(tempfile.mkdtemp()) / "conversations.jsonl"
with path.open("w") as f:
    for cid, uid, kind, history in conversations:
        f.write(json.dumps({"conversation_id": cid, "user_id": uid, "conversation_type": kind,
                            "opening_prompt": history[0]["content"],
                            "conversation_history": history}) + "\n")

# %%
# Convert
# -------
# Within a turn, every two responses with different scores make a pair (chosen = higher
# score, margin = the difference); ties are dropped (``ties="keep"`` keeps them with
# margin 0), and so are empty responses. A later turn's prompt is rebuilt along the chosen
# path: the earlier user messages and chosen responses, as chat messages.

pairs = rmlens.data.convert("prism", path)
report = pairs.attrs["convert_report"]
keys = ("records_read", "pairs_written", "pairs_dropped", "dropped", "skipped", "users")
print(json.dumps({k: report[k] for k in keys}, indent=1))
pairs[["id", "user_id", "turn", "chosen_model", "rejected_model", "margin", "same_model"]]

# %%
# The prompt of a turn-1 pair is the conversation so far:

pairs.loc[pairs.turn == 1, "prompt"].iloc[0]

# %%
# Margins per user
# ----------------
# The audit groups PRISM by ``user_id`` (``rmlens memorize --data prism.jsonl
# --group-by user_id``); the margin then lets ``rmlens compare`` report memorization by
# preference strength. Here: every pair's margin, per participant and turn.

users = sorted(pairs.user_id.unique())
fig, ax = plt.subplots(figsize=(7, 4))
rng = np.random.default_rng(0)
for turn, marker in ((0, "o"), (1, "s")):
    part = pairs[pairs.turn == turn]
    x = np.array([users.index(u) for u in part.user_id]) + rng.uniform(-0.15, 0.15, len(part))
    ax.scatter(x, part.margin, marker=marker, alpha=0.7,
               label=f"turn {turn} ({'different models' if turn == 0 else 'same model'})")
ax.set_xticks(range(len(users)), users)
ax.set(ylabel="margin (score difference)", xlabel="participant")
ax.set_title(f"{len(pairs)} pairs from {len(conversations)} PRISM-style conversations")
ax.legend(fontsize=8)
fig.tight_layout()

# %%
# Save the pairs for the command line with :func:`rmlens.data.save_pairs`, or audit them
# from Python at once with ``rmlens.audit(pairs, group_by="user_id")`` (on real PRISM data:
# these five conversations are far too few to audit).
