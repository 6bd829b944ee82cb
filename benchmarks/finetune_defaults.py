"""Do ``rmlens train``'s fine-tuning defaults learn on a CPU? (issue 39)

Trains LoRA RMs on the shortest ``--pairs`` shared HH pairs (``--max-length`` tokens),
once per setting, each from the base weights, and scores them on their own training pairs
and on ``--heldout`` other short pairs. A setting "learns" when its training accuracy is
outside the band a coin reaches (``rmlens.rewards._metrics.not_learned``). Prints, per
setting: epochs, learning rates, LoRA rank, seconds, training and held-out accuracy, and the
verdict; the first row is the defaults as they were (1 epoch, lr 1e-4), the second those of
today's ``TrainConfig``. Not a test.

    python benchmarks/finetune_defaults.py [--model minilm] [--pairs 200] [--heldout 200]
        [--max-length 128] [--settings "1,1e-4,1e-3" "2,1e-3,1e-3" ...]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

from helpers.pairs import HH, shortest

from rmlens.data import load_pairs
from rmlens.hub import train
from rmlens.rewards import TrainConfig
from rmlens.rewards._metrics import not_learned
from rmlens.stats import pairwise_accuracy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--data", default=str(HH))
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--heldout", type=int, default=200)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--settings", nargs="*",
                        default=["1,1e-4,1e-3", "default"],
                        help="epochs,lr,head_lr per setting; 'default': TrainConfig's")  # fmt: skip
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    pairs = shortest(load_pairs(args.data), args.model, args.pairs + args.heldout,
                     args.max_length)  # fmt: skip
    pairs = pairs.sample(frac=1.0, random_state=0).reset_index(drop=True)
    trainset, heldout = pairs.iloc[: args.pairs], pairs.iloc[args.pairs :]
    print(f"{args.model}, LoRA, {len(trainset)} training and {len(heldout)} held-out HH pairs "
          f"(the shortest, at most {args.max_length} tokens)")  # fmt: skip
    print(f"{'epochs':>6} {'lr':>7} {'head_lr':>7} {'rank':>4} {'seconds':>8} "
          f"{'train acc':>9} {'held-out':>8}  verdict")  # fmt: skip
    for setting in args.settings:
        base = TrainConfig(model=args.model, max_length=args.max_length, device="cpu", seed=0)
        if setting != "default":
            epochs, lr, head_lr = setting.split(",")
            base = base.replace(epochs=int(epochs), lr=float(lr), head_lr=float(head_lr))
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            rm = train(trainset, base, out=Path(folder) / "rm", quiet=True)
            seconds = time.perf_counter() - start
            train_acc = pairwise_accuracy(*rm.score_pairs(trainset))
            held_acc = pairwise_accuracy(*rm.score_pairs(heldout))
        why = not_learned(train_acc, len(trainset))
        print(f"{base.epochs:6d} {base.lr:7.0e} {base.head_lr:7.0e} {base.lora_r:4d} "
              f"{seconds:8.1f} {train_acc:9.3f} {held_acc:8.3f}  "
              f"{'learned' if why is None else 'did not learn: ' + why}")  # fmt: skip


if __name__ == "__main__":
    main()
