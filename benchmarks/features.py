"""Pair features on 10,000 synthetic pairs: vectorized ``pair_features`` vs a per-row loop.

The loop computes the same response features one text at a time, the way a straightforward
implementation would: regex tokens, phrase lexicons matched word by word, the
``vaderSentiment`` package's ``polarity_scores``, NRC emotion look-ups, pyphen syllables,
formatting regexes. Prints wall and CPU time of each, their ratio, and how far the two
disagree on a few features (lengths and Flesch must agree exactly). Not part of the tests.

    python benchmarks/features.py [--pairs 10000]
"""

from __future__ import annotations

import argparse
import re
import time

import numpy as np
import pandas as pd

from rmlens.attribution import pair_features
from rmlens.data import _lexicons as lex
from rmlens.data._text import _TOKEN, EMOTIONS, nrc_lexicon, syllables

LEXICONS = {
    "refusal": lex.REFUSAL, "please": lex.PLEASE, "thanks": lex.THANKS, "apology": lex.APOLOGY,
    "hedges": lex.HEDGES, "anthropomorphic": lex.ANTHROPOMORPHIC,
    "ai_self_reference": lex.AI_SELF_REFERENCE, "praise": lex.PRAISE, "agreement": lex.AGREEMENT,
}


def naive_response(text: str, vader, nrc) -> dict[str, float]:
    """All response features of one text, computed directly."""
    tokens = _TOKEN.findall(text)
    words = [t.lower().replace("’", "'") for t in tokens if t[-1].isalnum() or t[-1] == "_"]
    sentences, in_sentence = 0, False
    for t in tokens:
        is_word = t[-1].isalnum() or t[-1] == "_"
        sentences += is_word and not in_sentence
        in_sentence = is_word
    n = len(words)
    out = {"len_chars": len(text), "len_words": len(text.split()), "n_sentences": sentences}
    if n:
        syl = sum(syllables(w) for w in words)
        out["flesch"] = 206.835 - 1.015 * n / sentences - 84.6 * syl / n
        out["type_token_ratio"] = len(set(words)) / n
        out["chars_per_word"] = sum(map(len, words)) / n
    for name, phrases in LEXICONS.items():
        count = 0
        for phrase in phrases:
            p = phrase.split()
            count += sum(words[i:i + len(p)] == p for i in range(n - len(p) + 1))
        out[name] = min(count, 1) if name == "refusal" else count
    out["sentiment"] = vader.polarity_scores(text)["compound"]
    for e in EMOTIONS:
        out[f"emotion_{e}"] = sum(e in nrc.get(w, ()) for w in words) / n if n else np.nan
    out["list_items"] = len(re.findall(r"^[ \t]*(?:\d+[.)]|[-*+•])[ \t]", text, re.M))
    out["headers"] = len(re.findall(r"^[ \t]*#{1,6}[ \t]", text, re.M))
    out["code_blocks"] = text.count("```") // 2
    out["newlines"] = text.count("\n")
    out["exclamations"] = text.count("!")
    return out


def naive_features(pairs: pd.DataFrame) -> pd.DataFrame:
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    vader, nrc = SentimentIntensityAnalyzer(), nrc_lexicon()
    rows = []
    for chosen, rejected in zip(pairs.chosen, pairs.rejected):
        c, r = naive_response(chosen, vader, nrc), naive_response(rejected, vader, nrc)
        row = {}
        for k in c:
            row[f"{k}_chosen"], row[f"{k}_rejected"] = c[k], r.get(k, np.nan)
            row[f"{k}_diff"] = c[k] - r.get(k, np.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def timed(fn, *args):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn(*args)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10_000)
    args = parser.parse_args()
    from rmlens.data import SynthConfig, synthesize

    pairs = synthesize(SynthConfig(n_pairs=args.pairs, seed=0))
    pair_features(pairs.head(50))  # load lexicons once, outside both timings
    fast, fast_wall, fast_cpu = timed(pair_features, pairs)
    slow, slow_wall, slow_cpu = timed(naive_features, pairs)
    chars = pairs.chosen.str.len().mean() + pairs.rejected.str.len().mean()
    print(f"{len(pairs)} pairs, {chars / 2:.0f} characters per response on average")
    print(f"pair_features (vectorized): {fast_wall:7.2f} s wall {fast_cpu:7.2f} s CPU, "
          f"{fast.shape[1]} columns")
    print(f"per-row Python loop       : {slow_wall:7.2f} s wall {slow_cpu:7.2f} s CPU, "
          f"{slow.shape[1]} columns")
    print(f"speed-up: {slow_wall / fast_wall:.1f}x wall, {slow_cpu / fast_cpu:.1f}x CPU")
    for col in ("len_chars_diff", "len_words_chosen", "n_sentences_rejected", "flesch_chosen",
                "type_token_ratio_chosen", "refusal_rejected", "hedges_chosen",
                "emotion_joy_chosen", "sentiment_chosen"):
        a, b = fast[col].to_numpy(float), slow[col].to_numpy(float)
        ok = ~(np.isnan(a) | np.isnan(b))
        print(f"  {col:26s} max |vectorized - loop| = {np.max(np.abs(a[ok] - b[ok])):.3g}"
              + (f", correlation {np.corrcoef(a[ok], b[ok])[0, 1]:.3f}" if col.startswith(
                  "sentiment") else ""))


if __name__ == "__main__":
    main()
