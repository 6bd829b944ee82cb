"""How far the one-checkpoint audit follows paired runs, measured on one dataset (issue 58).

Trains one RM with ``rmlens train``'s defaults (LoRA, at most 4 epochs at 3e-4 with early
stopping on a 0.2 evaluation share) and audits it alone with ``check_runs`` K: K paired runs
of the same plan in the RM's own regime. Then, unless ``--no-mismatch``, a paired audit of
the same pairs at the audit's own defaults (the rate chosen per run from 1e-4 and 3e-4 on
validation groups), ``--mismatch-runs`` runs: the regimes not matched. Prints and writes
(``--json``) the RM's accuracy, CM's Spearman with each (95% bootstrap over groups), the
share of what the paired side's reliability allows, the margin and group-size links of each
audit and the seconds each step took. Not part of the tests.

    python benchmarks/check_runs.py --data pairs.jsonl --group-by prompt --runs 3
    python benchmarks/check_runs.py --data hh.jsonl.gz --pairs 600 --runs 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pandas as pd

from rmlens._io import strict_json
from rmlens.data import load_pairs
from rmlens.hub import train
from rmlens.memorization import AuditConfig, audit, audit_rm
from rmlens.memorization._check_runs import runs_agreement
from rmlens.rewards import TrainConfig


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--pairs", type=int, default=0, help="the N shortest pairs (0: all)")
    parser.add_argument("--group-by", default=None)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--runs", type=int, default=3, help="check runs K")
    parser.add_argument("--mismatch-runs", type=int, default=5)
    parser.add_argument("--no-mismatch", action="store_true")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--out", type=Path, default=Path("check-runs-bench"))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    pairs = shortest(load_pairs(args.data), args.pairs)
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
        mis_cfg = AuditConfig(mode="finetune", runs=args.mismatch_runs, group_by=args.group_by,
                              model=args.model, max_length=args.max_length,
                              precision=args.precision)  # fmt: skip
        paired, t_paired = timed(audit, pairs, mis_cfg, out=args.out / "paired", quiet=True)
        paired_summary = json.loads((args.out / "paired" / "summary.json").read_text())
        result["mismatched"] = runs_agreement(table, paired, summary, paired_summary)
        result["mismatched"]["seconds"] = t_paired
    text = strict_json(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
