"""What a run of a fine-tuned audit costs beyond its training steps, and what its runs share.

Audits the ``--pairs`` shortest HH pairs with SmolLM2-135M fine-tuned per run (LoRA, the
audit's fine-tuning defaults), ``--runs`` runs, on the local backend (or ``--backend ray``),
and times, with timers wrapped around rmlens's own methods in this process:

- the audit's shared set-up, once: loading the base model, tokenizing every pair
  (``prepare``);
- each run: its training steps (forward, backward and optimizer steps), its per-epoch
  evaluation of validation pairs, the scoring of every pair that the audit reads (TM and TG),
  and the rest (reset to the base weights, the learning-rate schedule, copying the trained
  tensors out, writing the run's folder).

Prints each part's share of the runs' time; the goal is that a run spends under 10% of its
time outside its training steps and the scoring it exists for. On Ray the timers live in the
workers, so only the runs' wall time and the audit's are printed. Not part of the tests.

    python benchmarks/run_overhead.py [--pairs 96] [--runs 3] [--backend local|ray]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

from rmlens.data import load_pairs
from rmlens.memorization import AuditConfig, audit
from rmlens.rewards import _nets, finetune

DEFAULT = Path(__file__).resolve().parents[2] / "shared/data/hh-rlhf-harmless-base-test.jsonl.gz"
SPENT: dict[str, float] = defaultdict(float)


def timed(owner, name: str, label: str) -> None:
    """Wrap ``owner.name`` so that its seconds add up in ``SPENT[label]``."""
    inner = getattr(owner, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            SPENT[label] += time.perf_counter() - start

    setattr(owner, name, wrapper)


def shortest(pairs, n: int):
    size = pairs.prompt.map(str).str.len() + pairs.chosen.map(str).str.len()
    size += pairs.rejected.map(str).str.len()
    return pairs.loc[size.sort_values(kind="stable").index[:n]].reset_index(drop=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT)
    parser.add_argument("--pairs", type=int, default=96)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--backend", default="local", choices=["local", "ray"])
    args = parser.parse_args()
    if not args.data.exists():
        print(f"skipped: {args.data} is absent (the shared HH pairs)")
        return
    pairs = shortest(load_pairs(args.data), args.pairs)
    config = AuditConfig(model="smollm2-135m", mode="finetune", runs=args.runs,
                         folds=args.folds, max_length=args.max_length, seed=0,
                         backend=args.backend,
                         train=AuditConfig().train.replace(device="cpu"))  # fmt: skip
    trainer = finetune._TunedTrainer
    timed(trainer, "prepare", "shared set-up (load, tokenize)")
    timed(trainer, "fit_score", "runs")
    timed(trainer, "_step", "training steps")
    timed(torch.optim.AdamW, "step", "training steps")
    timed(trainer, "_evaluate", "evaluation each epoch")
    timed(_nets, "score_examples", "scoring (with evaluation)")
    t = config.train
    print(f"{len(pairs)} HH pairs, {args.runs} runs ({args.folds} folds), {args.max_length} "
          f"tokens, epochs {t.epochs} (patience {t.patience}), batch {t.batch_size}, LoRA r "
          f"{t.lora_r}, {args.backend} backend, {torch.get_num_threads()} threads")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        audit(pairs, config, out=Path(tmp) / "audit", quiet=True)
    total = time.perf_counter() - start
    print(f"audit: {total:.1f} s")
    if args.backend == "ray":
        return
    runs = SPENT["runs"]
    scoring = SPENT["scoring (with evaluation)"] - SPENT["evaluation each epoch"]
    parts = {
        "training steps": SPENT["training steps"],
        "evaluation each epoch": SPENT["evaluation each epoch"],
        "scoring every pair (TM, TG)": scoring,
    }
    parts["the rest of the runs"] = runs - sum(parts.values())
    print(f"shared set-up, once: {SPENT['shared set-up (load, tokenize)']:.1f} s; "
          f"runs: {runs:.1f} s ({runs / args.runs:.1f} s a run); outside the runs "
          f"(planning, writing the audit): {total - runs - SPENT['shared set-up (load, tokenize)']:.1f} s")  # noqa: E501
    for name, seconds in parts.items():
        print(f"  {name:30s} {seconds:7.1f} s  {seconds / runs:6.1%} of the runs")
    beyond = runs - parts["training steps"] - scoring
    print(f"a run beyond its training steps and the scoring it exists for: {beyond / runs:.1%}")


if __name__ == "__main__":
    main()
