"""`rmlens mitigate` on its defaults, judged where it matters (issue 28): which objective, at
what cost, on synthetic pairs with known gold and on real pairs.

For each data set, every objective of ``rmlens mitigate`` (same plan, runs and seed) and a
table of, per objective:

- held-out accuracy and its change against bt (paired over runs), with intervals;
- |corr(reward margin, length difference)|: Pearson over each run's held-out pairs, words
  of chosen minus rejected; the mean over runs with a bootstrap interval over runs, and
  its cut against bt;
- the low-margin figures of ``compare``: accuracy on the lowest-margin tercile, CM of the
  low- minus the high-margin tercile, TG on the low-margin tercile (data with a margin);
- synthetic data: gold at the largest n of best-of-n in two candidate pools (shortcuts
  independent of quality, and anti-correlated with it), single runs, with intervals;
- the cost of the objective's training against bt: one run's ``fit_score`` on the same
  cached features, timed in this process (median of ``--repeats``), as a ratio.

Then the goal of issue 28 (held-out accuracy within 0.01 of bt, |corr| cut by 60% or more,
more gold than bt at the largest n in both pools) is checked for every objective, and for
the synthetic data the same figures of two rules that read the planted truth (the gold
quality difference, and the length difference) show what limits it.

    python benchmarks/guided.py [--runs 5] [--pairs 1500] [--users 30] [--prompts 100]
        [--responses 64] [--hh FILE] [--squality FILE] [--out DIR]

``--hh`` and ``--squality`` default to the shared data beside the checkout when present
(skipped with a reason otherwise). Prints tables; not part of the tests.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
GOAL_ACCURACY, GOAL_CUT = 0.01, 0.60


def run_mean_interval(values: np.ndarray, seed: int = 0, n_boot: int = 2000) -> tuple:
    """Mean over runs and its 95% bootstrap interval over runs (``rmlens.stats``)."""
    from rmlens.stats import bootstrap_runs, percentile_interval

    values = np.asarray(values, dtype=float)
    draws = values[bootstrap_runs(len(values), n_boot, seed)].mean(axis=1)
    return float(values.mean()), *percentile_interval(draws)


def length_correlations(audit: Path, pairs: pd.DataFrame) -> np.ndarray:
    """|Pearson(r+ - r-, words+ - words-)| over each run's held-out pairs, (n_runs,)."""
    from rmlens.data._schema import word_counts

    dl = pd.Series(word_counts(pairs.chosen) - word_counts(pairs.rejected),
                   index=pairs.id.to_numpy())  # fmt: skip
    out = []
    for run in sorted(glob.glob(str(audit / "runs" / "*"))):
        scores = pd.read_parquet(Path(run) / "scores.parquet")
        manifest = json.loads((Path(run) / "manifest.json").read_text())
        seen = set(manifest["train_ids"]) | set(manifest["val_ids"])
        held = ~scores.id.isin(seen) & np.isfinite(scores.r_chosen)
        d = (scores.r_chosen - scores.r_rejected)[held].to_numpy()
        out.append(abs(np.corrcoef(d, dl[scores.id[held]].to_numpy())[0, 1]))
    return np.array(out)


def truth_rows(pairs: pd.DataFrame) -> list[dict]:
    """Accuracy and |corr| of the two rules that read the synthetic truth, on all pairs."""
    from rmlens.data._schema import word_counts
    from rmlens.stats import pairwise_accuracy

    dl = word_counts(pairs.chosen) - word_counts(pairs.rejected)
    gold = (pairs.quality_chosen - pairs.quality_rejected).to_numpy(float)
    rows = []
    for name, d in (("rule: gold quality difference", gold), ("rule: length difference", dl)):
        accuracy = pairwise_accuracy(d)
        rows.append({"objective": name, "accuracy": f"{accuracy:.3f}",
                     "|corr|": f"{abs(np.corrcoef(d, dl)[0, 1]):.3f}"})  # fmt: skip
    return rows


