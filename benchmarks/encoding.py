"""A large synthetic audit's encoding: time and peak memory per step, and a resumed crash.

``rmlens.synthesize`` makes ``--pairs`` pairs (default 20,000; ``--large``: 60,000) and
``minilm`` (the audit's default backbone) featurizes them as an audit does (``featurize``:
every unique text once, longest first, through the embedding cache), step by step:

- tokenize: every chosen and rejected (prompt, response) text to token ids;
- cold: encode everything into an empty cache (a shard written every ``SHARD_TEXTS`` texts);
- killed: the same cold encoding in another empty cache, killed (SIGKILL) once about half
  of its shards are on disk;
- resumed: featurize again on what the killed run left: only the texts not cached yet are
  encoded;
- warm: featurize once more, every vector read from the cache.

Each step runs in a forked child (``scale.measure``): seconds and peak resident memory above
the child's own at the step's start (the backbone is loaded before it). ``encoded`` counts
the cache's vectors written by the step. Not part of the tests.

    python benchmarks/encoding.py [--pairs 20000 | --large]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from scale import measure  # benchmarks/scale.py: a step in a forked child, peak memory

MODEL = "minilm"


def cached(folder: Path) -> int:
    """Vectors in a cache folder's finished shards (those with a keys file)."""
    return sum(len(np.load(k)) for k in folder.rglob("*.keys.npy"))


def _pairs(n: int):
    from rmlens.data import SynthConfig, synthesize

    return synthesize(SynthConfig(n_pairs=n, seed=0))


def _backbone():
    from rmlens.backbones import load_backbone

    return load_backbone(MODEL)


class Tokenize:
    @staticmethod
    def setup(n, cache):
        return _pairs(n), _backbone()

    @staticmethod
    def run(pairs, bb):
        from rmlens.backbones._tokenize import encode_pair

        for side in ("chosen", "rejected"):
            [encode_pair(bb.tokenizer, p, r, bb.max_length, format=bb.format)
             for p, r in zip(pairs.prompt, pairs[side])]  # fmt: skip


class Featurize:
    @staticmethod
    def setup(n, cache):
        return _pairs(n), _backbone(), cache

    @staticmethod
    def run(pairs, bb, cache):
        from rmlens.backbones import featurize

        featurize(bb, pairs, cache_dir=cache, quiet=True)


def killed_midway(n: int, cache: Path, shards: int) -> float:
    """Seconds until a cold featurize in a child has ``shards`` shards on disk; then SIGKILL."""
    ctx = mp.get_context("fork")
    proc = ctx.Process(target=lambda: Featurize.run(*Featurize.setup(n, cache)))
    start = time.perf_counter()
    proc.start()
    while proc.is_alive() and len(list(cache.rglob("*.keys.npy"))) < shards:
        time.sleep(0.5)
    proc.kill()
    proc.join()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--large", action="store_true", help="60,000 pairs (--pairs 60000).")
    args = parser.parse_args()
    from rmlens.backbones._featurize import SHARD_TEXTS

    n = 60_000 if args.large else args.pairs
    print(
        f"{n:,} synthetic pairs, {MODEL}, a shard every {SHARD_TEXTS:,} texts, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{'step':<9} {'seconds':>9} {'peak MiB':>9} {'encoded':>9} {'texts/s':>9}")

    def line(step, seconds, peak, encoded):
        rate = f"{encoded / seconds:9.1f}" if encoded else f"{'-':>9}"
        print(f"{step:<9} {seconds:>9.1f} {peak:>9} {encoded:>9,} {rate}", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        cold, cut = Path(tmp) / "cold", Path(tmp) / "cut"
        line("tokenize", *measure(Tokenize, n, cold), 0)
        line("cold", *measure(Featurize, n, cold), cached(cold))
        total = cached(cold)
        seconds = killed_midway(n, cut, shards=max(1, total // SHARD_TEXTS // 2))
        kept = cached(cut)
        line("killed", seconds, "-", kept)
        line("resumed", *measure(Featurize, n, cut), cached(cut) - kept)
        line("warm", *measure(Featurize, n, cut), cached(cut) - total)
        print(
            f"the killed run kept {kept:,} of {total:,} texts; the resumed run encoded the "
            f"other {total - kept:,}"
        )


if __name__ == "__main__":
    main()
