"""How far the one-checkpoint audit follows paired runs, measured on one dataset (issue 58).

Trains one RM with ``rmlens train``'s defaults (LoRA, at most 4 epochs at 3e-4 with early
stopping on a 0.2 evaluation share) and audits it alone with ``check_runs`` K: K paired runs
of the same plan in the RM's own regime (the regimes matched). Then, unless
``--no-mismatch``, a second RM trained in another regime, ``rmlens train``'s former defaults
(2 epochs at 5e-4 on every pair, no evaluation split), audited alone and compared with the
same check runs (the regimes not matched, as when a user's RM was trained otherwise than
the paired runs). Prints and writes (``--json``) each RM's accuracy, CM's Spearman with the
check runs (95% bootstrap over groups), its share of their reliability, both audits' margin
and group-size links and the seconds each step took. Not part of the tests.

    python benchmarks/check_runs.py --data pairs.jsonl --group-by prompt --runs 3
    python benchmarks/check_runs.py --data hh.jsonl.gz --pairs 600 --runs 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from rmlens._io import strict_json
from rmlens.data import load_pairs
from rmlens.hub import train
from rmlens.memorization import AuditConfig, audit_rm
from rmlens.memorization._check_runs import runs_agreement
from rmlens.rewards import TrainConfig
from rmlens.stats import group_draws, percentile_interval, spearman


def shortest(pairs: pd.DataFrame, n: int | None) -> pd.DataFrame:
    if not n:
        return pairs
    size = pairs.prompt.map(str).str.len() + pairs.chosen.map(str).str.len()
    size += pairs.rejected.map(str).str.len()
    return pairs.loc[size.sort_values(kind="stable").index[:n]].reset_index(drop=True)


def timed(step, *args, **kwargs):
    start = time.perf_counter()
    value = step(*args, **kwargs)
    return value, time.perf_counter() - start


def seed_draws(pairs, cfg, audit_cfg, table, out: Path, seeds: int) -> dict:
    """One training draw against several: RMs trained as the first at seeds 1 to
    ``seeds - 1``, each audited alone; the one-checkpoint audit's own reliability (the mean
    Spearman of CM between seeds), each one's and the seeds' mean CM's Spearman with the check
    runs, and the agreement corrected by both reliabilities, rho / sqrt(rel_one rel_check)."""
    cms = {0: table.set_index("id").cm}
    for seed in range(1, seeds):
        train(pairs, cfg.replace(seed=seed), out=out / f"rm-seed{seed}", quiet=True)
        other = audit_rm(pairs, out / f"rm-seed{seed}", audit_cfg, out=out / f"audit-seed{seed}",
                         quiet=True)  # fmt: skip
        cms[seed] = other.set_index("id").cm
    check_dir = out / "audit" / "check"
    frame = pd.DataFrame(cms)
    frame["check"] = pd.read_parquet(check_dir / "memorization.parquet").set_index("id").cm
    frame = frame.dropna()  # each seed holds out its own evaluation split
    x = frame.to_numpy()
    draws = group_draws(table.set_index("id").group.reindex(frame.index).astype(str).to_numpy(),
                        400, 0)  # fmt: skip

    def span(f) -> dict:
        lo, hi = percentile_interval([f(i) for i in draws])
        return {"spearman": f(np.arange(len(x))), "lo": lo, "hi": hi}

    pairs_of = [(a, b) for a in range(seeds) for b in range(a + 1, seeds)]
    between = [span(lambda i, a=a, b=b: spearman(x[i, a], x[i, b])) for a, b in pairs_of]
    alone = [span(lambda i, a=a: spearman(x[i, a], x[i, -1])) for a in range(seeds)]
    rel_one = float(np.mean([b["spearman"] for b in between]))
    rel_check = json.loads((check_dir / "summary.json").read_text())["reliability"]["cm"][
        "spearman_brown"]
    rho = float(np.mean([a["spearman"] for a in alone]))
    return {"n_pairs": int(len(x)), "seeds": seeds, "between_seeds": between,
            "each_with_check": alone, "reliability_one": rel_one, "reliability_check": rel_check,
            "mean_with_check": span(lambda i: spearman(x[i, :-1].mean(1), x[i, -1])),
            "corrected": rho / float(np.sqrt(rel_one * rel_check))}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--pairs", type=int, default=0, help="the N shortest pairs (0: all)")
    parser.add_argument("--group-by", default=None)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--runs", type=int, default=3, help="check runs K")
    parser.add_argument("--no-mismatch", action="store_true")
    parser.add_argument("--seeds", type=int, default=1,
                        help="RMs trained at seeds 0 to N-1, each audited alone (one draw "
                             "against several)")  # fmt: skip
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--out", type=Path, default=Path("check-runs-bench"))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    pairs = shortest(load_pairs(args.data, drop_invalid=True), args.pairs)
    cfg = TrainConfig(model=args.model, max_length=args.max_length, precision=args.precision)
    _, t_train = timed(train, pairs, cfg, out=args.out / "rm", quiet=True)
    audit_cfg = AuditConfig(group_by=args.group_by)
    table, t_audit = timed(audit_rm, pairs, args.out / "rm", audit_cfg, out=args.out / "audit",
                           check_runs=args.runs, quiet=True)  # fmt: skip
    summary = json.loads((args.out / "audit" / "summary.json").read_text())
    history = json.loads((args.out / "rm" / "history.json").read_text())
    result = {
        "data": args.data.name, "pairs": len(pairs), "model": args.model,
        "groups": int(table.group.nunique()), "train_seconds": t_train,
        "audit_seconds": t_audit, "epochs_trained": len(history),
        "rm_quality": summary.get("rm_quality"), "matched": summary["check"],
        "checkpoint_links": summary.get("links"),
    }  # fmt: skip
    if not args.no_mismatch:
        former = cfg.replace(epochs=2, lr=5e-4, eval_fraction=0.0, patience=0)
        _, t_former = timed(train, pairs, former, out=args.out / "rm-former", quiet=True)
        other, _ = timed(audit_rm, pairs, args.out / "rm-former", audit_cfg,
                         out=args.out / "audit-former", quiet=True)  # fmt: skip
        other_summary = json.loads((args.out / "audit-former" / "summary.json").read_text())
        check_dir = args.out / "audit" / "check"
        result["mismatched"] = runs_agreement(
            other, pd.read_parquet(check_dir / "memorization.parquet"), other_summary,
            json.loads((check_dir / "summary.json").read_text()))  # fmt: skip
        result["mismatched"].update(
            regime="rmlens train's former defaults: 2 epochs at 5e-4 on every pair",
            train_seconds=t_former, rm_quality=other_summary.get("rm_quality"))  # fmt: skip
    if args.seeds > 1:
        result["seeds"] = seed_draws(pairs, cfg, audit_cfg, table, args.out, args.seeds)
    text = strict_json(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
