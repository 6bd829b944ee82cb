"""What the findings share: the shared data, the frozen audit every memorization finding
runs, and how a figure and its interval are written."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from rmlens.memorization import AuditConfig, audit

SHARED = Path(__file__).resolve().parents[3] / "shared/data"
SQUALITY = SHARED / "squality-human-eval-pairs.jsonl"
HH = SHARED / "hh-rlhf-harmless-base-test.jsonl.gz"
RUNS = 50
THIN_SEEDS = (0, 1, 2)
SEEDS = (0, 1, 2)  # of anything that trains


def frozen_audit(pairs: pd.DataFrame, group_by: str, out: Path, **plan) -> pd.DataFrame:
    """A frozen MiniLM brute-force audit (resumed where it stopped); its table by pair.
    ``plan``: AuditConfig's plan fields, where the 5-fold plan does not fit the groups."""
    config = AuditConfig(model="minilm", runs=RUNS, group_by=group_by, estimator="brute",
                         **plan)  # fmt: skip
    audit(pairs, config, out=out, quiet=True)
    return pd.read_parquet(out / "memorization.parquet")


def held_out_accuracy(out: Path) -> dict:
    """The runs' held-out accuracy, mean and standard deviation over runs."""
    summary = json.loads((out / "summary.json").read_text())
    return summary["rm_quality"]["held_out"]["accuracy"]


def figure(key: str, label: str, link: dict, claimed: float | None = None) -> dict:
    """One figure of a finding; ``claimed``: the source's own figure for it, if it gave one."""
    return {"key": key, "label": label, "value": link["spearman"], "lo": link["lo"],
            "hi": link["hi"], "n": link["n_pairs"], "unit": "Spearman",
            "claimed": claimed}  # fmt: skip

def interval_texts(figures: dict, spec: str) -> dict[str, str]:
    """Each figure as "value [lo, hi]", by key, for a finding's reading."""
    return {k: f"{v['value']:{spec}} [{v['lo']:{spec}}, {v['hi']:{spec}}]"
            for k, v in figures.items()}  # fmt: skip

def memorized(table: pd.DataFrame) -> float:
    return float((table.category == "memorized").mean())


def fig(key: str, label: str, value: float, lo: float, hi: float, n: int, unit: str,
        n_of: str = "tokens") -> dict:
    """One figure of a finding with its 95% interval; the source claims no size of it."""
    return {"key": key, "label": label, "value": float(value), "lo": float(lo),
            "hi": float(hi), "n": int(n), "n_of": n_of, "unit": unit,
            "claimed": None}  # fmt: skip
