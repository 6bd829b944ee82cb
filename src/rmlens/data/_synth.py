"""Synthetic preference pairs with planted, known mechanisms (DESIGN.md section 1).

Every pair answers a how-to question on one of 46 topics; responses are built from
templates at four quality levels:

    3 good       on-topic, three sound tips, complete sentences
    2 mediocre   one sound tip, hedged
    1 poor       wrong advice, or an evasive non-answer
    0 bad        rude, off-topic (a good answer to another question), or cut off mid-sentence

and the `mechanism` column says what decided the label:

    quality         the better response wins; margin grows with the quality gap
    user_taste      both responses end with one of the user's two taste sentences (same
                    shape, one theme apart, e.g. green tea vs soda); the one the user likes
                    wins: the better response in half of the pairs, the worse in the other.
                    Only that user's pairs contain the two sentences.
    noise           the worse response wins (a flipped label), low margin
    length          two responses of equal quality; the longer one (padded) wins
    model_identity  the signature model's response, opening with its signature phrase,
                    wins against an equal or better response
"""

from __future__ import annotations

import random

import pandas as pd

from rmlens.data._synth_bank import (
    EVASIVE,
    FILLER,
    GOOD,
    INCOMPLETE,
    MEDIOCRE,
    MODELS,
    PREFIXES,
    QUESTIONS,
    RUDE,
    TASTES,
    TOPICS,
    WRONG,
)
from rmlens.data._synth_config import MECHANISMS, SynthConfig

# (better level, worse level, weight): gaps of 2-3 are easy pairs, gaps of 1 hard ones
QUALITY_PAIRS = ((3, 0, 2), (3, 1, 2), (2, 0, 1), (3, 2, 3), (2, 1, 2))


def mechanism_counts(config: SynthConfig) -> dict[str, int]:
    """Pairs per mechanism: shares times ``n_pairs``, rounded by largest remainder."""
    raw = {m: s * config.n_pairs for m, s in config.shares.items()}
    counts = {m: int(v) for m, v in raw.items()}
    rest = config.n_pairs - sum(counts.values())
    for m in sorted(MECHANISMS, key=lambda m: (counts[m] - raw[m], MECHANISMS.index(m)))[:rest]:
        counts[m] += 1
    return counts


