"""Fine-tuned vs frozen-head memorization audits of the same HH pairs, same plan and seed.

Audits the shortest ``--pairs`` HH pairs (grouped by prompt, ``--runs`` runs of a
``--folds``-fold plan) three ways: SmolLM2-135M fine-tuned (LoRA, the audit's fine-tuning
defaults unless ``--epochs``/``--lr`` say otherwise), and frozen heads on SmolLM2-135M and on
MiniLM. Prints the time per run, each mode's in-train and held-out accuracy (from
``summary.json``'s ``rm_quality``), and the Spearman correlation of TM, TG and CM between the
modes, pair by pair. Not part of the tests.

    python benchmarks/finetune_audit.py                          # CPU: 300 pairs, 6 runs
    python benchmarks/finetune_audit.py --device cuda --pairs all --runs 25 --folds 5   # GPU
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import pandas as pd
from scipy.stats import spearmanr

from rmlens.data import load_pairs
from rmlens.memorization import AuditConfig, audit
from rmlens.rewards import HeadConfig

DEFAULT = Path(__file__).resolve().parents[2] / "shared/data/hh-rlhf-harmless-base-test.jsonl.gz"


def shortest(pairs: pd.DataFrame, n: str) -> pd.DataFrame:
    if n == "all":
        return pairs
    size = pairs.prompt.map(str).str.len() + pairs.chosen.map(str).str.len()
    size += pairs.rejected.map(str).str.len()
    return pairs.loc[size.sort_values(kind="stable").index[: int(n)]].reset_index(drop=True)


def run_mode(name: str, pairs: pd.DataFrame, config: AuditConfig, out: Path) -> dict:
    start = time.perf_counter()
    table = audit(pairs, config, out=out / name, quiet=True)
    seconds = time.perf_counter() - start
    quality = json.loads((out / name / "summary.json").read_text())["rm_quality"]
    return {
        "name": name,
        "seconds": seconds,
        "per_run": seconds / config.runs,
        "in_train": quality["in_train"]["accuracy"]["mean"],
        "held_out": quality["held_out"]["accuracy"]["mean"],
        "table": table.set_index("id")[["tm", "tg", "cm"]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT)
    parser.add_argument("--pairs", default="300", help="shortest N pairs, or 'all'")
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--epochs", type=int, default=None, help="fine-tuning epoch budget")
    parser.add_argument("--lr", type=float, default=None, help="fine-tuning learning rate")
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--out", type=Path, default=None, help="keep the audits here")
    args = parser.parse_args()
    if not args.data.exists():
        print(f"skipped: {args.data} is absent (the shared HH pairs)")
        return
    pairs = shortest(load_pairs(args.data), args.pairs)
    plan = {"runs": args.runs, "folds": args.folds, "seed": 0, "max_length": args.max_length}
    train = AuditConfig().train.replace(device=args.device, finetune="lora")
    if args.epochs is not None:
        train = train.replace(epochs=args.epochs)
    if args.lr is not None:
        train = train.replace(lr=args.lr)
    modes = {
        "finetune-smollm2": AuditConfig(
            model="smollm2-135m", mode="finetune", train=train, **plan
        ),
        "frozen-smollm2": AuditConfig(model="smollm2-135m", head=HeadConfig(), **plan),
        "frozen-minilm": AuditConfig(model="minilm", head=HeadConfig(), **plan),
    }
    print(f"{len(pairs)} HH pairs, {args.runs} runs ({args.folds} folds), seed 0, "
          f"fine-tuning: epochs {train.epochs}, lr {train.lr}, "
          f"patience {train.patience}, LoRA r {train.lora_r}, device {args.device}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        results = []
        for name, config in modes.items():
            result = run_mode(name, pairs, config, out)
            results.append(result)
            print(f"{name:18} {result['seconds']:8.1f} s  ({result['per_run']:6.1f} s/run)  "
                  f"accuracy in-train {result['in_train']:.3f}  held-out {result['held_out']:.3f}",
                  flush=True)  # fmt: skip
    print("Spearman between modes, pair by pair:")
    for i, a in enumerate(results):
        for b in results[i + 1 :]:
            joined = a["table"].merge(
                b["table"], left_index=True, right_index=True, suffixes=("_a", "_b")
            ).dropna()
            rho = {
                s: spearmanr(joined[f"{s}_a"], joined[f"{s}_b"]).statistic
                for s in ("tm", "tg", "cm")
            }
            print(f"  {a['name']} vs {b['name']}: n={len(joined)}  "
                  + "  ".join(f"{s.upper()} {r:.3f}" for s, r in rho.items()))  # fmt: skip


if __name__ == "__main__":
    main()
