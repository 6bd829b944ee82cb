"""Numbers kept in bf16: each model pass run in bf16 and in fp32 on the same real pairs.

A speed-up that changes numbers is a change of method (issue 57), so every pass that
``precision auto`` runs in bf16 is checked against fp32 here, on the shortest HH-RLHF
harmless pairs (``helpers.pairs.shortest``, 128 tokens), in one process per check:

- ``frozen``: the frozen audit (25 runs, default heads) of ``--frozen-pairs`` pairs on
  features encoded in each precision, for MiniLM and SmolLM2: CM's Spearman between the
  two audits (kept at 0.99 or more), the share of pairs in the same category (kept at 0.99
  or more), and the encoding's speed in bf16 against fp32 (same texts, no cache).
- ``finetune``: LoRA RMs trained by ``rmlens train``'s defaults from the same seeds in each
  precision (MiniLM and SmolLM2; ``--seeds``), scored on held-out pairs: held-out accuracy
  (ties 1/2) per seed and the paired difference bf16 - fp32 with its 95% t-interval over
  seeds (kept when the interval holds 0, or lies within +-0.02).
- ``export``: the bf16-trained SmolLM2 RM of the first seed exported (``rmlens export``) and
  read by transformers in fp32: its margins on the held-out pairs against rmlens's reading
  of the RM folder in fp32 and in bf16, the largest difference and the pairs whose
  preferred side flips (kept at 0).
- ``sweep``: that RM's vocabulary sweep (the first ``--sweep-tokens`` ids, 0 for the whole
  vocabulary; the default prompts) in each precision, bf16's extremes scored again in fp32
  as ``rmlens sweep`` does: the top and bottom 100 tokens (kept when identical), the tokens
  scored again, and the seconds each sweep took.
- ``generate``: SmolLM2-135M-Instruct's samples (``rmlens.backbones.sample_responses``,
  temperature 1, 48 new tokens) to the last ``--generate-prompts`` HH prompts, 32 each, at
  each seed in each precision, scored by ``--gold-rm`` (default: the gold RM of
  ``findings.py overoptimization-policy``, in bf16 for both): the gold of bf16's samples
  minus fp32's, per prompt over the seeds, in sd of fp32's samples' gold, with its 95%
  t-interval over prompts (kept when it lies within +-0.1), the same for their length in
  tokens, and the tokens per second of each.
- ``paired``: a paired fine-tuned audit (LoRA MiniLM, ``--paired-runs`` runs, one plan) in
  each precision: CM's Spearman between them against the fp32 audit's split-half
  reliability (kept when at least it).

Figures go to ``--out`` (default ``benchmarks/results/precision.json``), each check under its
name, so the checks can run one at a time (``--checks``). ``docs/benchmarks.rst`` gives the
table. Not part of the tests.

    python benchmarks/precision.py [--checks frozen,finetune,export,sweep,generate,paired]
        [--seeds 0,1,2] [--frozen-pairs 1000] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from helpers.pairs import HH, shortest
from scipy import stats as sps

from rmlens.data import load_pairs
from rmlens.stats import pairwise_accuracy, spearman

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks/results/precision.json"
MODELS = ("minilm", "smollm2-135m")
PRECISIONS = ("fp32", "bf16")
FINETUNE_PAIRS = {"minilm": (400, 200), "smollm2-135m": (200, 100)}  # train, held out


def t_interval(diffs: list[float]) -> list[float]:
    """Mean and 95% t-interval of per-seed differences."""
    d = np.asarray(diffs, float)
    half = sps.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
    return [float(d.mean()), float(d.mean() - half), float(d.mean() + half)]


def hh(model: str, n: int):
    return shortest(load_pairs(HH), model, n, 128)


def frozen(args) -> dict:
    from rmlens.backbones import featurize, load_backbone
    from rmlens.memorization import AuditConfig, audit

    out = {}
    for model in MODELS:
        pairs = hh(model, args.frozen_pairs)
        seconds, tables, reliability = {}, {}, {}
        for precision in PRECISIONS:
            bb = load_backbone(model, max_length=128, precision=precision)
            featurize(bb, pairs.iloc[:32], cache_dir=False, quiet=True)  # warm-up
            start = time.perf_counter()
            featurize(bb, pairs, cache_dir=False, quiet=True)
            seconds[precision] = time.perf_counter() - start
            folder = Path(args.work) / f"frozen-{model}-{precision}"
            config = AuditConfig(model=model, max_length=128, precision=precision, seed=0)
            tables[precision] = audit(pairs, config, out=folder, quiet=True).set_index("id")
            summary = json.loads((folder / "summary.json").read_text())
            reliability[precision] = summary.get("reliability", {}).get("cm")
        a, b = tables["fp32"], tables["bf16"].loc[tables["fp32"].index]
        ok = a.cm.notna() & b.cm.notna()
        out[model] = {
            "pairs": len(pairs),
            "cm_spearman": float(spearman(a.cm[ok], b.cm[ok])),
            "same_category": float((a.category == b.category).mean()),
            "cm_max_abs_diff": float((a.cm[ok] - b.cm[ok]).abs().max()),
            "cm_reliability": reliability,
            "encode_seconds": seconds,
            "encode_speedup": seconds["fp32"] / seconds["bf16"],
        }
        print(model, out[model], flush=True)
    return out


def _train(model: str, precision: str, seed: int, train_pairs, folder: Path):
    from rmlens.hub import train

    start = time.perf_counter()
    rm = train(train_pairs, out=folder, model=model, max_length=128, precision=precision,
               seed=seed, quiet=True)  # fmt: skip
    return rm, time.perf_counter() - start


def finetune(args) -> dict:
    out = {}
    for model in MODELS:
        n_train, n_test = FINETUNE_PAIRS[model]
        pairs = hh(model, n_train + n_test)
        train_pairs, test = pairs.iloc[:n_train], pairs.iloc[n_train:]
        rows = {p: [] for p in PRECISIONS}
        seconds = {p: [] for p in PRECISIONS}
        for seed in args.seeds:
            for precision in PRECISIONS:
                folder = Path(args.work) / f"rm-{model}-{precision}-{seed}"
                rm, took = _train(model, precision, seed, train_pairs, folder)
                r_c, r_r = rm.score_pairs(test)
                rows[precision].append(float(pairwise_accuracy(r_c, r_r)))
                seconds[precision].append(took)
                print(model, precision, seed, rows[precision][-1], f"{took:.0f} s", flush=True)
        diffs = [b - f for b, f in zip(rows["bf16"], rows["fp32"])]
        out[model] = {
            "train_pairs": n_train, "heldout_pairs": n_test, "seeds": list(args.seeds),
            "heldout_accuracy": rows, "diff_bf16_minus_fp32": t_interval(diffs),
            "train_seconds": seconds,
            "speedup": float(np.median(seconds["fp32"]) / np.median(seconds["bf16"])),
        }  # fmt: skip
        print(model, out[model], flush=True)
    return out


def export(args) -> dict:
    from rmlens.hub import export_rm, load_rm

    model, seed = "smollm2-135m", args.seeds[0]
    n_train, n_test = FINETUNE_PAIRS[model]
    test = hh(model, n_train + n_test).iloc[n_train:]
    folder = Path(args.work) / f"rm-{model}-bf16-{seed}"
    exported = export_rm(folder, Path(args.work) / "exported-bf16")
    theirs = np.subtract(*load_rm(exported.path).score_pairs(test))  # transformers, fp32
    out = {"pairs": len(test), "probe_max_abs_diff": exported.max_abs_diff}
    for precision in PRECISIONS:  # rmlens's reading of the RM folder in each precision
        ours = np.subtract(*load_rm(folder, precision=precision).score_pairs(test))
        out[f"flips_{precision}"] = int((np.sign(ours) != np.sign(theirs)).sum())
        out[f"max_abs_margin_diff_{precision}"] = float(np.abs(ours - theirs).max())
    out["margin_std"] = float(np.std(theirs))
    print(out, flush=True)
    return out


def sweep(args) -> dict:
    import pandas as pd

    from rmlens.tokens import sweep as run_sweep

    folder = Path(args.work) / f"rm-smollm2-135m-bf16-{args.seeds[0]}"
    tables, seconds, rescored = {}, {}, {}
    for precision in PRECISIONS:  # speed: benchmarks/sweep.py
        out = Path(args.work) / f"sweep-{precision}-{args.sweep_tokens or 'all'}"
        start = time.perf_counter()
        summary = run_sweep(str(folder), out=out, max_tokens=args.sweep_tokens or None,
                            precision=precision, quiet=True)  # fmt: skip
        seconds[precision] = round(time.perf_counter() - start, 1)
        (stats,) = summary["models"].values()
        rescored[precision] = [t.get("fp32_rescored") for t in stats["timing"]]
        tables[precision] = pd.concat(
            pd.read_parquet(p) for p in sorted(out.glob("*/sweep.parquet")))
    result = {"tokens": args.sweep_tokens or "all", "seconds": seconds,
              "fp32_rescored": rescored["bf16"]}  # fmt: skip
    for prompt, part in tables["fp32"].groupby("prompt"):
        other = tables["bf16"][tables["bf16"].prompt == prompt]
        top = [set(t.nlargest(100, "score").token_id) for t in (part, other)]
        bottom = [set(t.nsmallest(100, "score").token_id) for t in (part, other)]
        merged = part.merge(other, on="token_id", suffixes=("_fp32", "_bf16"))
        result[prompt] = {
            "top100_same": len(top[0] & top[1]), "bottom100_same": len(bottom[0] & bottom[1]),
            "spearman": float(spearman(merged.score_fp32, merged.score_bf16)),
        }  # fmt: skip
    print(result, flush=True)
    return result


def paired(args) -> dict:
    from rmlens.memorization import AuditConfig, audit
    from rmlens.rewards import TrainConfig

    pairs = hh("minilm", args.paired_pairs)
    tables, reliability, seconds = {}, {}, {}
    for precision in PRECISIONS:
        folder = Path(args.work) / f"paired-minilm-{precision}"
        config = AuditConfig(
            model="minilm", max_length=128, mode="finetune", estimator="paired",
            runs=args.paired_runs, precision=precision, n_boot=0,
            train=TrainConfig(epochs=4, patience=1, lr=3e-4, head_lr=2e-3),
        )  # fmt: skip
        start = time.perf_counter()
        tables[precision] = audit(pairs, config, out=folder, quiet=True).set_index("id")
        seconds[precision] = time.perf_counter() - start
        summary = json.loads((folder / "summary.json").read_text())
        reliability[precision] = summary.get("reliability", {}).get("cm")
    a, b = tables["fp32"], tables["bf16"].loc[tables["fp32"].index]
    ok = a.cm.notna() & b.cm.notna()
    out = {"pairs": len(pairs), "runs": args.paired_runs,
           "cm_spearman": float(spearman(a.cm[ok], b.cm[ok])),
           "cm_reliability": reliability, "seconds": seconds}  # fmt: skip
    print(out, flush=True)
    return out


def generate(args) -> dict:
    from findings.policy_bon import policy_prompts

    from rmlens.backbones import load_policy, sample_responses
    from rmlens.hub import load_rm

    prompts = policy_prompts(HH)[-args.generate_prompts:]
    gold = load_rm(args.gold_rm, device="cpu", precision="bf16")
    per, rate = {}, {}
    for precision in PRECISIONS:
        lm, tokenizer = load_policy("smollm2-135m", precision=precision)
        golds, lengths, tokens, seconds = [], [], 0, 0.0
        for seed in args.seeds:
            start = time.perf_counter()
            samples = sample_responses(lm, tokenizer, prompts, 32, max_new_tokens=48, seed=seed)
            seconds += time.perf_counter() - start
            flat = [r for rs in samples for r in rs]
            count = np.array([len(tokenizer(r, add_special_tokens=False).input_ids)
                              for r in flat]).reshape(len(prompts), -1)  # fmt: skip
            tokens += int(count.sum())
            golds.append(gold.score(np.repeat(prompts, 32).tolist(), flat).reshape(
                len(prompts), -1))  # fmt: skip
            lengths.append(count)
        per[precision] = (np.concatenate(golds, 1), np.concatenate(lengths, 1))
        rate[precision] = tokens / seconds
    scale = per["fp32"][0].std()
    gold_diff = (per["bf16"][0].mean(1) - per["fp32"][0].mean(1)) / scale
    length_diff = per["bf16"][1].mean(1) - per["fp32"][1].mean(1)
    out = {"prompts": len(prompts), "samples_per_prompt": 32 * len(args.seeds),
           "seeds": args.seeds, "gold_diff_sd": t_interval(list(gold_diff)),
           "length_diff_tokens": t_interval(list(length_diff)),
           "tokens_per_second": rate}  # fmt: skip
    print(out, flush=True)
    return out


CHECKS = {"frozen": frozen, "finetune": finetune, "export": export, "sweep": sweep,
          "generate": generate, "paired": paired}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", default=",".join(CHECKS))
    parser.add_argument("--seeds", default="0,1,2",
                        type=lambda s: [int(x) for x in s.split(",")])  # fmt: skip
    parser.add_argument("--frozen-pairs", type=int, default=1000)
    parser.add_argument("--paired-pairs", type=int, default=200)
    parser.add_argument("--paired-runs", type=int, default=5)
    parser.add_argument("--sweep-tokens", type=int, default=4096)
    parser.add_argument("--generate-prompts", type=int, default=16)
    parser.add_argument("--gold-rm",
                        default=str(ROOT / "findings-work/overoptimization-policy/gold"))
    parser.add_argument("--work", default=str(ROOT / "precision-work"))
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    if not HH.exists():
        raise SystemExit(f"{HH} not found: the checks run on HH-RLHF pairs")
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else {}
    for name in args.checks.split(","):
        results[name] = CHECKS[name](args)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