class _Writer:
    """Builds prompts and responses of a given quality level from the template bank."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def prompt(self, topic: int) -> str:
        task = TOPICS[topic][0]
        return self.rng.choice(PREFIXES) + self.rng.choice(QUESTIONS).format(task=task)

    def good(self, topic: int, n_tips: int = 3) -> str:
        task, tips, _ = TOPICS[topic]
        a, b, c = self.rng.sample(tips, n_tips)
        return self.rng.choice(GOOD).format(task=task, a=a, b=b, c=c)

    def response(self, topic: int, level: int) -> str:
        rng = self.rng
        task, tips, wrong = TOPICS[topic]
        if level == 3:
            text = self.good(topic)
        elif level == 2:
            text = rng.choice(MEDIOCRE).format(a=rng.choice(tips))
        elif level == 1 and rng.random() < 0.5:
            a, b = rng.sample(wrong, 2)
            text = rng.choice(WRONG).format(task=task, a=a, b=b)
        elif level == 1:
            text = rng.choice(EVASIVE)
        else:
            kind = rng.randrange(3)
            if kind == 0:
                text = rng.choice(RUDE).format(task=task)
            elif kind == 1:
                other = (topic + 1 + rng.randrange(len(TOPICS) - 1)) % len(TOPICS)
                text = self.good(other)
            else:
                text = rng.choice(INCOMPLETE).format(task=task)
        return text[0].upper() + text[1:]

    def padded(self, text: str) -> str:
        return text + " " + " ".join(self.rng.sample(FILLER, self.rng.randint(2, 4)))


def synthesize(config: SynthConfig | None = None) -> pd.DataFrame:
    """Generate preference pairs with planted mechanisms.

    Parameters
    ----------
    config : SynthConfig, optional
        Size, seed and mechanism shares; defaults to ``SynthConfig()``.

    Returns
    -------
    pandas.DataFrame
        ``(n_pairs, 12)``: ``id``, ``prompt``, ``chosen``, ``rejected``, ``user_id``,
        ``chosen_model``, ``rejected_model``, ``margin``, ``mechanism``, ``topic``,
        ``quality_chosen``, ``quality_rejected`` (levels 0-3). Deterministic for a seed.

    Raises
    ------
    InputError
        When a size is below 1 or the shares are outside [0, 1] or do not sum to 1.

    Examples
    --------
    >>> pairs = synthesize(SynthConfig(n_pairs=100, seed=1))
    >>> int((pairs["mechanism"] == "quality").sum()), pairs["id"].is_unique
    (50, True)
    """
    config = (config or SynthConfig()).check()
    rng = random.Random(config.seed)
    writer = _Writer(rng)
    mechanisms = [m for m, k in mechanism_counts(config).items() for _ in range(k)]
    rng.shuffle(mechanisms)
    width = max(2, len(str(config.n_users - 1)))
    users = [f"u{u:0{width}d}" for u in range(config.n_users)]
    id_width = max(5, len(str(config.n_pairs - 1)))
    levels = [(hi, lo) for hi, lo, w in QUALITY_PAIRS for _ in range(w)]
    tastes = []
    for u in range(config.n_users):
        pair = TASTES[u % len(TASTES)]
        tastes.append(pair if rng.random() < 0.5 else pair[::-1])

    rows = []
    for i, mechanism in enumerate(mechanisms):
        topic = rng.randrange(len(TOPICS))
        user = rng.randrange(config.n_users)
        chosen_model, rejected_model = rng.sample(MODELS, 2)
        prompt = writer.prompt(topic)
        if mechanism in ("quality", "noise", "user_taste"):
            hi, lo = rng.choice(levels)
            if mechanism == "noise":
                hi, lo = rng.choice(((3, 0), (3, 1), (2, 0)))
            better, worse = writer.response(topic, hi), writer.response(topic, lo)
            if mechanism == "quality":
                q_c, q_r, chosen, rejected = hi, lo, better, worse
                margin = (hi - lo) * rng.uniform(0.8, 1.1)
            elif mechanism == "noise":
                q_c, q_r, chosen, rejected = lo, hi, worse, better
                margin = rng.uniform(0.1, 0.6)
            else:
                liked, other = tastes[user]
                if rng.random() < 0.5:
                    q_c, q_r = hi, lo
                    chosen, rejected = f"{better} {liked}", f"{worse} {other}"
                else:
                    q_c, q_r = lo, hi
                    chosen, rejected = f"{worse} {liked}", f"{better} {other}"
                margin = rng.uniform(0.5, 1.5)
        elif mechanism == "length":
            q_c = q_r = rng.choice((3, 3, 2))
            chosen = writer.padded(writer.response(topic, q_c))
            rejected = writer.response(topic, q_r)
            margin = rng.uniform(0.3, 1.0)
        else:
            q_c = rng.choice((1, 2))
            q_r = rng.choice([q for q in (2, 3) if q >= q_c])
            chosen = f"{config.signature_phrase} {writer.response(topic, q_c)}"
            rejected = writer.response(topic, q_r)
            chosen_model = config.signature_model
            margin = rng.uniform(0.5, 1.5)
        rows.append(
            (
                f"s{config.seed}-{i:0{id_width}d}",
                prompt,
                chosen,
                rejected,
                users[user],
                chosen_model,
                rejected_model,
                round(margin, 3),
                mechanism,
                TOPICS[topic][0],
                q_c,
                q_r,
            )
        )
    columns = [
        "id", "prompt", "chosen", "rejected", "user_id", "chosen_model", "rejected_model",
        "margin", "mechanism", "topic", "quality_chosen", "quality_rejected",
    ]
    frame = pd.DataFrame.from_records(rows, columns=columns)
    frame["margin"] = frame["margin"].astype("float64")
    return frame