def training_cost(pairs: pd.DataFrame, objectives, repeats: int) -> dict[str, float]:
    """Median seconds of one run's ``fit_score`` per objective, on the same cached features
    and the same run (the first of a 5-fold plan over the audit's groups)."""
    from rmlens.attribution._bias import objective_bias
    from rmlens.backbones import load_backbone
    from rmlens.memorization import AuditConfig
    from rmlens.memorization._runner import resolve_groups
    from rmlens.rewards import FrozenHeadTrainer

    config = AuditConfig().resolved()
    groups = resolve_groups(pairs, None)[0].to_numpy()
    labels = np.unique(groups)
    rng = np.random.default_rng(0)
    held = set(rng.choice(labels, max(1, len(labels) // 5), replace=False))
    val = set(rng.choice(sorted(set(labels) - held), max(1, len(labels) // 10), replace=False))
    index = np.arange(len(pairs))
    train = index[[g not in held and g not in val for g in groups]]
    validation = index[[g in val for g in groups]]
    bias = objective_bias(pairs, config.head.replace(objective="poe"))
    backbone = load_backbone(config.model, max_length=config.max_length)
    times = {}
    for name in objectives:
        head = config.head.replace(objective=name)
        trainer = FrozenHeadTrainer(head, backbone=backbone, bias=bias)
        kept = trainer.prepare(pairs, quiet=True)
        fit, val_fit = train[kept[train]], validation[kept[validation]]
        spent = []
        for _ in range(repeats):
            start = time.perf_counter()
            trainer.fit_score(fit, seed=1, val_index=val_fit)
            spent.append(time.perf_counter() - start)
        times[name] = float(np.median(spent))
    return times


def gold_figures(path: Path) -> dict[str, tuple]:
    """Each audit's single-run gold at the largest n, with its interval."""
    summary = json.loads(path.read_text())["summary"]
    return {row["audit"]: (row["gold_at_max_n"], row.get("gold_at_max_n_lo"),
                           row.get("gold_at_max_n_hi"))
            for row in summary if row["kind"] == "runs"}  # fmt: skip


def figure(value, lo=None, hi=None, signed: bool = False) -> str:
    if value is None or not np.isfinite(value):
        return "-"
    fmt = "{:+.3f}" if signed else "{:.3f}"
    text = fmt.format(value)
    if lo is not None and hi is not None and np.isfinite(lo) and np.isfinite(hi):
        text += f" [{fmt.format(lo)}, {fmt.format(hi)}]"
    return text


def table_of(out: Path, pairs: pd.DataFrame, pools: dict[str, Path], times: dict) -> tuple:
    """One row per objective (module docstring), and whether each reached the goal."""
    compare = pd.read_parquet(out / "compare.parquet")
    kept = json.loads((out / "mitigate.json").read_text())["objectives"]
    cell = {(r.audit, r.metric): (r.value, r.lo, r.hi) for r in compare.itertuples()}
    corr = {name: length_correlations(out / name, pairs) for name in kept}
    base = run_mean_interval(corr["bt"])[0]
    gold = {pool: gold_figures(path) for pool, path in pools.items()}
    rows, goal = [], {}
    for name in kept:
        c = run_mean_interval(corr[name])
        cut = 1 - c[0] / base
        row = {"objective": name,
               "accuracy": figure(*cell[(name, "heldout_accuracy")]),
               "vs bt": figure(*cell.get((name, "heldout_accuracy_vs_baseline"),
                                         (np.nan,) * 3), signed=True),
               "|corr|": figure(*c), "cut": f"{cut:+.0%}"}  # fmt: skip
        for metric, header in (("slice_low_margin", "low-margin acc"),
                               ("cm_margin_low_minus_high", "CM low-high"),
                               ("tg_low_margin", "TG low")):  # fmt: skip
            if (name, metric) in cell:
                row[header] = figure(*cell[(name, metric)], signed=metric.startswith("cm_"))
        more_gold = True
        for pool, figures in gold.items():
            g = figures.get(name, (np.nan,) * 3)
            row[f"gold@N {pool}"] = figure(*g)
            more_gold &= bool(g[0] > figures["bt"][0])
        row["train cost"] = f"{times[name] / times['bt']:.1f}x"
        rows.append(row)
        accuracy = cell[(name, "heldout_accuracy")][0] - cell[("bt", "heldout_accuracy")][0]
        goal[name] = {"accuracy": accuracy >= -GOAL_ACCURACY, "cut": cut >= GOAL_CUT,
                      "gold": more_gold if gold else None}  # fmt: skip
    return pd.DataFrame(rows), goal


def audit_set(name: str, pairs: pd.DataFrame, out: Path, args, pools=None) -> None:
    import rmlens

    start = time.perf_counter()
    rmlens.mitigate(pairs, out=out, runs=args.runs, quiet=True)
    kept = json.loads((out / "mitigate.json").read_text())["objectives"]
    paths = {}
    for pool, path in (pools or {}).items():
        target = out / f"bon-{pool}"
        rmlens.overoptimize([out / o for o in kept], path, out=target, labels=tuple(kept),
                            quiet=True)  # fmt: skip
        paths[pool] = target / "overoptimization.json"
    elapsed = time.perf_counter() - start
    times = training_cost(pairs, kept, args.repeats)
    table, goal = table_of(out, pairs, paths, times)
    print(f"\n## {name}: {len(pairs)} pairs, {args.runs} runs; mitigate (and best-of-n) "
          f"{elapsed:.0f} s; a bt run's head {times['bt']:.2f} s")
    if "quality_chosen" in pairs:
        table = pd.concat([table, pd.DataFrame(truth_rows(pairs))], ignore_index=True)
    print(table.fillna("").to_string(index=False))
    reached = [o for o, g in goal.items() if o != "bt" and all(v is not False for v in g.values())]
    print(f"goal (accuracy within {GOAL_ACCURACY} of bt, |corr| cut >= {GOAL_CUT:.0%}"
          + (", more gold than bt at the largest n in every pool" if pools else "")
          + f"): {', '.join(reached) if reached else 'reached by no objective'}")
    for o, g in goal.items():
        if o != "bt":
            print(f"  {o}: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in g.items()
                                         if v is not None))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=1500)
    parser.add_argument("--users", type=int, default=30)
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--responses", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hh", type=Path, default=SHARED / "hh-rlhf-harmless-base-test.jsonl.gz")
    parser.add_argument("--squality", type=Path, default=SHARED / "squality-human-eval-pairs.jsonl")
    parser.add_argument("--out", type=Path, help="keep the audits here (default: a temp dir)")
    parser.add_argument("--only", default="synthetic,hh,squality")
    args = parser.parse_args()

    import rmlens
    from rmlens.data import CandidatesConfig, generate_candidates, load_pairs, save_pairs

    with tempfile.TemporaryDirectory() as tmp:
        root = args.out or Path(tmp)
        os.environ.setdefault("RMLENS_CACHE", str(root / "cache"))
        only = args.only.split(",")
        if "synthetic" in only:
            pairs = rmlens.synthesize(rmlens.SynthConfig(n_pairs=args.pairs, n_users=args.users))
            pools = {}
            for policy in ("independent", "anticorrelated"):
                pool = generate_candidates(CandidatesConfig(
                    n_prompts=args.prompts, n_responses=args.responses, policy=policy))
                pools[policy] = save_pairs(pool, root / f"pool-{policy}.jsonl")
            audit_set("synthetic", pairs, root / "synthetic", args, pools)
        for name, path in (("hh", args.hh), ("squality", args.squality)):
            if name not in only:
                continue
            if not path.exists():
                print(f"\n## {name}: skipped ({path} not found)")
                continue
            audit_set(name, load_pairs(path), root / name, args)


if __name__ == "__main__":
    main()
