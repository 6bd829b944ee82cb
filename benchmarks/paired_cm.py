"""Reliable per-pair CM from a handful of runs: the paired estimator against brute force.

For each dataset (the shared HH pairs grouped by prompt, the shared SQuALITY pairs grouped
by annotator, the demo's synthetic pairs grouped by user), with frozen `minilm` features:

- three audits of the same 25-run plan (5 repeats x 5 folds, seed 0): brute force with
  the early-stopped AdamW linear head (rmlens before the paired estimator), brute force with
  the convex logistic head, and the paired estimator with the convex head (its default
  exactness check, 1 group per run);
- CM's split-half reliability (Spearman-Brown) at 5, 10 and 25 runs, from the first runs of
  each audit (a plan's first R runs are the R-run plan). Brute force needs two whole
  repeats; the paired estimator gives every pair both sides in every run, so its halves may
  split single runs (5 runs: runs 0, 2, 4 against 1, 3);
- a disjoint brute-force reference: the convex head over another plan (seed 1) of
  ``--reference-runs`` runs (default 200), its own reliability rel_ref, and each audit's
  Spearman with it beside the ceiling sqrt(rel_ref);
- wall time of each 25-run audit (features cached beforehand, so every audit reads the same
  cache), and the ratio paired / brute (today's head);
- the exactness of the paired counterfactuals against exact refits: the paired audit again
  with ``--check-exact 10`` (10 groups refitted per run, 250 in all).

Prints one table per dataset; not part of the tests.

    python benchmarks/paired_cm.py [--datasets hh squality synth] [--reference-runs 200]
                                   [--cache DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from helpers.cm import cm_from, reliability_at

from rmlens.data import load_pairs, synthesize
from rmlens.data._synth_config import SynthConfig
from rmlens.memorization import AuditConfig, audit
from rmlens.memorization._run_folders import load_matrices
from rmlens.rewards import FrozenHeadTrainer, HeadConfig
from rmlens.stats import spearman

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DATA = {
    "hh": SHARED / "hh-rlhf-harmless-base-test.jsonl.gz",
    "squality": SHARED / "squality-human-eval-pairs.jsonl",
}
METHODS = {
    "brute, AdamW linear head": dict(estimator="brute", head=HeadConfig(head="linear")),
    "brute, logistic head": dict(estimator="brute", head=HeadConfig(head="logistic")),
    "paired, logistic head": dict(estimator="paired", head=HeadConfig(head="logistic")),
}  # fmt: skip
CHECKS = 10  # groups refitted per run for the exactness figures (an audit checks 1 by default)


def load(name: str):
    if name == "synth":
        return synthesize(SynthConfig(n_pairs=1500, n_users=30, seed=0))
    path = DATA[name]
    if not path.exists():
        return None
    return load_pairs(path)


def run_audit(pairs, cache: Path, out: Path, runs: int, seed: int, **kw) -> tuple[float, Path]:
    config = AuditConfig(runs=runs, seed=seed, n_boot=0, **kw)
    trainer = FrozenHeadTrainer(config.head, model="minilm", cache_dir=cache)
    start = time.perf_counter()
    audit(pairs, config, out=out, trainer=trainer, quiet=True)
    return time.perf_counter() - start, out


def bench(name: str, reference_runs: int, root: Path, cache: Path) -> None:
    pairs = load(name)
    if pairs is None:
        print(f"{name}: skipped, {DATA[name]} not found")
        return
    trainer = FrozenHeadTrainer(model="minilm", cache_dir=cache)
    start = time.perf_counter()
    trainer.prepare(pairs, quiet=True)  # warm the embedding cache for every audit below
    print(f"\n## {name}: {len(pairs)} pairs (encoding {time.perf_counter() - start:.0f} s)")

    ref_time, ref_dir = run_audit(pairs, cache, root / f"{name}-ref", reference_runs, 1,
                                  estimator="brute", head=HeadConfig(head="logistic"))  # fmt: skip
    ref = load_matrices(ref_dir)
    ref_cm = cm_from(ref, np.arange(len(ref.runs)))
    rel_ref = json.loads((ref_dir / "summary.json").read_text())["reliability"]["cm"]
    ceiling = float(np.sqrt(rel_ref["spearman_brown"]))
    print(f"reference: brute force, logistic head, {reference_runs} runs of plan seed 1 "
          f"({ref_time:.0f} s): CM Spearman-Brown {rel_ref['spearman_brown']:.3f}, "
          f"ceiling sqrt(rel_ref) {ceiling:.3f}")  # fmt: skip

    header = ("method", "rel@5", "rel@10", "rel@25", "rho_ref@5", "rho_ref@25", "of ceiling@5",
              "held-out acc", "mean CM", "wall 25 runs")  # fmt: skip
    print(" | ".join(header))
    times = {}
    for i, (label, kw) in enumerate(METHODS.items()):
        seconds, out = run_audit(pairs, cache, root / f"{name}-{i}", 25, 0, **kw)
        times[label] = seconds
        m = load_matrices(out)
        summary = json.loads((out / "summary.json").read_text())
        folds = json.loads((out / "config.json").read_text())["folds_used"]
        rels = [reliability_at(m, r, folds) for r in (5, 10, 25)]
        rho5 = spearman(cm_from(m, np.arange(5)), ref_cm)
        rho25 = spearman(cm_from(m, np.arange(25)), ref_cm)
        acc = summary["rm_quality"]["held_out"]["accuracy"]["mean"]
        print(" | ".join([label, *(f"{r:.3f}" for r in rels), f"{rho5:.3f}", f"{rho25:.3f}",
                          f"{rho5 / ceiling:.2f}", f"{acc:.3f}", f"{summary['mean']['cm']:.4f}",
                          f"{seconds:.1f} s"]))  # fmt: skip
        if label.startswith("paired"):
            _, checked = run_audit(pairs, cache, root / f"{name}-exact", 25, 0,
                                   check_exact=CHECKS, **kw)  # fmt: skip
            e = json.loads((checked / "summary.json").read_text())["exactness"]
            print(f"  exactness ({e['groups']} refitted groups, {e['pairs']} pairs): "
                  f"|p_cf - p_refit| median {e['median_abs_error']:.2e}, p90 "
                  f"{e['p90_abs_error']:.2e}, max {e['max_abs_error']:.2e}; true effect median "
                  f"{e['median_abs_effect']:.3f}; effect Spearman {e['effect_spearman']:.4f}")
        if label.startswith("paired"):
            print(f"  estimator note: {summary['estimator_note']}")
    base = times["brute, AdamW linear head"]
    print(f"wall ratio paired / brute (AdamW linear head) at 25 runs: "
          f"{times['paired, logistic head'] / base:.2f}x; paired / brute (logistic head): "
          f"{times['paired, logistic head'] / times['brute, logistic head']:.2f}x")
    default = AuditConfig()
    from rmlens.memorization._paired import choose_estimator, group_share
    from rmlens.memorization._runner import resolve_groups

    groups, _, _ = resolve_groups(pairs, None)
    chosen, why, _ = choose_estimator(default, group_share(groups, default, 5))
    print(f"default estimator here: {chosen} ({why})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["hh", "squality", "synth"])
    parser.add_argument("--reference-runs", type=int, default=200)
    parser.add_argument("--cache", type=Path, help="Embedding cache (default: a fresh one).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets:
            bench(name, args.reference_runs, Path(tmp), args.cache or Path(tmp) / "cache")


if __name__ == "__main__":
    main()
