"""The 25-run counterfactual memorization audit of the 2,312 HH pairs with `minilm`.

rmlens encodes every unique text once (length-sorted, cached on disk) and trains one head per
run on the cached features. The naive baseline re-encodes every text for every run (input
order, fixed batches), as a loop around a sentence encoder would: it is timed on 2 runs and
scaled to 25. Prints wall times and ratios measured in this process. Not part of the tests.

    python benchmarks/memorize.py [--data ../shared/data/hh-rlhf-harmless-base-test.jsonl.gz]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from rmlens.backbones import load_backbone
from rmlens.backbones._featurize import encode_ids
from rmlens.backbones._tokenize import encode_pair_text
from rmlens.data import load_pairs
from rmlens.memorization import AuditConfig, audit
from rmlens.rewards import FrozenHeadTrainer

DEFAULT = Path(__file__).resolve().parents[2] / "shared/data/hh-rlhf-harmless-base-test.jsonl.gz"


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def rmlens_audit(pairs, cache: Path, out: Path, runs: int = 25) -> float:
    trainer = FrozenHeadTrainer(AuditConfig().head, model="minilm", cache_dir=cache)
    seconds, _ = timed(
        lambda: audit(pairs, AuditConfig(runs=runs), out=out, trainer=trainer, quiet=True)
    )
    return seconds


def naive_runs(pairs, n_runs: int) -> float:
    """Per run: load nothing new, but re-encode every chosen and rejected text, then train."""
    bb = load_backbone("minilm")
    tok, limit = bb.tokenizer, bb.max_length
    rng = np.random.default_rng(0)

    def one_run():
        texts_c = [encode_pair_text(tok, p, c, limit) for p, c in zip(pairs.prompt, pairs.chosen)]
        texts_r = [encode_pair_text(tok, p, r, limit) for p, r in zip(pairs.prompt, pairs.rejected)]
        xc = _encode_in_order(bb, texts_c)
        xr = _encode_in_order(bb, texts_r)
        train = rng.uniform(size=len(pairs)) < 0.8
        FrozenHeadTrainer().fit_features(xc[train], xr[train]).head_.score_features(xc)

    seconds, _ = timed(lambda: [one_run() for _ in range(n_runs)])
    return seconds


def _encode_in_order(bb, seqs, batch_size: int = 32):
    out = []
    for start in range(0, len(seqs), batch_size):
        block = seqs[start : start + batch_size]
        # batches in input order: padding to the longest of each batch, as a plain loop does
        out.append(encode_ids(bb, block, batch_size=batch_size, quiet=True))
    return np.concatenate(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT)
    parser.add_argument("--naive-runs", type=int, default=2)
    args = parser.parse_args()
    if not args.data.exists():
        raise SystemExit(f"{args.data} not found (the shared HH pairs)")
    pairs = load_pairs(args.data)
    print(f"HH pairs: {len(pairs)}, torch threads: {torch.get_num_threads()}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cold = rmlens_audit(pairs, tmp / "cache", tmp / "cold")
        print(f"rmlens cold audit (25 runs, empty cache): {cold:8.1f} s")
        warm = rmlens_audit(pairs, tmp / "cache", tmp / "warm")
        print(f"rmlens warm audit (25 runs, cached):      {warm:8.1f} s")
        naive = naive_runs(pairs, args.naive_runs)
        scaled = naive / args.naive_runs * 25
        print(f"naive, {args.naive_runs} runs measured:                 {naive:8.1f} s")
        print(
            f"naive, scaled to 25 runs (x{25 / args.naive_runs:.1f}):       {scaled:8.1f} s"
            "  (SCALED from the measured runs)"
        )
        print(
            f"ratio naive/rmlens cold: {scaled / cold:6.1f}x   naive/rmlens warm: "
            f"{scaled / warm:6.1f}x"
        )
        print("\ngrowth with pairs (25 runs, warm cache: head training, estimators, outputs):")
        for n in (500, 1000, len(pairs)):
            sub = pairs.iloc[:n]
            s = rmlens_audit(sub, tmp / "cache", tmp / f"pairs{n}")
            print(f"  {n:5d} pairs: {s:7.1f} s")
        print("growth with runs (all pairs, warm cache):")
        for r in (5, 10, 25):
            s = rmlens_audit(pairs, tmp / "cache", tmp / f"runs{r}", runs=r)
            print(f"  {r:5d} runs:  {s:7.1f} s")


if __name__ == "__main__":
    main()
