"""Reward-model training throughput: rmlens vs TRL's RewardTrainer, in one process.

Same backbone (SmolLM2-135M-Instruct with a LoRA of rank 8 on every linear layer and a
linear score head), same pairs, same token ids (both get the output of
``encode_pair_text``), same batch size, maximum length, learning rate, precision (fp32)
and one epoch; TRL with gradient checkpointing off, as rmlens. rmlens encodes each pair's
shared prompt once (block mask) and groups batches by length; TRL runs chosen and rejected
as two padded sequences. Pairs longer than the maximum length are left out for both (TRL
drops them). Prints pairs per second and the ratio. Needs ``pip install trl`` (not an
rmlens dependency). Not part of the tests.

    python benchmarks/train.py [--pairs 32] [--max-length 192] [--batch-size 8]
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from rmlens.backbones import resolve_model
from rmlens.backbones._tokenize import encode_pair_text
from rmlens.data import SynthConfig, load_pairs, synthesize
from rmlens.rewards import ExplicitRMTrainer, TrainConfig

DEFAULT = Path(__file__).resolve().parents[2] / "shared/data/hh-rlhf-harmless-base-test.jsonl.gz"


def pick_pairs(args, tokenizer) -> tuple[pd.DataFrame, list[list[int]], list[list[int]]]:
    """The first ``args.pairs`` pairs whose chosen and rejected fit in the maximum length."""
    if Path(args.data).exists():
        pairs = load_pairs(args.data)
    else:
        print(f"{args.data} not found: synthetic pairs instead")
        pairs = synthesize(SynthConfig(n_pairs=max(4 * args.pairs, 200), seed=0))
    rows, chosen, rejected = [], [], []
    unbounded = 1 << 30
    for i, (p, c, r) in enumerate(zip(pairs.prompt, pairs.chosen, pairs.rejected)):
        ids_c = encode_pair_text(tokenizer, p, c, unbounded)
        ids_r = encode_pair_text(tokenizer, p, r, unbounded)
        if max(len(ids_c), len(ids_r)) <= args.max_length and ids_c != ids_r:
            rows.append(i), chosen.append(ids_c), rejected.append(ids_r)
        if len(rows) == args.pairs:
            break
    return pairs.iloc[rows].reset_index(drop=True), chosen, rejected


def rmlens_run(args, pairs: pd.DataFrame) -> float:
    config = TrainConfig(
        model=args.model,
        epochs=1,
        batch_size=args.batch_size,
        lr=args.lr,
        head_lr=args.lr,
        max_length=args.max_length,
        device="cpu",
        warmup_ratio=0.0,
        max_grad_norm=1.0,
        seed=0,
    )
    trainer = ExplicitRMTrainer(config)
    trainer._setup()  # model loading is not timed (nor is TRL's)
    trainer.fit(pairs.iloc[: args.batch_size], quiet=True)  # warm-up
    start = time.perf_counter()
    trainer.fit(pairs, quiet=True)
    return time.perf_counter() - start


def trl_run(
    args, chosen: list[list[int]], rejected: list[list[int]], source: str
) -> tuple[float, float]:
    """Wall seconds of ``train()`` and TRL's own ``train_runtime`` (its inner loop only)."""
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from trl import RewardConfig, RewardTrainer

    tokenizer = AutoTokenizer.from_pretrained(source)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(
        source, num_labels=1, dtype=torch.float32
    )
    model.config.pad_token_id = tokenizer.pad_token_id
    data = Dataset.from_dict({"chosen_ids": chosen, "rejected_ids": rejected})
    config = RewardConfig(
        output_dir=str(Path(args.tmp) / "trl"),
        per_device_train_batch_size=args.batch_size,
        num_train_epochs=1,
        learning_rate=args.lr,
        max_length=args.max_length,
        gradient_checkpointing=False,
        bf16=False,
        fp16=False,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_steps=10_000,
        disable_tqdm=True,
        lr_scheduler_type="linear",
        warmup_steps=0,
        max_grad_norm=1.0,
        seed=0,
        dataloader_num_workers=0,
    )
    peft = LoraConfig(
        r=8, lora_alpha=16, lora_dropout=0.0, target_modules="all-linear", task_type="SEQ_CLS"
    )
    warm = Dataset.from_dict(
        {"chosen_ids": chosen[: args.batch_size], "rejected_ids": rejected[: args.batch_size]}
    )
    trainer = RewardTrainer(
        model=model, args=config, train_dataset=warm, processing_class=tokenizer, peft_config=peft
    )
    trainer.train()  # warm-up on one batch
    trainer.train_dataset = data
    start = time.perf_counter()
    result = trainer.train()
    return time.perf_counter() - start, float(result.metrics["train_runtime"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT))
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--pairs", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=192)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--tmp", default="/tmp/rmlens-bench-train")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    from transformers import AutoTokenizer

    source, _ = resolve_model(args.model)
    tokenizer = AutoTokenizer.from_pretrained(source)
    pairs, chosen, rejected = pick_pairs(args, tokenizer)
    n = len(pairs)
    lengths = np.array([len(c) + len(r) for c, r in zip(chosen, rejected)])
    print(
        f"{n} pairs, {args.model}, max length {args.max_length}, batch size "
        f"{args.batch_size}, {torch.get_num_threads()} CPU threads; mean chosen+rejected "
        f"tokens {lengths.mean():.0f}"
    )
    trl_seconds, trl_inner = trl_run(args, chosen, rejected, source)
    print(
        f"TRL RewardTrainer: {trl_seconds:7.1f} s  {n / trl_seconds:6.2f} pairs/s "
        f"(its own train_runtime {trl_inner:.1f} s: {n / trl_inner:.2f} pairs/s)"
    )
    ours = rmlens_run(args, pairs)
    print(f"rmlens:            {ours:7.1f} s  {n / ours:6.2f} pairs/s")
    print(
        f"ratio rmlens / TRL (pairs per second): {trl_seconds / ours:.2f}x "
        f"({trl_inner / ours:.2f}x against TRL's train_runtime)"
    )


if __name__ == "__main__":
    main()
