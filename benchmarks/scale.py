"""How the audit's bookkeeping scales: plan, estimators and the finish step, no model.

For 10^4, 10^5 and 10^6 pairs and R = 25 runs, prints wall time and peak memory of:

- plan: the run plan of the groups (make_plan), the (runs, pairs) membership the runner
  derives from it, every run's training indices, and plan.parquet written;
- estimators: TM, TG, CM and their 95% intervals with 1,000 bootstrap resamples of the runs
  (memorization_scores) from a (pairs, runs) probability and membership matrix;
- finish: the whole end of an audit from run files on disk (25 scores.parquet and
  manifest.json with synthetic scores): load, estimators, memorization.parquet, the map,
  summary.json.

Each step runs in a forked child; its peak memory is the child's peak resident set above
its resident set when the step starts (Linux /proc/self), so inputs built before the step
are not counted. Every pair is its own group by default (grouping by prompt with unique
prompts: the largest plan); --pairs-per-group 10 gives users with 10 pairs each.

    python benchmarks/scale.py [--sizes 10000 100000 1000000] [--runs 25] [--n-boot 1000]
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from rmlens.memorization import AuditConfig, make_plan, memorization_scores
from rmlens.memorization._run_folders import RunOutput, write_run
from rmlens.memorization._runner import finish, membership_matrix


def _status(key: str) -> int:
    """A /proc/self/status memory line in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) // 1024
    raise KeyError(key)


def _child(conn, step, args) -> None:
    inputs = step.setup(*args)
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak resident set (VmHWM) to the current one
    base = _status("VmRSS")
    start = time.perf_counter()
    step.run(*inputs)
    seconds = time.perf_counter() - start
    conn.send((seconds, _status("VmHWM") - base))
    conn.close()


def measure(step, *args) -> tuple[float, int]:
    """(seconds, peak MiB) of ``step.run(*step.setup(*args))`` in a forked child."""
    parent, child = mp.get_context("fork").Pipe()
    proc = mp.get_context("fork").Process(target=_child, args=(child, step, args))
    proc.start()
    result = parent.recv()
    proc.join()
    return result


def synthetic_pairs(n: int, per_group: int) -> tuple[pd.DataFrame, pd.Series]:
    ids = np.char.add("p", np.char.zfill(np.arange(n).astype(str), 7)).astype(object)
    pairs = pd.DataFrame(
        {
            "id": ids,
            "prompt": np.char.add("prompt ", np.arange(n).astype(str)).astype(object),
            "chosen": "a helpful answer",
            "rejected": "a rude answer",
        }
    )
    groups = pd.Series(np.char.add("g", (np.arange(n) // per_group).astype(str)).astype(object))
    return pairs, groups


class Plan:
    @staticmethod
    def setup(n, per_group, runs, n_boot, folder):
        pairs, groups = synthetic_pairs(n, per_group)
        return groups, runs, folder

    @staticmethod
    def run(groups, runs, folder):
        plan = make_plan(groups, n_runs=runs, n_folds=5, seed=0)
        member = membership_matrix(plan, groups, runs)
        kept = np.ones(len(groups), dtype=bool)
        for r in range(runs):
            np.flatnonzero(kept & member[r])
        plan.to_parquet(Path(folder) / "plan.parquet", index=False)


class Estimators:
    @staticmethod
    def setup(n, per_group, runs, n_boot, folder):
        _, groups = synthetic_pairs(n, per_group)
        member = membership_matrix(make_plan(groups, n_runs=runs), groups, runs).T.copy()
        rng = np.random.default_rng(0)
        p = rng.uniform(0.2, 0.9, size=(n, runs)) + 0.08 * member  # (n_pairs, n_runs)
        return p, member, n_boot

    @staticmethod
    def run(p, member, n_boot):
        memorization_scores(p, member, n_boot=n_boot, seed=0)


class Finish:
    @staticmethod
    def setup(n, per_group, runs, n_boot, folder):
        pairs, groups = synthetic_pairs(n, per_group)
        config = AuditConfig(runs=runs, n_boot=n_boot)
        return pairs, groups, config, Path(folder)

    @staticmethod
    def run(pairs, groups, config, out):
        finish(pairs, groups, config, out, quiet=True)


def write_runs(out: Path, n: int, per_group: int, runs: int) -> None:
    """Synthetic run files, as the driver writes them (scores, then the manifest)."""
    pairs, groups = synthetic_pairs(n, per_group)
    plan = make_plan(groups, n_runs=runs)
    member = membership_matrix(plan, groups, runs)
    ids = pairs.id.to_numpy()
    kept = np.ones(n, dtype=bool)
    rng = np.random.default_rng(1)
    for r in range(runs):
        r_c = rng.normal(size=n).astype(np.float32) + 0.5 * member[r]
        r_r = rng.normal(size=n).astype(np.float32)
        index = np.flatnonzero(member[r])
        manifest = {"run": r, "seed": r, "n_train": int(len(index)),
                    "train_ids": ids[index].tolist(), "metrics": {}}
        write_run(out, r, ids, kept, RunOutput(r_c, r_r, {}), manifest)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--pairs-per-group", type=int, default=1)
    args = parser.parse_args()
    print(f"{args.runs} runs, {args.n_boot} bootstrap resamples, {args.pairs_per_group} "
          f"pair(s) per group, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'pairs':>10} {'step':<11} {'seconds':>9} {'peak MiB':>9}")
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            common = (n, args.pairs_per_group, args.runs, args.n_boot, str(folder))
            for name, step in (("plan", Plan), ("estimators", Estimators)):
                seconds, peak = measure(step, *common)
                print(f"{n:>10,} {name:<11} {seconds:>9.1f} {peak:>9,}", flush=True)
            write_runs(folder, n, args.pairs_per_group, args.runs)
            seconds, peak = measure(Finish, *common)
            print(f"{n:>10,} {'finish':<11} {seconds:>9.1f} {peak:>9,}", flush=True)


if __name__ == "__main__":
    main()
