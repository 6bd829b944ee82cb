"""`rmlens evaluate` of an audit's runs on the audit's own pairs, timed against the audit.

A synthetic audit (``rmlens.synthesize``, ``--pairs`` pairs, ``minilm``, ``--runs`` runs)
from a cold embedding cache is the baseline. Then ``evaluate`` of its runs (an ensemble,
cross-fitted on its own pairs: the CLI's ``rmlens evaluate --rm AUDIT --data PAIRS``) runs
with:

- the default settings (the probes edit a seeded sample of 200 pairs), then the same again
  with the probes' edits cached;
- the default settings with the probes scored one (probe, side) at a time, as before they
  were scored in one length-sorted pass (``run_probes``): the same texts, more padding;
- ``--calibrate length`` (the same sample);
- ``--probe-pairs all``;
- ``--probe-pairs 1000``, the old default (with ``--old-default``).

Each but the cached rerun starts from the cache as the audit left it (the pairs' texts
encoded, none of the probes' edits) and loads the RM as the command does. Each line gives
wall and CPU seconds, the texts encoded and the ratios to the cold audit, all measured in
this process. On a shared machine both vary with the load, so the audit, the default and
the calibrated evaluate run ``--repeats`` times, interleaved, and keep their fastest time.
Goals: evaluate (default and calibrated) within 1.5x the cold audit's wall time, and under
2 minutes on an HH-sized file (``--data``: audit your own pairs file instead of synthetic
pairs; ``--skip-all`` leaves out the slow ``--probe-pairs all``). Not part of the tests.

    python benchmarks/evaluate.py [--pairs 1500] [--runs 10] [--repeats 2] [--old-default]
    python benchmarks/evaluate.py --data pairs.jsonl.gz --runs 6 --repeats 1 --skip-all
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
MINUTES = 2.0


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1500)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--old-default",
        action="store_true",
        help="Also time --probe-pairs 1000 (slow: 16,000 edited texts).",
    )
    parser.add_argument("--data", help="Audit this pairs file instead of synthetic pairs.")
    parser.add_argument("--skip-all", action="store_true", help="Leave out --probe-pairs all.")
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
    if args.data:
        pairs = rmlens.load_pairs(args.data)
    else:
        pairs = synthesize(SynthConfig(n_pairs=args.pairs, seed=0))
    best: dict[str, tuple[float, float, int]] = {}

    def step(name, fn, *, start=None):
        """Time fn() from the cache as the folder ``start`` holds it ("empty": cold; None:
        as it is); keep the fastest wall time of the repeats."""
        if start is not None:
            shutil.rmtree(cache, ignore_errors=True)
            if start == "empty":
                cache.mkdir()
            else:
                shutil.copytree(start, cache)
        encoded[0] = 0
        result, wall, cpu = timed(fn)
        if name not in best or wall < best[name][0]:
            best[name] = (wall, cpu, encoded[0])
        return result

    def evaluation(**settings):
        return lambda: rmlens.evaluate(pairs, rm=tmp / "audit0", out=tmp / "eval", quiet=True,
                                       **settings)  # fmt: skip

    def probes_one_at_a_time():
        import rmlens.evaluation._evaluate as evaluate_module

        one_pass = evaluate_module.run_probes
        evaluate_module.run_probes = run_probes_one_at_a_time
        try:
            return evaluation()()
        finally:
            evaluate_module.run_probes = one_pass

    audit = "cold audit (baseline)"
    default, calibrated = "evaluate (default: 200 pairs)", "evaluate --calibrate length"
    before = "evaluate, probes one at a time"
    for k in range(args.repeats):
        step(audit, start="empty", fn=lambda k=k: rmlens.audit(
            pairs, out=tmp / f"audit{k}", runs=args.runs, model="minilm", quiet=True))  # fmt: skip
        if k == 0:
            shutil.copytree(cache, after_audit)
        one_pass = step(default, evaluation(), start=after_audit)
        separate = step(before, probes_one_at_a_time, start=after_audit)
        step(calibrated, evaluation(calibrate="length"), start=after_audit)
    step("evaluate (default, edits cached)", evaluation())  # after the calibrated one
    names = [audit, default, before, calibrated, "evaluate (default, edits cached)"]
    shifts = [abs(a["mean_shift"] - b["mean_shift"])
              for a, b in zip(one_pass["probes"], separate["probes"], strict=True)]  # fmt: skip
    more = [] if args.skip_all else [("evaluate --probe-pairs all", {"probe_pairs": "all"})]
    if args.old_default:
        more.append(("evaluate --probe-pairs 1000 (old)", {"probe_pairs": 1000}))
    for name, settings in more:
        step(name, evaluation(**settings), start=after_audit)
        names.append(name)
    assert one_pass["cross_fitted"]["n_pairs"] > 0  # the runs' own pairs, held out

    print(
        f"{len(pairs)} pairs ({args.data or 'synthetic'}), {args.runs} runs, minilm, "
        f"{os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}, fastest of {args.repeats} for the first three"
    )
    print(f"{'step':<34} {'wall s':>8} {'CPU s':>8} {'encoded':>8} {'x wall':>7} {'x CPU':>7}")
    base_wall, base_cpu, _ = best[audit]
    for name in names:
        wall, cpu, n = best[name]
        print(
            f"{name:<34} {wall:>8.1f} {cpu:>8.1f} {n:>8,} {wall / base_wall:>7.2f} "
            f"{cpu / base_cpu:>7.2f}"
        )
    worst = max(best[n][0] for n in (default, calibrated))
    print(
        f"goal: evaluate (default and calibrated) within {GOAL}x the cold audit: "
        f"{'reached' if worst / base_wall <= GOAL else 'missed'} ({worst / base_wall:.2f}x); "
        f"under {MINUTES:g} minutes: {'reached' if worst <= 60 * MINUTES else 'missed'} "
        f"({worst / 60:.2f} min)"
    )
    print(f"one pass vs one probe at a time: {best[default][0] / best[before][0]:.2f}x wall; "
          f"probe mean shifts differ by at most {max(shifts):.1e} (float32 batching)")
    shutil.rmtree(tmp, ignore_errors=True)


def run_probes_one_at_a_time(rm, pairs, probes, *, r_chosen, r_rejected, quiet,
                             member_weights):  # fmt: skip
    """``run_probes`` as it was: each (probe, side) scored on its own."""
    import pandas as pd

    from rmlens.evaluation import probe_effects, resolve_probes
    from rmlens.evaluation._probes import SIDES, summarize_effects

    rows = [summarize_effects(probe_effects(rm, pairs, probe, side, r_chosen=r_chosen,
                                            r_rejected=r_rejected,
                                            member_weights=member_weights), probe.name, side)
            for probe in resolve_probes(probes) for side in SIDES]  # fmt: skip
    return pd.DataFrame(rows)


if __name__ == "__main__":
    main()
