"""VADER compound sentiment (Hutto & Gilbert 2014) for many texts at once, on numpy arrays.

Same tokens, lexicon and rules as ``vaderSentiment``'s ``polarity_scores(text)["compound"]``,
with each token's properties computed once per distinct token instead of once per text per
word. The package, even once per distinct text, made ``pair_features`` more than 2x slower on
10,000 pairs (``benchmarks/vader.py``); ``tests/test_attribution_features.py`` checks that
both give the same scores, on real texts too.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from functools import lru_cache
from itertools import chain

import numpy as np
import pandas as pd

# VADER constants, as in vaderSentiment.vaderSentiment
_N_SCALAR = -0.74  # negation multiplies a valence by this
_C_INCR = 0.733  # an ALL-CAPS word among mixed case adds this
_NONE = np.iinfo(np.int64).max


@lru_cache(maxsize=1)
def _vader():
    from vaderSentiment.vaderSentiment import (
        BOOSTER_DICT,
        NEGATE,
        SPECIAL_CASES,
        SentimentIntensityAnalyzer,
    )

    analyzer = SentimentIntensityAnalyzer()
    emoji = frozenset(e for e in analyzer.emojis if len(e) == 1)  # it replaces single chars
    return analyzer, dict(BOOSTER_DICT), frozenset(NEGATE), dict(SPECIAL_CASES), emoji


def _strip(token: str) -> str:
    """The package's token: punctuation stripped at both ends unless 2 chars or fewer remain
    (which keeps emoticons such as ":)")."""
    stripped = token.strip(string.punctuation)
    return token if len(stripped) <= 2 else stripped


def vader_compound(texts: Sequence[str]) -> np.ndarray:
    """VADER compound sentiment per text, shape (n_texts,), in [-1, 1].

    Tokens are whitespace-separated, as in the package. Per lexicon word: its valence; "no"
    before a lexicon word is neutral and "no" one or two words before negates; ALL-CAPS
    adds 0.733 when the text mixes cases; each of the three preceding non-lexicon words adds
    its booster increment (damped 1, 0.95, 0.9) and negates (x -0.74) if it is a negation,
    with the package's "never so"/"without doubt" cases, special idioms ("the bomb") and
    booster bigrams ("kind of"); "least" negates; words before the first "but" count x0.5,
    after it x1.5. Then "!" (up to 4) and "?" (2 or more) amplify the sum s, and
    compound = s / sqrt(s^2 + 15).

    As in the package, the "but" rule finds entries by value, so in a few texts an entry
    is rescaled twice and another not at all. Texts with an emoji are scored by the package.
    """
    analyzer, boosters, negate, special, emoji = _vader()
    lexicon = analyzer.lexicon
    special = [(phrase.split(), value) for phrase, value in special.items() if " " in phrase]
    booster_ngrams = [(p.split(), value) for p, value in boosters.items() if " " in p]
    n = len(texts)
    split = [t.split() for t in texts]
    n_tok = np.fromiter(map(len, split), dtype=np.int64, count=n)
    doc = np.repeat(np.arange(n), n_tok)  # (n_tokens,) text of each token
    raw_codes, raw = pd.factorize(np.array(list(chain.from_iterable(split)) or [""], dtype=object))
    raw_codes = raw_codes[: len(doc)]
    words = [_strip(t) for t in raw]
    upper = np.fromiter((w.isupper() for w in words), dtype=bool, count=len(words))[raw_codes]
    lc_of_raw, vocab = pd.factorize(np.array([w.lower() for w in words], dtype=object))
    lc = lc_of_raw[raw_codes]  # (n_tokens,) lowercase word id
    word_id = {w: i for i, w in enumerate(vocab)}

    def per_vocab(func, dtype=np.float64) -> np.ndarray:
        return np.fromiter((func(w) for w in vocab), dtype=dtype, count=len(vocab))

    in_lex_v = per_vocab(lambda w: w in lexicon, dtype=bool)
    valence_v = per_vocab(lambda w: lexicon.get(w, 0.0))
    booster_v = per_vocab(lambda w: boosters.get(w, 0.0))
    is_booster_v = per_vocab(lambda w: w in boosters, dtype=bool)
    negation_v = per_vocab(lambda w: w in negate or "n't" in w, dtype=bool)

    n_upper = np.bincount(doc, weights=upper, minlength=n)
    cap_diff_doc = (n_upper > 0) & (n_upper < n_tok)

    scored = in_lex_v[lc] & ~is_booster_v[lc]
    s_idx = np.flatnonzero(scored)  # (n_scored,) token index of each lexicon word
    s_doc = doc[s_idx]
    s_lc = lc[s_idx]
    cap_diff = cap_diff_doc[s_doc]

    cache: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def near(offset: int) -> tuple[np.ndarray, np.ndarray]:
        """Token index ``offset`` away from each scored word, and whether it is in the text."""
        if offset not in cache:
            j = s_idx + offset
            ok = (j >= 0) & (j < len(lc))
            j = np.where(ok, j, 0)
            ok &= doc[j] == s_doc
            cache[offset] = j, ok, np.where(ok, lc[j], -1)
        return cache[offset][:2]

    def near_is(offset: int, word: str) -> np.ndarray:
        near(offset)
        return cache[offset][2] == word_id.get(word, -2)

    def seq_is(offsets: Sequence[int], words: Sequence[str]) -> np.ndarray:
        return np.logical_and.reduce([near_is(o, w) for o, w in zip(offsets, words)])

    valence = valence_v[s_lc]
    v = valence.copy()
    j1, ok1 = near(1)
    v[(s_lc == word_id.get("no", -2)) & ok1 & in_lex_v[lc[j1]]] = 0.0
    drop = (s_lc == word_id.get("kind", -2)) & near_is(1, "of")
    after_no = near_is(-1, "no") | near_is(-2, "no") | (
        near_is(-3, "no") & (near_is(-1, "or") | near_is(-1, "nor"))
    )
    v = np.where(after_no, valence * _N_SCALAR, v)
    v = np.where(upper[s_idx] & cap_diff, np.where(v > 0, v + _C_INCR, v - _C_INCR), v)
    for k, damp in ((1, 1.0), (2, 0.95), (3, 0.9)):
        j, ok = near(-k)
        ok &= ~in_lex_v[lc[j]]
        s = booster_v[lc[j]] * np.where(v < 0, -1.0, 1.0)
        caps = upper[j] & is_booster_v[lc[j]] & cap_diff
        s = np.where(caps, np.where(v > 0, s + _C_INCR, s - _C_INCR), s) * damp
        v = np.where(ok, v + s, v)
        negated = negation_v[lc[j]]
        if k == 1:
            factor = np.where(negated, _N_SCALAR, 1.0)
        elif k == 2:
            emphasis = near_is(-2, "never") & (near_is(-1, "so") | near_is(-1, "this"))
            keep = near_is(-2, "without") & near_is(-1, "doubt")
            factor = np.where(emphasis, 1.25, np.where(keep | ~negated, 1.0, _N_SCALAR))
        else:  # as in the package, "so"/"this" just before also emphasizes here
            emphasis = (near_is(-3, "never") & (near_is(-2, "so") | near_is(-2, "this"))) | (
                near_is(-1, "so") | near_is(-1, "this"))
            keep = near_is(-3, "without") & (near_is(-2, "doubt") | near_is(-1, "doubt"))
            factor = np.where(emphasis, 1.25, np.where(keep | ~negated, 1.0, _N_SCALAR))
        v = np.where(ok, v * factor, v)
    # special idioms, then booster n-grams, for words with a non-lexicon word 3 back: the
    # first of (-1 0), (-2 -1 0), (-2 -1), (-3 -2 -1), (-3 -2) to match sets the valence,
    # then (0 1) and (0 1 2) override it
    ok3 = near(-3)[1] & ~in_lex_v[lc[near(-3)[0]]]
    idiom = np.full(len(s_idx), np.nan)
    for offsets in ((-3, -2), (-3, -2, -1), (-2, -1), (-2, -1, 0), (-1, 0), (0, 1), (0, 1, 2)):
        for words, value in special:
            if len(words) == len(offsets):
                idiom = np.where(seq_is(offsets, words), value, idiom)
    v = np.where(ok3 & ~np.isnan(idiom), idiom, v)
    for offsets in ((-3, -2, -1), (-3, -2), (-2, -1)):
        for words, value in booster_ngrams:
            if len(words) == len(offsets):
                v = np.where(ok3 & seq_is(offsets, words), v + value, v)
    least = near_is(-1, "least") & ~in_lex_v[lc[near(-1)[0]]]
    v = np.where(least & ~(near_is(-2, "at") | near_is(-2, "very")), v * _N_SCALAR, v)
    v = np.where(drop, 0.0, v)

    # contrastive "but": words before the first "but" count half, words after it 1.5 times
    index_in_doc = np.arange(len(doc)) - np.repeat(np.cumsum(n_tok) - n_tok, n_tok)
    first_but = np.full(n, _NONE)
    is_but = lc == word_id.get("but", -2)
    np.minimum.at(first_but, doc[is_but], index_in_doc[is_but])
    fb, pos = first_but[s_doc], index_in_doc[s_idx]
    scaled = v * np.where(fb == _NONE, 1.0, np.where(pos < fb, 0.5, np.where(pos > fb, 1.5, 1.0)))

    # the package finds each entry by value (list.index): one equal to an earlier, already
    # rescaled entry rescales that one again instead; replay its loop in those texts
    but = np.flatnonzero((fb != _NONE) & (v != 0))
    but_doc = s_doc[but]
    entries = pd.DataFrame({"doc": but_doc, "pos": pos[but], "value": np.round(v[but], 9)})
    earlier = entries.assign(value=np.round(scaled[but], 9))
    pairs = entries.merge(earlier, on=["doc", "value"], suffixes=("", "_earlier"))
    for d in pairs.doc[pairs.pos_earlier < pairs.pos].unique():
        lo, hi = np.searchsorted(but_doc, [d, d + 1])
        rows = but[lo:hi]
        scaled[rows] = _but_by_value(v[rows].tolist(), pos[rows].tolist(), int(fb[rows[0]]))

    total = np.bincount(s_doc, weights=scaled, minlength=n)
    ep = np.fromiter((t.count("!") for t in texts), dtype=float, count=n)
    qm = np.fromiter((t.count("?") for t in texts), dtype=float, count=n)
    amp = np.minimum(ep, 4) * 0.292 + np.where(qm > 3, 0.96, np.where(qm > 1, qm * 0.18, 0.0))
    total = total + np.sign(total) * amp
    compound = np.clip(total / np.sqrt(total * total + 15.0), -1.0, 1.0)
    compound = np.round(compound, 4)  # as the package rounds it
    # the package turns emoji into words first; texts with one (rare) are scored by it
    has_emoji = np.fromiter((not t.isascii() and not emoji.isdisjoint(t) for t in raw),
                            dtype=bool, count=len(raw))  # fmt: skip
    for i in np.unique(doc[has_emoji[raw_codes]]):
        compound[i] = analyzer.polarity_scores(texts[i])["compound"]
    return compound


def _but_by_value(values: list[float], pos: list[int], first_but: int) -> list[float]:
    """The package's "but" loop over one text's non-zero entries (token positions ``pos``):
    each entry is looked up by value and the first equal entry is rescaled."""
    out = list(values)
    for k in range(len(out)):
        si = out.index(out[k])
        if pos[si] != first_but:
            out[si] = out[k] * (0.5 if pos[si] < first_but else 1.5)
    return out
