"""What the report shows, read from one experiment directory through
:class:`~rmlens.experiment.AuditDir`: the memorization table it needs, and the optional
parts, each left out with a page warning when it is there but cannot be used."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rmlens._errors import InputError
from rmlens.experiment import PLAN, RECORD, AuditDir, ExperimentDir, UnusableFile

MEMORIZATION = "memorization.parquet"
REQUIRED = ("id", "tm", "tg", "cm")
_MAX_PNG_BYTES = 4_000_000
_MAX_RUNS = 500


@dataclass
class Experiment:
    """Everything the report shows, read from one experiment directory."""

    root: Path
    mem: pd.DataFrame
    config: dict[str, Any] | None = None
    plan: pd.DataFrame | None = None
    summary: dict[str, Any] | None = None
    runs: pd.DataFrame | None = None
    attribution: pd.DataFrame | None = None
    attribution_fit: pd.DataFrame | None = None
    sae: Any = None  # sae/config.json
    sae_cards: Any = None  # sae/cards.json
    sweeps: list[tuple[str, pd.DataFrame, dict[str, Any]]] = field(default_factory=list)
    metrics: Any = None
    probes: pd.DataFrame | None = None
    generalization: pd.DataFrame | None = None
    images: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    overoptimization: tuple[list[dict], pd.DataFrame | None, str] | None = None

    @property
    def one_checkpoint(self) -> bool:
        """Whether this is a one-checkpoint audit (``rmlens memorize --rm``): one run that
        trained on every pair, TG from each group's removal by a Gauss-Newton step, so no
        run held a pair out."""
        return any(isinstance(record, dict) and isinstance(record.get("checkpoint"), dict)
                   for record in (self.summary, self.config))  # fmt: skip


class _Parts:
    """The optional files of one folder: None when absent; None and a warning (appended to
    ``warnings``) when one is there but cannot be used."""

    def __init__(self, folder: Path, warnings: list[str]):
        self.dir, self.warnings = AuditDir(folder), warnings

    def json(self, name: str) -> Any:
        return self._read(self.dir.read_json, name, required=False)

    def table(self, name: str, needed: tuple[str, ...] = ()) -> pd.DataFrame | None:
        return self._read(self.dir.read_table, name, required=False, needed=needed)

    def manifest(self, run: int) -> Any:
        return self._read(self.dir.manifest, run, required=False)

    def _read(self, read, *args, **kwargs) -> Any:
        try:
            return read(*args, **kwargs)
        except UnusableFile as err:
            self.warnings.append(f"{err.path}: {err.problem}; section left out")
            return None


def load_experiment(out_dir: str | Path) -> Experiment:
    """Read the experiment directory; optional parts that are absent are left out."""
    root = Path(out_dir)
    if not root.is_dir():
        raise InputError(f"{root}: experiment directory not found (expected a folder)")
    mem_path = root / MEMORIZATION
    mem = ExperimentDir(root).read_table(MEMORIZATION, required=False)  # InputError: unreadable
    if mem is None:
        raise InputError(
            f"{mem_path}: not found; a report needs the memorization table "
            f"(run `rmlens memorize --out {root}` first)"
        )
    missing = [c for c in REQUIRED if c not in mem.columns]
    if missing:
        raise InputError(
            f"{mem_path}: missing column(s) {', '.join(missing)}; expected "
            f"{', '.join(REQUIRED)}, found {', '.join(map(str, mem.columns)) or 'none'}"
        )
    for column in ("tm", "tg", "cm"):
        if not pd.api.types.is_numeric_dtype(mem[column]):
            raise InputError(
                f"{mem_path}: column '{column}' must be numeric, found dtype {mem[column].dtype}"
            )
    exp = Experiment(root=root, mem=mem.reset_index(drop=True))
    parts = _Parts(root, exp.warnings)
    exp.config = parts.json(RECORD)
    exp.summary = parts.json("summary.json")
    exp.plan = parts.table(PLAN, ("run", "group", "in_train"))
    exp.runs = _read_runs(parts)
    exp.attribution = parts.table(
        "attribution.parquet", ("target", "regressor", "feature", "importance")
    )
    exp.attribution_fit = parts.table("attribution_fit.parquet", ("target", "regressor", "r2"))
    exp.sae = parts.json("sae/config.json")
    exp.sae_cards = parts.json("sae/cards.json")
    for path in sorted(root.glob("sweep*/sweep.parquet")):
        sweep = _Parts(path.parent, exp.warnings)
        frame = sweep.table(path.name, ("token", "score"))
        if frame is not None:
            stats: dict[str, Any] = {}
            for stats_path in sorted(path.parent.glob("*.json")):
                loaded = sweep.json(stats_path.name)
                if loaded is not None:
                    stats[stats_path.stem] = loaded
            exp.sweeps.append((path.parent.name, frame, stats))
    exp.metrics = parts.json("metrics.json")
    exp.probes = parts.table("probes.parquet", ("probe", "flip_rate"))
    exp.generalization = parts.table("generalization.parquet")
    exp.overoptimization = _read_overoptimization(root, exp.warnings)
    pngs = sorted(root.glob("*.png")) + sorted(root.glob("sweep*/*.png"))
    for path in pngs:
        data = path.read_bytes()
        if len(data) > _MAX_PNG_BYTES:
            exp.warnings.append(f"{path}: {len(data):,} bytes, too large to embed; left out")
            continue
        name = str(path.relative_to(root))
        exp.images.append((name, base64.b64encode(data).decode("ascii")))
    return exp


def _read_overoptimization(root: Path, warnings: list[str]):
    """This audit's rows of ``overoptimization.json`` (and the curves beside it) in the
    audit's folder or its parent (the comparison directory of ``mitigate``): summary rows,
    curves, and the file they came from; None when no overoptimization names this audit."""
    for folder in (root, root.parent):
        parts = _Parts(folder, warnings)
        record = parts.json("overoptimization.json")
        if not isinstance(record, dict):
            continue
        labels = {str(a.get("label")) for a in record.get("audits") or []
                  if a.get("path") and Path(a["path"]).resolve() == root.resolve()}  # fmt: skip
        if not labels:
            continue
        rows = [r for r in record.get("summary") or []
                if r.get("audit") in labels or r.get("kind") == "oracle"]  # fmt: skip
        curves = parts.table("overoptimization.parquet", ("rm", "n", "kl", "gold"))
        if curves is not None:
            curves = curves[curves["rm"].isin({r.get("rm") for r in rows})]
        return rows, curves, str(folder / "overoptimization.json")
    return None


# what the report shows of each run's manifest (the rest stays in runs/<run>/manifest.json):
# column -> where it is read, first found wins ("quality" holds the audit's per-split figures)
RUN_COLUMNS = {
    "n_train": (("n_train",), ("quality", "in_train", "n")),
    "n_val": (("n_val",), ("quality", "validation", "n")),
    "held_out_accuracy": (("quality", "held_out", "accuracy"), ("metrics", "test_accuracy")),
    "held_out_log_loss": (("quality", "held_out", "log_loss"),),
    "in_train_accuracy": (("quality", "in_train", "accuracy"), ("metrics", "train_accuracy")),
    "in_train_log_loss": (("quality", "in_train", "log_loss"),),
    "l2": (("metrics", "l2"),),
    "epochs": (("metrics", "epochs"),),
    "best_epoch": (("metrics", "best_epoch"),),
}


def _read_runs(parts: _Parts) -> pd.DataFrame | None:
    """One row per run's manifest (the first 500 runs, finished or not), in run order: its
    run number and the ``RUN_COLUMNS`` it has (a column no run has is left out); a first row
    of means over runs when there are several."""
    records = []
    for run in parts.dir.run_numbers()[:_MAX_RUNS]:
        manifest = parts.manifest(run)
        if not isinstance(manifest, dict):
            continue
        record: dict[str, Any] = {"run": run}
        for column, paths in RUN_COLUMNS.items():
            record[column] = next((v for v in (_number_at(manifest, p) for p in paths)
                                   if v is not None), None)  # fmt: skip
        records.append(record)
    if not records:
        return None
    runs = pd.DataFrame.from_records(records).dropna(axis=1, how="all")
    numeric = runs.drop(columns=["run"]).astype(float)
    if len(runs) > 1 and not numeric.empty:
        means = numeric.mean().to_dict()
        if "l2" in means:  # a mean of penalties chosen from a grid is no penalty that ran
            means["l2"] = None
        mean = pd.DataFrame([{"run": "mean", **means}])
        runs = pd.concat([mean, runs.astype({"run": object})], ignore_index=True)
    return runs


def _number_at(record: dict, path: tuple[str, ...]) -> float | None:
    """The finite number at ``record[path[0]][path[1]]...``, else None (a bool is no number)."""
    value: Any = record
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    return float(value) if np.isfinite(value) else None
