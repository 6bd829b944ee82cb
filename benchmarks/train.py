"""Reward-model training throughput: rmlens vs TRL's RewardTrainer, in one process.

Same backbone (SmolLM2-135M-Instruct with a LoRA of rank 8 on every linear layer and a
linear score head), same pairs, same token ids (both get the output of
``encode_pair_text``), same batch size, maximum length, learning rate and one epoch. TRL
runs at three settings: bf16 without gradient checkpointing (rmlens's settings: the equal
comparison), its own defaults (``RewardConfig``: bf16 with gradient checkpointing, TRL
1.16), and fp32; rmlens in bf16 (its ``auto`` on hardware that multiplies bf16 natively)
and in fp32. rmlens encodes each pair's
shared prompt once (block mask) and groups batches by length; TRL runs chosen and rejected
as two padded sequences. Pairs longer than the maximum length are left out for both (TRL
drops them). Prints pairs per second and the ratio, and the share of the machine's matmul
peak that rmlens's fine-tuning reaches: model FLOPs as ``benchmarks/helpers/flops.py`` counts them
(4NT + 2nT + attention) over the seconds of its whole ``fit``, against the fastest GEMM at
the model's shapes in the fastest precision the machine multiplies natively (bf16 on a CPU
with AMX or AVX512-BF16), timed before and after the runs. ``--profile`` also times a few
rmlens steps piece by piece (``torch.profiler``): matmuls, attention, other tensor ops, the
optimizer, Python, and building batches. Needs ``pip install trl`` (not an rmlens
dependency). Not part of the tests.

    python benchmarks/train.py [--pairs 32] [--max-length 256] [--batch-size 8] [--profile]
                               [--trl bf16,defaults,fp32]
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
from helpers.flops import attended, linear_shapes, matmul_peak, non_embedding, step_flops, trained

from rmlens.backbones import native_bf16, resolve_model, torch_dtype
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


def rmlens_trainer(args, precision: str) -> ExplicitRMTrainer:
    config = TrainConfig(
        precision=precision,
        model=args.model,
        epochs=1,
        batch_size=args.batch_size,
        lr=args.lr,
        head_lr=args.lr,
        max_length=args.max_length,
        device="cpu",
        warmup_ratio=0.0,
        max_grad_norm=1.0,
        eval_fraction=0.0,  # every pair trained, no evaluation pass: as TRL here
        patience=0,
        seed=0,
    )
    trainer = ExplicitRMTrainer(config)
    trainer._setup()  # model loading is not timed (nor is TRL's)
    return trainer


def rmlens_run(trainer: ExplicitRMTrainer, pairs: pd.DataFrame, batch_size: int) -> float:
    trainer.fit(pairs.iloc[:batch_size], quiet=True)  # warm-up
    start = time.perf_counter()
    trainer.fit(pairs, quiet=True)
    return time.perf_counter() - start


def model_flops(trainer: ExplicitRMTrainer, pairs: pd.DataFrame) -> tuple[float, int]:
    """The model FLOPs of one epoch of ``trainer`` on ``pairs`` and the tokens it runs."""
    examples, kept = trainer._examples(pairs)
    examples = [ex for ex, k in zip(examples, kept) if k]
    tokens = sum(ex.packed_length for ex in examples)
    keys = sum(attended([len(s) for s in ex.seqs], ex.shared) for ex in examples)
    config = trainer.base_.model.config
    net = trainer.net_
    flops = step_flops(non_embedding(net), trained(net), tokens, keys,
                       config.num_hidden_layers, config.hidden_size)  # fmt: skip
    return flops, tokens


CATEGORIES = {"matmuls": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"),
              "attention": ("aten::_scaled_dot_product",)}  # fmt: skip


def profile_steps(trainer: ExplicitRMTrainer, pairs: pd.DataFrame, steps: int = 3) -> None:
    """Where the time of ``steps`` optimizer steps goes: their forward and backward passes
    under ``torch.profiler`` (tensor ops by kind; the rest is Python and the framework), the
    optimizer and the building of batches timed around them."""
    from torch.profiler import ProfilerActivity, profile

    from rmlens.rewards._fast import fast_passes
    from rmlens.rewards._metrics import RunningStats
    from rmlens.rewards._packing import length_batches

    cfg, net, rt = trainer.config_, trainer.net_, trainer.runtime_
    examples, kept = trainer._examples(pairs)
    examples = [ex for ex, k in zip(examples, kept) if k]
    batches = length_batches([ex.packed_length for ex in examples], cfg.batch_size,
                             np.random.default_rng(0))[:steps]  # fmt: skip
    opt = trainer._optimizer(cfg)
    params = [p for group in opt.param_groups for p in group["params"]]
    ops = {key: 0.0 for key in (*CATEGORIES, "other tensor ops")}
    clock = {"forward and backward": 0.0, "optimizer": 0.0, "building batches": 0.0}
    net.train()
    with fast_passes(net, rt, trainer.base_.model.config):  # as fit runs its steps
        for index in batches:
            start = time.perf_counter()
            rt.batch(examples, index)
            clock["building batches"] += time.perf_counter() - start
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                start = time.perf_counter()
                trainer._step(examples, [index], cfg, None, None, None, RunningStats())
                clock["forward and backward"] += time.perf_counter() - start
            for event in prof.key_averages():
                if event.key.startswith("aten::"):
                    kind = next((c for c, names in CATEGORIES.items()
                                 if event.key.startswith(names)), "other tensor ops")  # fmt: skip
                    ops[kind] += event.self_cpu_time_total / 1e6
            start = time.perf_counter()
            torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
            opt.step()
            opt.zero_grad(set_to_none=True)
            clock["optimizer"] += time.perf_counter() - start
    net.eval()
    passes = clock.pop("forward and backward")
    shares = {**ops, "Python and framework": passes - sum(ops.values()), **clock}
    total = passes + sum(clock.values())
    print(f"profile of {len(batches)} rmlens steps ({total:.1f} s under the profiler; building "
          "batches is timed again outside the steps, which build their own):")
    for name, seconds in shares.items():
        print(f"  {name:22s} {seconds:6.2f} s  {seconds / total:6.1%}")


TRL_SETTINGS = {
    # name: (bf16, gradient checkpointing); None leaves TRL's own default
    "bf16": (True, False),
    "defaults": (None, None),
    "fp32": (False, False),
}


def trl_run(
    args, chosen: list[list[int]], rejected: list[list[int]], source: str, setting: str
) -> tuple[float, float]:
    """Wall seconds of ``train()`` and TRL's own ``train_runtime`` (its inner loop only) at
    ``setting`` (:data:`TRL_SETTINGS`): bf16 without gradient checkpointing (rmlens's
    settings), TRL's own defaults (bf16 with gradient checkpointing, in TRL 1.16), or fp32."""
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
    bf16, checkpointing = TRL_SETTINGS[setting]
    precision = {} if bf16 is None else {"bf16": bf16, "fp16": False}
    if checkpointing is not None:
        precision["gradient_checkpointing"] = checkpointing
    config = RewardConfig(
        output_dir=str(Path(args.tmp) / "trl"),
        per_device_train_batch_size=args.batch_size,
        num_train_epochs=1,
        learning_rate=args.lr,
        max_length=args.max_length,
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
        **precision,
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
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--tmp", default="/tmp/rmlens-bench-train")
    parser.add_argument("--trl", default="bf16,defaults,fp32",
                        help="TRL settings to time (bf16, defaults, fp32; '' for none)")
    parser.add_argument("--profile", action="store_true", help="profile a few rmlens steps")
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
    native = native_bf16("cpu")
    fast = "bf16" if native else "fp32"
    print(f"native bf16 matmuls: {native or 'none'}; the peak is stated in {fast}")
    trainers = {p: rmlens_trainer(args, p) for p in dict.fromkeys([fast, "fp32"])}
    shapes = linear_shapes(trainers["fp32"].net_)
    packed = [ex.packed_length for ex in trainers["fp32"]._examples(pairs)[0]]
    peak_tokens = int(args.batch_size * np.mean(packed))
    dtypes = {p: torch_dtype(p) for p in trainers}
    before = {p: matmul_peak(shapes, peak_tokens, dtype=d)[0] for p, d in dtypes.items()}
    trl = {}
    for setting in [s for s in args.trl.split(",") if s]:
        trl[setting] = trl_run(args, chosen, rejected, source, setting)
        seconds, inner = trl[setting]
        print(f"TRL RewardTrainer {setting:9s}: {seconds:7.1f} s  {n / seconds:6.2f} pairs/s "
              f"(its own train_runtime {inner:.1f} s: {n / inner:.2f} pairs/s)")
    ours = {}
    for precision, trainer in trainers.items():
        ours[precision] = rmlens_run(trainer, pairs, args.batch_size)
        print(f"rmlens {precision:14s}: {ours[precision]:7.1f} s  "
              f"{n / ours[precision]:6.2f} pairs/s")
    peaks = {}
    for precision, dtype in dtypes.items():
        peak, rates = matmul_peak(shapes, peak_tokens, dtype=dtype)
        peaks[precision] = max(before[precision], peak)
        print(f"{precision} matmul peak at the model's shapes ({peak_tokens} rows): "
              f"{peaks[precision] / 1e9:.1f} GFLOP/s (" + ", ".join(
                  f"{i}x{o} {f / 1e9:.0f}/{b / 1e9:.0f}" for (i, o), (f, b) in rates.items())
              + " forward/backward)")  # fmt: skip
    flops, tokens = model_flops(trainers[fast], pairs)
    print(f"rmlens: {tokens} tokens (prompt once per pair, no padding), "
          f"{tokens / ours[fast]:.0f} tokens/s in {fast}, {flops / 1e12:.2f} TFLOP of model FLOPs")
    if args.profile:
        profile_steps(trainers[fast], pairs)
    rate = flops / ours[fast]
    print(f"fine-tuning step: {rate / peaks[fast]:.0%} of the measured {fast} matmul peak "
          f"({rate / 1e9:.0f} of {peaks[fast] / 1e9:.0f} GFLOP/s)")
    if "bf16" in trl:
        seconds, inner = trl["bf16"]
        print(f"ratio rmlens / TRL (pairs per second): {seconds / ours[fast]:.2f}x "
              f"({inner / ours[fast]:.2f}x against TRL's train_runtime; both in {fast}, "
              "TRL without gradient checkpointing)")
    if "defaults" in trl:
        print(f"ratio rmlens / TRL at its defaults: {trl['defaults'][0] / ours[fast]:.2f}x "
              f"(rmlens in {fast}; TRL in bf16 with gradient checkpointing)")
    if "fp32" in trl:
        print(f"ratio rmlens / TRL in fp32: {trl['fp32'][0] / ours['fp32']:.2f}x "
              f"(rmlens fp32 {ours['fp32']:.1f} s; rmlens {fast} runs "
              f"{ours['fp32'] / ours[fast]:.2f}x its fp32 speed)")


if __name__ == "__main__":
    main()
