"""A LoRA audit at a real model size on a GPU (issue 40): the one script for a lent device.

Builds a randomly initialised causal LM from Llama-3.2-1B's configuration (no download:
weights from the config, a word-level tokenizer over the pairs' words), then runs a 2-run
paired audit (Gauss-Newton influence through the LoRA adapters and the head, bf16 autocast)
on ``--pairs`` synthetic pairs, and prints:

- throughput: training pairs x epochs per second of training, and the influence pass's
  seconds (per-pair gradients, Gram matrix, eigendecomposition) against the training's;
- tokens per second and MFU of the runs' training (issue 48): the tokens it processed (a
  pair's shared prompt once, no padding) over each run's seconds outside its influence
  pass, and their model FLOPs (``helpers/flops.py``: 4NT + 2nT + attention) against the matmul
  peak measured here at the model's shapes (bf16 on a GPU, fp32 on a CPU), and against the
  GPU's nominal dense bf16 peak where ``NOMINAL`` knows it;
- peak GPU memory (``torch.cuda.max_memory_allocated``);
- exactness: one group of run 0 refitted exactly (the run retrained from the same seed
  without it), its pairs' p_cf against the refit's p, beside the run's own seed noise (the
  run retrained unchanged).

``--size tiny`` runs the same steps on a 2-layer model on a CPU (what CI-sized machines
can check). Writes ``device.json`` into ``--out``.

    python benchmarks/device_lora_audit.py --size llama-3.2-1b --pairs 300 --out $OUT
    python benchmarks/device_lora_audit.py --size tiny --pairs 60 --device cpu
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from helpers.flops import attended, linear_shapes, matmul_peak, non_embedding, step_flops, trained
from scipy.special import expit

from rmlens.data import synthesize
from rmlens.data._synth_config import SynthConfig
from rmlens.memorization import AuditConfig, audit
from rmlens.memorization._run_folders import load_matrices
from rmlens.rewards import TrainConfig, make_trainer
from rmlens.stats import spearman

SIZES = {  # Llama-3.2-1B's shape (config.json of meta-llama/Llama-3.2-1B), and a tiny one
    "llama-3.2-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                         num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                         max_position_embeddings=131072, rope_theta=500000.0,
                         tie_word_embeddings=True),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, vocab_size=4096,
                 max_position_embeddings=1024, tie_word_embeddings=True),
}  # fmt: skip
NOMINAL = {"H200": 989e12, "H100": 989e12, "A100": 312e12}  # dense bf16, NVIDIA's datasheets


def build_model(size: str, pairs: pd.DataFrame, folder: Path) -> Path:
    """A random LlamaForCausalLM of ``size`` and a word-level tokenizer over the pairs."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = sorted({w for col in ("prompt", "chosen", "rejected")
                    for text in pairs[col] for w in str(text).split()})  # fmt: skip
    special = ["<pad>", "<unk>", "<s>", "</s>"]
    vocab = {t: i for i, t in enumerate(special + words)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>",
                                        pad_token="<pad>", bos_token="<s>", eos_token="</s>")
    tokenizer.save_pretrained(folder)
    shape = dict(SIZES[size])
    shape["vocab_size"] = max(shape["vocab_size"], len(vocab))
    config = LlamaConfig(**shape, pad_token_id=0, bos_token_id=2, eos_token_id=3)
    torch.manual_seed(0)
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(folder)
    return folder


def training_work(trainer, pairs, runs: list[dict]) -> tuple[float, float, int]:
    """Mean tokens and model FLOPs of a run's training (its pairs x the epochs it trained),
    and the mean packed length of a pair, from a prepared trainer."""
    ids = pairs.id.astype(str).to_numpy()
    examples, kept = trainer.examples_, trainer.kept_
    config = trainer.base_.model.config
    n_all, n_trained = non_embedding(trainer.net_), trained(trainer.net_)
    tokens, flops = [], []
    for manifest in runs:
        index = [i for i in np.flatnonzero(np.isin(ids, manifest["train_ids"])) if kept[i]]
        epochs = manifest["metrics"]["epochs_trained"]
        n = sum(examples[i].packed_length for i in index)
        keys = sum(attended([len(s) for s in examples[i].seqs], examples[i].shared)
                   for i in index)  # fmt: skip
        tokens.append(n * epochs)
        flops.append(epochs * step_flops(n_all, n_trained, n, keys, config.num_hidden_layers,
                                         config.hidden_size))  # fmt: skip
    mean_length = float(np.mean([ex.packed_length for ex, k in zip(examples, kept) if k]))
    return float(np.mean(tokens)), float(np.mean(flops)), int(round(mean_length))


