"""Is the ``vaderSentiment`` package fast enough for ``pair_features``? Package vs vectorized.

Times ``pair_features`` on 10,000 synthetic pairs twice in one process: with rmlens's
vectorized VADER (``rmlens.attribution._vader``) and with the package's
``SentimentIntensityAnalyzer().polarity_scores(text)["compound"]``, computed once per distinct
text. Prints both times (wall and CPU, best of interleaved runs, so that other load on the
machine weighs on both alike), their ratio (package / vectorized) and how far the two
disagree. rmlens keeps the vectorized version only while the CPU ratio is above 2. With the
shared data present, the same for the real HH-RLHF and SQuALITY pairs. Not part of the tests.

    python benchmarks/vader.py [--pairs 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from rmlens.attribution import _text, pair_features

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
REAL = ("hh-rlhf-harmless-base-test.jsonl.gz", "squality-human-eval-pairs.jsonl")


def package_compound(corpus: _text.Corpus) -> np.ndarray:
    """The package's compound score per text, computed once per distinct text."""
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    analyzer = SentimentIntensityAnalyzer()
    codes, unique = pd.factorize(pd.Series(corpus.texts, dtype=object))
    scores = [analyzer.polarity_scores(t)["compound"] for t in unique]
    return np.asarray(scores, dtype=float)[codes]


def timed(fn, *args) -> tuple[object, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn(*args)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def package_features(pairs: pd.DataFrame) -> pd.DataFrame:
    vectorized = _text.Corpus.vader_compound
    _text.Corpus.vader_compound = package_compound
    try:
        return pair_features(pairs)
    finally:
        _text.Corpus.vader_compound = vectorized


def compare(name: str, pairs: pd.DataFrame, repeat: int) -> float:
    """Best of ``repeat`` runs each, interleaved so that both see the same machine load."""
    pair_features(pairs.head(50))  # lexicons load once, outside the timings
    runs = {"vectorized": [], "package": []}
    for _ in range(repeat):
        fast, *t = timed(pair_features, pairs)
        runs["vectorized"].append(t)
        slow, *t = timed(package_features, pairs)
        runs["package"].append(t)
    (fast_wall, fast_cpu), (slow_wall, slow_cpu) = (np.min(runs[k], axis=0) for k in runs)
    texts = pd.concat([pairs.chosen, pairs.rejected])
    a, b = fast.sentiment_chosen.to_numpy(), slow.sentiment_chosen.to_numpy()
    print(f"{name}: {len(pairs)} pairs, {texts.nunique()} distinct texts, "
          f"{texts.str.len().mean():.0f} characters per response, best of {repeat}")
    print(f"  pair_features, vectorized VADER: {fast_wall:6.2f} s wall {fast_cpu:6.2f} s CPU")
    print(f"  pair_features, package VADER   : {slow_wall:6.2f} s wall {slow_cpu:6.2f} s CPU")
    print(f"  ratio package / vectorized     : {slow_wall / fast_wall:6.2f}x wall "
          f"{slow_cpu / fast_cpu:5.2f}x CPU")
    print(f"  sentiment_chosen: max |vectorized - package| = {np.max(np.abs(a - b)):.2g}, "
          f"correlation {np.corrcoef(a, b)[0, 1]:.6f}")
    return slow_cpu / fast_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5, help="best of this many runs")
    args = parser.parse_args()
    from rmlens.data import SynthConfig, load_pairs, synthesize

    ratio = compare("synthetic", synthesize(SynthConfig(n_pairs=args.pairs, seed=0)),
                    args.repeat)  # fmt: skip
    if all((DATA / f).exists() for f in REAL):
        real = pd.concat([load_pairs(DATA / f)[["prompt", "chosen", "rejected"]] for f in REAL],
                         ignore_index=True)  # fmt: skip
        compare("real (HH-RLHF harmless test + SQuALITY)", real, args.repeat)
    verdict = "keep the vectorized VADER" if ratio > 2 else "use the package"
    print(f"decision on {args.pairs} synthetic pairs: CPU ratio {ratio:.2f}x > 2? -> {verdict}")


if __name__ == "__main__":
    main()
