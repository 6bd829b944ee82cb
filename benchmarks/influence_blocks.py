"""Gauss-Newton through the last blocks' adapters: what a paired run saves, and what its CM
keeps of the reading through every adapter (issue 48's 1.2x).

A paired run's influence pass sends every pair backward through all blocks; with
``influence_blocks`` K it reads the adapters of the last K blocks and the head only, and its
backward pass stops at block L - K: a cheaper, different estimator. Here the 5-run paired
audit of one of ``finetune_paired.py``'s settings (``--setting``: ``smollm2-hh``,
SmolLM2-135M-Instruct with LoRA on the 120 shortest HH pairs at 128 tokens, by default;
``minilm-hh-1000``, MiniLM's 6 blocks on 1,000; shared with that benchmark's work
directory) is read again from its runs' saved RMs at each K (``finetune_paired.reread``: the
same trainings, each reading calibrating its own damping), and at K = 0 as a check of the
rereading. Printed
per reading: CM's Spearman with the reading through every adapter (95% bootstrap over
pairs), TM's and TG's, the mean CM, and the influence pass's median seconds; then one run
timed as brute force and as a paired run at each K, interleaved in this process (best of
``--repeats``).

    python benchmarks/influence_blocks.py [--setting smollm2-hh] [--blocks 4 8 16]
        [--repeats 2] [--phase all|readings|cost] [--work DIR]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from finetune_paired import (
    SETTINGS,
    config_of,
    first_run,
    influence_seconds,
    pairs_of,
    reread,
)

from rmlens.memorization import audit
from rmlens.stats import spearman

PAIRED_RUNS = 5


def agreement(a: pd.Series, b: pd.Series, draws: int = 1000) -> str:
    """Spearman(a, b) with its 95% bootstrap interval over pairs."""
    ok = np.isfinite(a.to_numpy()) & np.isfinite(b.to_numpy())
    x, y = a.to_numpy()[ok], b.to_numpy()[ok]
    rng = np.random.default_rng(0)
    draws_ = [spearman(x[i], y[i]) for i in (rng.integers(0, len(x), len(x))
                                             for _ in range(draws))]  # fmt: skip
    lo, hi = np.quantile(draws_, [0.025, 0.975])
    return f"{spearman(x, y):.3f} [{lo:.2f}, {hi:.2f}]"


def readings(setting: str, pairs, blocks: list[int], work: Path) -> None:
    config = config_of(SETTINGS[setting])
    gn = work / f"{setting}-paired-gauss-newton"
    audit(pairs, config.replace(runs=PAIRED_RUNS, seed=0, estimator="paired"), out=gn,
          quiet=True)  # fmt: skip
    every = pd.read_parquet(gn / "memorization.parquet").set_index("id")
    print(f"{setting}: {len(pairs)} pairs, {PAIRED_RUNS} paired runs; every adapter: mean CM "
          f"{every.cm.mean():.4f}, influence pass {influence_seconds(gn):.1f} s (median)")
    for k in [0, *blocks]:
        out = reread(gn, work / f"{setting}-paired-gn-last-{k}", pairs, influence_blocks=k)
        table = pd.read_parquet(out / "memorization.parquet").set_index("id").loc[every.index]
        name = "every adapter, read again" if k == 0 else f"last {k} blocks"
        print(f"{name}: CM Spearman with every adapter {agreement(table.cm, every.cm)}, TM "
              f"{spearman(table.tm, every.tm):.3f}, TG {spearman(table.tg, every.tg):.3f}; "
              f"mean CM {table.cm.mean():.4f}; max |CM - every adapter's| "
              f"{np.nanmax(np.abs(table.cm - every.cm)):.2g}; influence pass "
              f"{influence_seconds(out):.1f} s")  # fmt: skip


def cost(setting: str, pairs, blocks: list[int], repeats: int) -> None:
    """One run (the plan's run 0 of seed 0) trained and scored as brute force does, and as a
    paired run does at each K, interleaved in this process."""
    from rmlens.rewards import make_trainer

    config = config_of(SETTINGS[setting])
    groups, train, val = first_run(pairs, config)
    kinds = {"brute": None, **{f"paired, last {k} blocks" if k else "paired, every adapter": k
                               for k in [0, *blocks]}}  # fmt: skip
    timed = {}
    for name, k in kinds.items():
        trainer = make_trainer(config.resolved().train.replace(influence_blocks=k or 0))
        trainer.prepare(pairs, quiet=True, groups=None if k is None else groups)
        timed[name] = (trainer, [])
    for _ in range(repeats):
        for trainer, times in timed.values():
            start = time.perf_counter()
            out = trainer.fit_score(train, seed=7, val_index=val)
            times.append((time.perf_counter() - start, out.metrics.get("influence_seconds", 0)))
    brute = min(t for t, _ in timed["brute"][1])
    print(f"cost, best of {repeats}, interleaved: a brute-force run {brute:.1f} s")
    for name, (_, times) in list(timed.items())[1:]:
        total, influence = min(times)
        print(f"  {name}: {total:.1f} s ({total / brute:.2f}x; influence pass {influence:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", choices=list(SETTINGS), default="smollm2-hh")
    parser.add_argument("--blocks", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--phase", choices=("all", "readings", "cost"), default="all")
    parser.add_argument("--work", type=Path, default=Path("finetune-paired-work"))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    pairs = pairs_of(SETTINGS[args.setting])
    if pairs is None:
        print(f"skipped: the shared HH pairs are absent ({args.setting})")
        return
    if args.phase != "cost":
        readings(args.setting, pairs, args.blocks, args.work)
    if args.phase != "readings":
        cost(args.setting, pairs, args.blocks, args.repeats)


if __name__ == "__main__":
    main()