def exactness(trainer, pairs, out: Path) -> dict:
    """Run 0 of the audit retrained without one training group (the exact refit), and
    unchanged (its seed noise), from the same seed and validation pairs (``trainer``
    prepared on ``pairs``)."""
    manifest = json.loads((out / "runs" / "000" / "manifest.json").read_text())
    m = load_matrices(out)  # p_cf at the damping the audit calibrated
    scores = pd.DataFrame({"p": m.p[:, 0], "p_cf": m.p_cf[:, 0]}, index=m.ids)
    ids = pairs.id.astype(str).to_numpy()
    train_index = np.flatnonzero(np.isin(ids, manifest["train_ids"]))
    val_index = np.flatnonzero(np.isin(ids, manifest["val_ids"]))
    groups = pairs.user_id.astype(str).to_numpy()
    trained_groups = pd.Series(groups[train_index]).value_counts()
    group = trained_groups.index[len(trained_groups) // 2]  # a group of median size
    without = train_index[groups[train_index] != group]
    refit = trainer.fit_score(without, seed=manifest["seed"], val_index=val_index)
    again = trainer.fit_score(train_index, seed=manifest["seed"], val_index=val_index)
    rows = np.flatnonzero(groups == group)
    p = scores.loc[ids[rows], "p"].to_numpy()
    p_cf = scores.loc[ids[rows], "p_cf"].to_numpy()
    p_refit = expit(refit.r_chosen[rows] - refit.r_rejected[rows])
    p_again = expit(again.r_chosen[rows] - again.r_rejected[rows])
    return {
        "group": group, "pairs": int(len(rows)),
        "median_abs_error": float(np.median(np.abs(p_cf - p_refit))),
        "median_abs_effect": float(np.median(np.abs(p - p_refit))),
        "median_seed_noise": float(np.median(np.abs(p_again - p))),
        "effect_spearman": float(spearman(p - p_refit, p - p_cf)),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=list(SIZES), default="llama-3.2-1b")
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    cuda = torch.cuda.is_available() and args.device != "cpu"
    pairs = synthesize(SynthConfig(n_pairs=args.pairs, n_users=30, seed=0))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        start = time.perf_counter()
        model = build_model(args.size, pairs, work / "model")
        built = time.perf_counter() - start
        train = TrainConfig(epochs=args.epochs, patience=1, lr=3e-4, lr_grid=(), head_lr=2e-3,
                            batch_size=16, bf16=cuda, device="cuda" if cuda else "cpu")
        config = AuditConfig(model=str(model), mode="finetune", train=train, runs=2, folds=2,
                             estimator="paired", max_length=args.max_length, format="raw",
                             n_boot=0)  # fmt: skip
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        audit(pairs, config, out=work / "audit", quiet=True)
        seconds = time.perf_counter() - start
        runs = [json.loads((work / "audit" / "runs" / f"{r:03d}" / "manifest.json").read_text())
                for r in range(2)]  # fmt: skip
        influence = float(np.mean([m["metrics"]["influence_seconds"] for m in runs]))
        trained = float(np.mean([m["n_train"] * m["metrics"]["epochs_trained"] for m in runs]))
        per_run = seconds / 2
        peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan")
        summary = json.loads((work / "audit" / "summary.json").read_text())
        trainer = make_trainer(config.resolved().train)
        trainer.prepare(pairs, quiet=True)
        tokens, flops, length = training_work(trainer, pairs, runs)
        dtype = torch.bfloat16 if cuda else torch.float32
        gemm, _ = matmul_peak(linear_shapes(trainer.net_), train.batch_size * length,
                              dtype=dtype, device=train.device)  # fmt: skip
        check = exactness(trainer, pairs, work / "audit")
    training = max(per_run - influence, 1e-9)
    name = torch.cuda.get_device_name() if cuda else "cpu"
    nominal = next((v for k, v in NOMINAL.items() if k in name), None)
    found = {
        "size": args.size, "device": name,
        "pairs": args.pairs, "max_length": args.max_length, "build_seconds": built,
        "audit_seconds": seconds, "per_run_seconds": per_run, "influence_seconds": influence,
        "training_pairs_per_second": trained / training,
        "training_tokens_per_second": tokens / training,
        "training_model_tflops_per_second": flops / training / 1e12,
        "matmul_peak_tflops_per_second": gemm / 1e12,
        "share_of_measured_peak": flops / training / gemm,
        "mfu_nominal": None if nominal is None else flops / training / nominal,
        "peak_memory_gib": peak, "damping": (summary.get("damping") or {}).get("damping"),
        "held_out_accuracy": summary["rm_quality"]["held_out"]["accuracy"]["mean"],
        "exactness": check,
    }  # fmt: skip
    print(json.dumps(found, indent=1))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "device.json").write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
