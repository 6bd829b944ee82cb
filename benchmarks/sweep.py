"""Benchmark: rmlens's prefix-cached token sweep vs the naive per-candidate method.

The RM is SmolLM2-135M-Instruct (the ``smollm2-135m`` preset) with a linear Bradley-Terry
head. By default the head is trained here with ``rmlens.rewards.FrozenHeadTrainer`` on 300 pairs of
the shared HH-RLHF harmless-base test file (cached under ``$RMLENS_CACHE/rms``); pass
``--rm DIR`` to benchmark another rmlens RM folder.

Naive method (as public research code does it): apply the chat template to each
candidate, tokenize with padding, score batches of 32 with the whole prompt each time.
rmlens: the prompt prefix once (KV cache), then only each candidate's suffix, in large
batches. Both run on the same model in the same process, over the first ``--n`` token ids.

Printed: both rates (candidate tokens per second), their ratio, the largest score
difference, the matmul FLOP/s the sweep reaches (2 x non-embedding parameters x model
tokens run per second) over the matmul peak at the model's shapes in the precision the sweep
runs in (``--precision``, resolved as ``rmlens sweep`` resolves it: bf16 on a CPU that
multiplies it natively), measured here, and the time a full-vocabulary sweep takes
(estimated from the rate, or measured with ``--full``). In bf16 the sweep compiles its
decoder layers on its first batch (``rmlens.tokens._compiled``); one batch is run before
timing, and its time printed.

    python benchmarks/sweep.py [--n 2000] [--threads 2] [--precision auto] [--full]
                               [--write-preset]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch
from helpers.flops import linear_shapes

PROMPT = "What, in one word, is the greatest thing ever?"
HH = Path(__file__).resolve().parents[2] / "shared" / "data" / "hh-rlhf-harmless-base-test.jsonl.gz"


def cache_root() -> Path:
    env = os.environ.get("RMLENS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "rmlens"


def build_hh_rm(out: Path, n_train: int = 300, n_test: int = 60, max_length: int = 128,
                seed: int = 0) -> Path:
    """Train a linear HeadRM on smollm2-135m last-token features of HH pairs; save it.

    Pairs are drawn at random among those whose formatted chosen and rejected texts both
    fit in ``max_length`` tokens (short conversations: cheap to encode on a CPU, and closer
    to one-word answers than long transcripts).
    """
    from rmlens.backbones import featurize, load_backbone
    from rmlens.backbones._tokenize import encode_pair_text
    from rmlens.data import load_pairs
    from rmlens.rewards import FrozenHeadTrainer, HeadConfig, save_head_rm
    from rmlens.rewards._metrics import pairwise_accuracy

    if (out / "rm_config.json").is_file():
        return out
    pairs = load_pairs(HH)
    backbone = load_backbone("smollm2-135m", max_length=max_length)
    tok = backbone.tokenizer
    fits = [max(len(encode_pair_text(tok, p, c, 10**6)), len(encode_pair_text(tok, p, r, 10**6)))
            <= max_length for p, c, r in zip(pairs.prompt, pairs.chosen, pairs.rejected)]
    short = np.flatnonzero(fits)
    pick = np.random.default_rng(seed).permutation(short)[: n_train + n_test]
    train, test = pairs.iloc[pick[:n_train]], pairs.iloc[pick[n_train:]]
    start = time.perf_counter()
    f_train = featurize(backbone, train)
    f_test = featurize(backbone, test)
    seconds = time.perf_counter() - start
    config = HeadConfig(head="linear", epochs=60, lr=3e-3, weight_decay=0.01, seed=seed)
    trainer = FrozenHeadTrainer(config)
    rm = trainer.fit_features(f_train.chosen[f_train.kept], f_train.rejected[f_train.kept]).head_
    metrics = {
        "train_accuracy": pairwise_accuracy(
            rm.score_features(f_train.chosen), rm.score_features(f_train.rejected)
        ),
        "test_accuracy": pairwise_accuracy(
            rm.score_features(f_test.chosen), rm.score_features(f_test.rejected)
        ),
        "n_train": int(f_train.kept.sum()), "n_test": int(len(test)),
        "n_eligible": int(len(short)), "featurize_seconds": round(seconds, 1),
    }
    extra = {"data": HH.name, "max_length": max_length, "seed": seed, "metrics": metrics}
    save_head_rm(out, "smollm2-135m", head=rm, extra=extra)
    print(f"trained linear HeadRM on {metrics['n_train']} HH pairs: {json.dumps(metrics)}")
    return out


def write_preset(rm_dir: Path, preset: Path) -> None:
    """Fold the HeadRM's standardization into (w, b) and write the packaged preset."""
    from rmlens.rewards import RM_CONFIG, HeadRM

    head = HeadRM.load(rm_dir).head_
    w = head.net.weight.detach()[0] / head.scale  # (d,)
    b = float(head.net.bias.detach()[0] - (w * head.mean).sum())
    config = json.loads((rm_dir / RM_CONFIG).read_text())
    config.update(head="linear", note="linear head on SmolLM2-135M-Instruct last-token "
                  "features, Bradley-Terry on HH-RLHF harmless-base test pairs "
                  "(benchmarks/sweep.py)")
    preset.mkdir(parents=True, exist_ok=True)
    (preset / RM_CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    (preset / "head.json").write_text(json.dumps(
        {"weight": [round(float(x), 8) for x in w], "bias": [round(b, 8)]}) + "\n")


def peak_flops(shapes: list[tuple[int, int]], rows: int, dtype=torch.float32,
               repeats: int = 20) -> tuple[float, float]:  # fmt: skip
    """The matmul peak in ``dtype`` at the model's linear shapes (``helpers.flops.linear_shapes``)
    with ``rows`` rows, as ``benchmarks/train.py`` measures it: the fastest shape, (per wall
    second, per CPU second)."""
    best = (0.0, 0.0)
    for d_in, d_out in shapes:
        x, w = torch.randn(rows, d_in, dtype=dtype), torch.randn(d_out, d_in, dtype=dtype)
        torch.nn.functional.linear(x, w)
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(repeats):
            torch.nn.functional.linear(x, w)
        flops = 2.0 * rows * d_in * d_out * repeats
        best = max(best[0], flops / (time.perf_counter() - wall)), max(
            best[1], flops / (time.process_time() - cpu))
    return best


class Clock:
    """Wall and CPU seconds of a block (CPU time counts every thread of this process)."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu


@torch.inference_mode()
def naive_scores(scorer, prompt: str, decoded: list[str], batch_size: int = 32) -> np.ndarray:
    """Template each candidate, tokenize with padding, run whole sequences in batches of 32."""
    tok = scorer.tokenizer
    texts = [tok.apply_chat_template([{"role": "user", "content": prompt},
                                      {"role": "assistant", "content": d}], tokenize=False)
             for d in decoded]
    tok.padding_side = "right"
    out = []
    for start in range(0, len(texts), batch_size):
        batch = tok(texts[start : start + batch_size], padding=True, add_special_tokens=False,
                    return_tensors="pt")
        hidden = scorer.body(**batch).last_hidden_state  # (B, T, d)
        last = batch["attention_mask"].sum(1) - 1
        out.append(scorer.head(hidden[torch.arange(len(last)), last]).numpy())
    return np.concatenate(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rm", type=Path, default=None, help="rmlens RM folder")
    parser.add_argument("--n", type=int, default=2000, help="token ids benchmarked")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"))
    parser.add_argument("--full", action="store_true", help="also time a full-vocabulary sweep")
    parser.add_argument("--write-preset", action="store_true",
                        help="write src/rmlens/hub/presets/smollm2-135m-hh from the RM")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    from rmlens.backbones import resolve_precision, torch_dtype
    from rmlens.hub import load_rm
    from rmlens.tokens import sweep_prompt, token_scorer
    from rmlens.tokens._candidates import sweep_token_ids
    from rmlens.tokens._run import BF16_CHECK

    rm_dir = args.rm or build_hh_rm(cache_root() / "rms" / "smollm2-135m-hh")
    if args.write_preset:
        write_preset(rm_dir, Path(__file__).resolve().parents[1] / "src" / "rmlens" / "rewards"
                     / "presets" / "smollm2-135m-hh")
    precision = resolve_precision(args.precision, "cpu", task="sweep")
    dtype = torch_dtype(precision)
    loose = BF16_CHECK if precision == "bf16" else None  # the cached route's check, as `sweep`
    scorer = token_scorer(load_rm(rm_dir, device="cpu", precision=precision), consume=True)
    body = scorer.body
    non_embedding = sum(p.numel() for n, p in body.named_parameters() if "embed" not in n)
    ids, _ = sweep_token_ids(scorer.tokenizer)
    ids = ids[: args.n]
    decoded = [scorer.tokenizer.decode([int(i)]) for i in ids]
    print(f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}, "
          f"{len(ids)} tokens, non-embedding params {non_embedding / 1e6:.1f}M, {precision}")

    threads = torch.get_num_threads()
    shapes, rows = linear_shapes(body), args.batch_size * 4  # a batch's suffix tokens
    peaks = [peak_flops(shapes, rows, dtype)]
    with Clock() as t_warm:  # bf16 compiles the decoder layers on the first batch
        sweep_prompt(scorer, PROMPT, token_ids=ids[: args.batch_size], batch_size=args.batch_size,
                     loose=loose)  # fmt: skip
    with Clock() as t_sweep:
        frame, info = sweep_prompt(scorer, PROMPT, token_ids=ids, batch_size=args.batch_size,
                                   loose=loose)  # fmt: skip
    run_tokens = info.n_tokens  # every token the model ran, the verified ones included
    peaks.append(peak_flops(shapes, rows, dtype))
    with Clock() as t_naive:
        naive = naive_scores(scorer, PROMPT, decoded)
    peaks.append(peak_flops(shapes, rows, dtype))
    peak_wall, peak_cpu = max(p[0] for p in peaks), max(p[1] for p in peaks) * threads

    def rates(clock):  # candidates per wall second, and per second of `threads` busy cores
        return len(ids) / clock.wall, len(ids) / (clock.cpu / threads)

    (sweep_wall, sweep_cpu), (naive_wall, naive_cpu) = rates(t_sweep), rates(t_naive)
    flops_wall = 2 * non_embedding * run_tokens / t_sweep.wall
    flops_cpu = 2 * non_embedding * run_tokens / (t_sweep.cpu / threads)
    print("rates in candidate tokens/s; 'cpu' = per second of the process's own CPU time "
          "(what an idle machine gives), 'wall' = as measured on this (shared) machine")
    print(f"naive  (template + pad, batches of 32): wall {naive_wall:7.1f}  cpu {naive_cpu:7.1f}"
          f"  ({t_naive.wall:.0f} s wall, {t_naive.cpu:.0f} s cpu)")
    print(f"rmlens (prefix KV cache, batch {args.batch_size}):  wall {sweep_wall:7.1f}  "
          f"cpu {sweep_cpu:7.1f}  ({t_sweep.wall:.0f} s wall, {t_sweep.cpu:.0f} s cpu; prefix "
          f"{info.prefix_len} tokens, then {info.second_prefix_len} for those missing it, suffixes "
          f"{info.suffix_lengths}, {info.n_full} in full; {run_tokens} tokens run)")
    print(f"first batch of {args.batch_size} before timing (compiling where the sweep "
          f"compiles): {t_warm.wall:.1f} s wall")
    print(f"ratio rmlens / naive: wall {sweep_wall / naive_wall:.1f}x, "
          f"cpu {sweep_cpu / naive_cpu:.1f}x")
    print(f"max |rmlens - naive| score: {np.max(np.abs(frame.score.to_numpy() - naive)):.2e}")
    print(f"{precision} matmul peak: wall {peak_wall / 1e9:.1f}, cpu {peak_cpu / 1e9:.1f} "
          "GFLOP/s; sweep: "
          f"wall {flops_wall / 1e9:.1f} ({flops_wall / peak_wall:.0%} of peak), cpu "
          f"{flops_cpu / 1e9:.1f} GFLOP/s ({flops_cpu / peak_cpu:.0%} of peak)")
    vocab = len(sweep_token_ids(scorer.tokenizer)[0])
    for label, rate, naive_rate in (("wall", sweep_wall, naive_wall),
                                    ("cpu", sweep_cpu, naive_cpu)):
        print(f"full vocabulary ({vocab} tokens) at the {label} rate: "
              f"{vocab / rate / 60:.1f} min per prompt, {3 * vocab / rate / 60:.1f} min for 3 "
              f"prompts (naive {3 * vocab / naive_rate / 60:.0f} min)")
    if args.full:
        with Clock() as t_full:
            sweep_prompt(scorer, PROMPT, batch_size=args.batch_size, loose=loose)
        print(f"full vocabulary measured, one prompt: {t_full.wall / 60:.1f} min wall, "
              f"{t_full.cpu / threads / 60:.1f} min cpu")


if __name__ == "__main__":
    main()
