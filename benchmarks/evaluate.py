"""`rmlens evaluate` of an audit's runs on the audit's own pairs, timed against the audit.

A synthetic audit (``rmlens.synthesize``, ``--pairs`` pairs, ``minilm``, ``--runs`` runs)
from a cold embedding cache is the baseline. Then ``evaluate`` of its runs (an ensemble,
cross-fitted on its own pairs: the CLI's ``rmlens evaluate --rm AUDIT --data PAIRS``) runs
with:

- the default settings (the probes edit a seeded sample of 200 pairs);
- ``--calibrate length`` (the same sample);
- ``--probe-pairs all``;
- ``--probe-pairs 1000``, the old default (with ``--old-default``).

Each starts from the cache as the audit left it (the pairs' texts encoded, none of the
probes' edits), loads the RM as the command does, and is printed with its wall and CPU
seconds, the texts it encoded and its ratios to the cold audit measured in this process
(CPU seconds vary less than wall time on a shared machine); a last line reruns the default
with the probes' edits cached. Goal: evaluate (default and calibrated) within 1.5x the
cold audit's wall time. Not part of the tests.

    python benchmarks/evaluate.py [--pairs 1500] [--runs 10] [--old-default]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

GOAL = 1.5


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1500)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument(
        "--old-default",
        action="store_true",
        help="Also time --probe-pairs 1000 (slow: 16,000 edited texts).",
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # the audit's notes on a small synthetic set
    tmp = Path(tempfile.mkdtemp(prefix="rmlens-bench-evaluate-"))
    cache, after_audit = tmp / "cache", tmp / "cache-after-audit"
    os.environ["RMLENS_CACHE"] = str(cache)  # before rmlens reads it

    import rmlens
    import rmlens.backbones._featurize as featurize_module
    from rmlens.data import SynthConfig, synthesize

    encoded = [0]
    original = featurize_module.encode_ids

    def counting(backbone, seqs, **kw):
        encoded[0] += len(seqs)
        return original(backbone, seqs, **kw)

    featurize_module.encode_ids = counting
    pairs = synthesize(SynthConfig(n_pairs=args.pairs, seed=0))
    audit_dir = tmp / "audit"
    _, base_wall, base_cpu = timed(
        lambda: rmlens.audit(pairs, out=audit_dir, runs=args.runs, model="minilm", quiet=True)
    )
    shutil.copytree(cache, after_audit)
    print(
        f"{len(pairs)} pairs, {args.runs} runs, minilm, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(f"{'step':<34} {'wall s':>8} {'CPU s':>8} {'encoded':>8} {'x wall':>7} {'x CPU':>7}")
    print(
        f"{'cold audit (baseline)':<34} {base_wall:>8.1f} {base_cpu:>8.1f} {encoded[0]:>8,} "
        f"{1:>7.2f} {1:>7.2f}",
        flush=True,
    )
    cases = [("evaluate (default: 200 pairs)", {}),
             ("evaluate --calibrate length", {"calibrate": "length"}),
             ("evaluate --probe-pairs all", {"probe_pairs": "all"})]  # fmt: skip
    if args.old_default:
        cases.append(("evaluate --probe-pairs 1000 (old)", {"probe_pairs": 1000}))
    ratios = {}
    for name, settings in cases + [("evaluate (default, edits cached)", None)]:
        if settings is not None:  # the cache as the audit left it
            shutil.rmtree(cache)
            shutil.copytree(after_audit, cache)
        encoded[0] = 0
        metrics, wall, cpu = timed(lambda s=settings: rmlens.evaluate(
            pairs, rm=audit_dir, out=tmp / "eval", quiet=True, **(s or {})))  # fmt: skip
        ratios[name] = wall / base_wall
        print(
            f"{name:<34} {wall:>8.1f} {cpu:>8.1f} {encoded[0]:>8,} {wall / base_wall:>7.2f} "
            f"{cpu / base_cpu:>7.2f}",
            flush=True,
        )
    assert metrics["cross_fitted"]["n_pairs"] > 0
    worst = max(ratios[n] for n, _ in cases[:2])
    print(
        f"goal: evaluate (default and calibrated) within {GOAL}x the cold audit: "
        f"{'reached' if worst <= GOAL else 'missed'} ({worst:.2f}x)"
    )
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
