"""What VADER sentiment costs ``pair_features``, with the ``vaderSentiment`` package.

Times ``pair_features`` on 10,000 synthetic pairs and, apart, the VADER compound scores of
the same texts (``Corpus.vader_compound``: the package once per distinct text), as best of
interleaved runs (wall and CPU), and prints VADER's share. With the shared data present,
the same for the real HH-RLHF and SQuALITY pairs. Not part of the tests.

    python benchmarks/vader.py [--pairs 10000] [--repeat 3]

Why the package (issue 20): rmlens had a vectorized rewrite of VADER (206 lines, copying
the package's tokens, rules and quirks). Measured here before it was removed, on 10,000
synthetic pairs, it made ``pair_features`` 2.4x faster: 0.72 s against 1.72 s CPU (real
HH-RLHF + SQuALITY, 3,195 pairs: 0.90 s against 2.14 s), with identical scores. VADER is
most of ``pair_features``, but ``pair_features`` is a small part of an attribution: the
rewrite saved about 1 s per 10,000 synthetic pairs (4 s per 10,000 real ones), 0.15 s or
0.25% of ``rmlens attribute`` on the demo's 1,500 pairs (about 60 s CPU). Too little to
keep a second implementation of another package's lexicon rules and quirks.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from rmlens.attribution import pair_features
from rmlens.data import _text

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
REAL = ("hh-rlhf-harmless-base-test.jsonl.gz", "squality-human-eval-pairs.jsonl")


def timed(fn, *args) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn(*args)
    return time.perf_counter() - wall, time.process_time() - cpu


def vader_only(pairs: pd.DataFrame) -> np.ndarray:
    """The sentiment that ``pair_features`` scores: every chosen and rejected response."""
    return _text.Corpus([*pairs.chosen.astype(str), *pairs.rejected.astype(str)]).vader_compound()


def measure(name: str, pairs: pd.DataFrame, repeat: int) -> float:
    """Best of ``repeat`` runs each, interleaved so that both see the same machine load;
    returns VADER's share of ``pair_features`` CPU time."""
    pair_features(pairs.head(50))  # lexicons load once, outside the timings
    runs = {"features": [], "vader": []}
    for _ in range(repeat):
        runs["features"].append(timed(pair_features, pairs))
        runs["vader"].append(timed(vader_only, pairs))
    (all_wall, all_cpu), (vader_wall, vader_cpu) = (np.min(runs[k], axis=0) for k in runs)
    texts = pd.concat([pairs.chosen, pairs.rejected])
    print(f"{name}: {len(pairs)} pairs, {texts.nunique()} distinct texts, "
          f"{texts.str.len().mean():.0f} characters per response, best of {repeat}")
    print(f"  pair_features        : {all_wall:6.2f} s wall {all_cpu:6.2f} s CPU")
    print(f"  VADER (the package)  : {vader_wall:6.2f} s wall {vader_cpu:6.2f} s CPU "
          f"({vader_cpu / all_cpu:.0%} of pair_features)")
    print(f"  VADER per 10,000 pairs: {vader_cpu / len(pairs) * 10_000:.2f} s CPU")
    return vader_cpu / all_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = parser.parse_args()
    from rmlens.data import SynthConfig, load_pairs, synthesize

    measure("synthetic", synthesize(SynthConfig(n_pairs=args.pairs, seed=0)), args.repeat)
    if all((DATA / f).exists() for f in REAL):
        real = pd.concat([load_pairs(DATA / f)[["prompt", "chosen", "rejected"]] for f in REAL],
                         ignore_index=True)  # fmt: skip
        measure("real (HH-RLHF harmless test + SQuALITY)", real, args.repeat)


if __name__ == "__main__":
    main()
