"""Paired CM beyond the convex head: last-layer influence against brute force.

Two settings, each audited twice on the same data:

- ``mlp``: frozen `minilm` features, the MLP head (AdamW, early stopping), on the demo's
  synthetic pairs (1,500 pairs, 30 users) and the shared HH pairs (grouped by prompt);
- ``lora``: MiniLM fine-tuned with LoRA (the audit's fine-tuning setup with one learning
  rate, 3e-4, to halve the cost on a CPU) on 300 synthetic pairs of 30 users.

For each: a 25-run paired audit (plan seed 0, ``--estimator paired``: last-layer
Gauss-Newton influence, damping calibrated on the audit's own runs), whose runs also give
brute-force CM; and a disjoint brute-force reference (plan seed 1, ``--reference-runs``
runs). Printed per setting:

- CM's split-half reliability (Spearman-Brown) at 5, 10 and 25 runs, paired and brute force
  from the same runs (a 5- or 10-run audit calibrates on its own runs only);
- Spearman with the reference's CM, beside the ceiling sqrt(rel_method * rel_ref) that two
  noisy measures of one quantity reach, and the share of it;
- mean CM of each against the reference's (the calibration's check on independent runs);
- wall time per run (the median time between runs' manifests) of the paired audit against
  the reference's, and for the MLP head a 25-run brute and a 25-run paired audit timed in
  turn in this process.

``--work DIR`` keeps the audits (an interrupted benchmark resumes where it stopped). Not
part of the tests.

    python benchmarks/paired_influence.py [--settings mlp lora] [--reference-runs 100]
                                          [--lora-reference-runs 50] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from helpers.cm import cm_from, reliability_at
from paired_cm import DATA

from rmlens.data import load_pairs, synthesize
from rmlens.data._synth_config import SynthConfig
from rmlens.memorization import AuditConfig, audit
from rmlens.memorization._run_folders import RunMatrices, load_matrices
from rmlens.rewards import FrozenHeadTrainer, HeadConfig, TrainConfig
from rmlens.stats import spearman

LORA = TrainConfig(epochs=4, patience=1, lr=3e-4, lr_grid=(), head_lr=2e-3)
RUNS = 25


def brute_of(m: RunMatrices) -> RunMatrices:
    """The same runs read by brute force (their p alone)."""
    return RunMatrices(m.ids, m.runs, m.p, m.member, m.val)


def per_run(out: Path) -> float:
    """Median seconds between consecutive runs' manifests (so resumed audits time too)."""
    stamps = sorted(p.stat().st_mtime for p in out.glob("runs/*/manifest.json"))
    return float(np.median(np.diff(stamps))) if len(stamps) > 2 else float("nan")


def report(name: str, paired_dir: Path, ref_dir: Path) -> None:
    ref = load_matrices(ref_dir)
    ref_cm = cm_from(ref, np.arange(len(ref.runs)))
    folds = json.loads((ref_dir / "config.json").read_text())["folds_used"]
    rel_ref = json.loads((ref_dir / "summary.json").read_text())["reliability"]["cm"]
    rel_ref = rel_ref["spearman_brown"]
    print(f"\n## {name}: reference brute force, {len(ref.runs)} runs of plan seed 1: CM "
          f"Spearman-Brown {rel_ref:.3f}, mean CM {np.nanmean(ref_cm):.4f}")  # fmt: skip
    print("method | runs | rel | rho_ref | ceiling sqrt(rel*rel_ref) | of ceiling | mean CM")
    for runs in (5, 10, RUNS):
        paired = load_matrices(paired_dir, runs)
        for label, m in (("paired", paired), ("brute, same runs", brute_of(paired))):
            cm = cm_from(m, np.arange(runs))
            rel = reliability_at(m, runs, folds)
            rho = spearman(cm, ref_cm)
            ceiling = float(np.sqrt(max(rel, 0) * max(rel_ref, 0))) if np.isfinite(rel) else np.nan
            share = rho / ceiling if ceiling > 0 else np.nan
            print(f"{label} | {runs} | {rel:.3f} | {rho:.3f} | {ceiling:.3f} | {share:.2f} | "
                  f"{np.nanmean(cm):.4f}")  # fmt: skip
    summary = json.loads((paired_dir / "summary.json").read_text())
    d = summary["damping"]
    check = d["brute_check"]
    edge = f"; {d['edge']}" if "edge" in d else ""
    print(f"calibrated damping {d['damping']:.3g} (x tr(G)/d){edge}; in-audit check: "
          f"Spearman with its own brute CM {check['spearman']:.3f}, "
          f"{check['share_of_ceiling']:.2f} of its ceiling {check['ceiling']:.3f}")  # fmt: skip
    acc = summary["rm_quality"]["held_out"]["accuracy"]["mean"]
    fit = summary["rm_quality"]["in_train"]["accuracy"]["mean"]
    paired_s, brute_s = per_run(paired_dir), per_run(ref_dir)
    print(f"accuracy in-train {fit:.3f}, held-out {acc:.3f}; wall per run (median): paired "
          f"{paired_s:.2f} s, brute {brute_s:.2f} s (ratio {paired_s / brute_s:.2f}x)")


