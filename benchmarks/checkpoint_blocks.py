"""The one-checkpoint audit of a fully fine-tuned RM: every weight, or the last blocks.

Trains ``--model`` once with every weight trained (``finetune="full"``, lr 2e-5, head lr
2e-3, 2 epochs, a 0.2 evaluation split) on the ``--pairs`` shortest shared HH pairs
(``--max-length`` tokens), as a merged RM from elsewhere would have been, and audits it
with ``rmlens memorize --rm`` several ways:

- through every weight (embeddings and norms too: one backward pass per pair, each gradient
  sketched; what the audit does by default);
- through the linear layers of the last K blocks and the head (``--checkpoint-blocks K``,
  ``rmlens.influence.through_last``: one batched backward pass that stops at block L - K),
  for each K of ``--blocks``.

Prints per reading: its seconds and their ratio to every weight's (in this process), the
calibrated damping, mean CM, and the Spearman of its CM, TM and TG with every weight's, CM's
with a 95% bootstrap interval over pairs. Not part of the tests.

    python benchmarks/checkpoint_blocks.py [--model smollm2-135m] [--pairs 96]
        [--max-length 128] [--blocks 1 2 4 8] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from helpers.pairs import HH, shortest

from rmlens.data import load_pairs
from rmlens.hub import train
from rmlens.memorization import audit_rm
from rmlens.rewards import TrainConfig
from rmlens.stats import spearman


def interval(a: np.ndarray, b: np.ndarray, draws: int = 1000) -> tuple[float, float]:
    """95% bootstrap interval over pairs of Spearman(a, b)."""
    rng = np.random.default_rng(0)
    rho = [spearman(a[i], b[i]) for i in (rng.integers(0, len(a), len(a)) for _ in range(draws))]
    return tuple(np.quantile(rho, [0.025, 0.975]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--pairs", type=int, default=96)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--blocks", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--work", type=Path, default=Path("checkpoint-blocks-work"),
                        help="Where the RM and the audits live (reused on the next call).")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    if not HH.exists():
        print(f"skipped: {HH} not found")
        return
    pairs = shortest(load_pairs(HH), args.model, args.pairs, args.max_length)
    rm = args.work / "rm"
    if not (rm / "rm_config.json").exists():
        config = TrainConfig(model=args.model, finetune="full", lr=2e-5, head_lr=2e-3,
                             epochs=2, eval_fraction=0.2, max_length=args.max_length,
                             device="cpu")  # fmt: skip
        train(pairs, config, out=rm, quiet=True)
    last = json.loads((rm / "history.json").read_text())[-1]
    print(f"{args.model}, every weight trained on {len(pairs)} HH pairs: training accuracy "
          f"{last['train_accuracy']:.3f}, evaluation {last.get('eval_accuracy', float('nan')):.3f}")
    tables, seconds = {}, {}
    for blocks in [None, *args.blocks]:
        name = "every weight" if blocks is None else f"last {blocks} blocks"
        out = args.work / ("every-weight" if blocks is None else f"blocks-{blocks}")
        start = time.perf_counter()
        tables[name] = audit_rm(pairs, rm, out=out, blocks=blocks, quiet=True).set_index("id")
        manifest = json.loads((out / "runs" / "000" / "manifest.json").read_text())
        seconds[name] = manifest["metrics"]["influence_seconds"]
        damping = manifest["metrics"]["damping"]
        print(f"{name}: {seconds[name]:.1f} s ({time.perf_counter() - start:.1f} s in this "
              f"call), damping {damping:.3g}, mean CM {tables[name].cm.mean():.4f}",
              flush=True)  # fmt: skip
    full = tables["every weight"]
    print("reading | seconds | x every weight | CM rho [95%] | TM rho | TG rho")
    for name, table in tables.items():
        t = table.loc[full.index]
        low, high = interval(t.cm.to_numpy(), full.cm.to_numpy())
        print(f"{name} | {seconds[name]:.1f} | {seconds[name] / seconds['every weight']:.3f} | "
              f"{spearman(t.cm, full.cm):.3f} [{low:.2f}, {high:.2f}] | "
              f"{spearman(t.tm, full.tm):.3f} | {spearman(t.tg, full.tg):.3f}")  # fmt: skip
    pd.DataFrame({name: t.cm for name, t in tables.items()}).to_csv(args.work / "cm.csv")


if __name__ == "__main__":
    main()