def bench_mlp(dataset: str, reference_runs: int, work: Path) -> None:
    if dataset == "synth":
        pairs = synthesize(SynthConfig(n_pairs=1500, n_users=30, seed=0))
    elif DATA[dataset].exists():
        pairs = load_pairs(DATA[dataset])
    else:
        print(f"mlp/{dataset}: skipped, {DATA[dataset]} not found")
        return
    head = HeadConfig(head="mlp")
    cache = work / "cache"

    def trainer():
        return FrozenHeadTrainer(head, model="minilm", cache_dir=cache)

    trainer().prepare(pairs, quiet=True)  # warm the embedding cache for both audits
    base = AuditConfig(n_boot=0, head=head)
    paired, ref = work / f"mlp-{dataset}-paired", work / f"mlp-{dataset}-ref"
    audit(pairs, base.replace(runs=RUNS, seed=0, estimator="paired"), out=paired,
          trainer=trainer(), quiet=True)  # fmt: skip
    audit(pairs, base.replace(runs=reference_runs, seed=1, estimator="brute"), out=ref,
          trainer=trainer(), quiet=True)  # fmt: skip
    report(f"frozen minilm, MLP head, {dataset} ({len(pairs)} pairs)", paired, ref)
    seconds = {}
    for i, estimator in enumerate(("brute", "paired", "brute", "paired")):  # a noisy machine
        start = time.perf_counter()
        audit(pairs, base.replace(runs=RUNS, seed=0, estimator=estimator),
              out=work / f"mlp-{dataset}-timing-{i}", trainer=trainer(), quiet=True)
        seconds.setdefault(estimator, []).append(time.perf_counter() - start)
    print(f"wall of a {RUNS}-run audit (fresh directories, same plan, interleaved): paired "
          f"{min(seconds['paired']):.1f} s, brute {min(seconds['brute']):.1f} s (ratio of the "
          f"best of two: {min(seconds['paired']) / min(seconds['brute']):.2f}x)")


def bench_lora(reference_runs: int, work: Path) -> None:
    pairs = synthesize(SynthConfig(n_pairs=300, n_users=30, seed=0))
    config = AuditConfig(mode="finetune", train=LORA, n_boot=0)
    paired, ref = work / "lora-paired", work / "lora-ref"
    audit(pairs, config.replace(runs=RUNS, seed=0, estimator="paired"), out=paired, quiet=True)
    audit(pairs, config.replace(runs=reference_runs, seed=1, estimator="brute"), out=ref,
          quiet=True)
    report("minilm fine-tuned with LoRA, synthetic (300 pairs, 30 users)", paired, ref)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", nargs="+", default=["mlp", "lora"])
    parser.add_argument("--datasets", nargs="+", default=["synth", "hh"], help="mlp's data")
    parser.add_argument("--reference-runs", type=int, default=100)
    parser.add_argument("--lora-reference-runs", type=int, default=50)
    parser.add_argument("--work", type=Path, help="Keep the audits here (default: a temp dir).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        if "mlp" in args.settings:
            for dataset in args.datasets:
                bench_mlp(dataset, args.reference_runs, work)
        if "lora" in args.settings:
            bench_lora(args.lora_reference_runs, work)


if __name__ == "__main__":
    main()
