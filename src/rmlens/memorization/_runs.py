"""Run folders of an experiment directory: written atomically, read only when finished.

DIR/runs/<run:03d>/ holds ``scores.parquet`` (``id, r_chosen, r_rejected`` of every kept
pair; with the paired estimator also ``p``, sigmoid(r+ - r-) under the run's RM, and
``p_cf``, under the RM with the pair's group removed or added; last-layer influence writes
``p_cf_grid`` instead, p_cf at each damping value of the run's ``damping_grid``), ``rm/``
(the run's saved RM) and, written last, ``manifest.json`` (``run, seed, n_train,
train_ids, n_val, val_ids, quality, metrics``). ``train_ids`` are the pairs the run's RM
took gradients on; ``val_ids`` the validation pairs its early stopping read (from its own
training groups): neither in nor out for the estimators. A run is finished when its
manifest parses and its scores exist; anything else in the folder (scores without a
manifest, temporary files of a killed process) is redone, never read. A run that failed
for good leaves ``error.json`` instead.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from scipy.special import expit

from rmlens._errors import InputError
from rmlens._io import write_json, write_parquet
from rmlens.memorization._damping import (
    blend,
    brute_cm,
    calibrate,
    choose_damping,
    grid_matrix,
    run_sums,
)
from rmlens.memorization._estimate import run_sides


@dataclass
class RunOutput:
    """What a training run gives back to the driver, which writes it."""

    r_chosen: np.ndarray  # (n_pairs,)
    r_rejected: np.ndarray  # (n_pairs,)
    metrics: dict
    save_rm: Callable[[Path], object] | None = None  # writes the run's RM into a folder
    p: np.ndarray | None = None  # (n_pairs,), paired estimator only
    p_cf: np.ndarray | None = None  # (n_pairs,), or (n_pairs, K) over a damping grid


@dataclass
class RunFailure:
    """A run that raised on every attempt."""

    run: int
    attempts: int
    error: str  # "Type: message", one line
    traceback: str
    exception: BaseException


def run_dir(out: Path, run: int) -> Path:
    return Path(out) / "runs" / f"{run:03d}"


def run_done(run_dir: Path) -> bool:
    manifest = run_dir / "manifest.json"
    if not manifest.exists() or not (run_dir / "scores.parquet").exists():
        return False
    try:
        return "train_ids" in json.loads(manifest.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


def clean_stale(folder: Path) -> None:
    """Remove the ``.*.tmp`` files and folders that a killed writer left in ``folder``."""
    if not folder.is_dir():
        return
    for path in folder.glob(".*.tmp"):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def write_run(
    out: Path, run: int, ids: np.ndarray, kept: np.ndarray, output: RunOutput, manifest: dict
) -> None:
    """Scores, then the RM, then the manifest: a run counts as finished only once all exist."""
    folder = run_dir(out, run)
    clean_stale(folder)
    (folder / "manifest.json").unlink(missing_ok=True)
    columns = {"id": ids, "r_chosen": output.r_chosen, "r_rejected": output.r_rejected}
    if output.p_cf is not None and output.p_cf.ndim == 2:  # last-layer influence: a grid
        columns.update(p=output.p, p_cf_grid=list(output.p_cf))
    elif output.p_cf is not None:
        columns.update(p=output.p, p_cf=output.p_cf)
    scores = pd.DataFrame(columns)[kept]
    write_parquet(scores, folder / "scores.parquet")
    if output.save_rm is not None:
        tmp = folder / f".rm.{uuid.uuid4().hex[:8]}.tmp"
        output.save_rm(tmp)
        shutil.rmtree(folder / "rm", ignore_errors=True)
        tmp.rename(folder / "rm")
    (folder / "error.json").unlink(missing_ok=True)
    write_json(manifest, folder / "manifest.json")


def write_error(out: Path, failure: RunFailure) -> Path:
    record = {
        "run": failure.run,
        "attempts": failure.attempts,
        "error": failure.error,
        "traceback": failure.traceback,
    }
    return write_json(record, run_dir(out, failure.run) / "error.json")


def read_error(out: Path, run: int) -> str | None:
    path = run_dir(out, run) / "error.json"
    try:
        return str(json.loads(path.read_text())["error"])
    except (OSError, ValueError, KeyError):
        return None


def plan_runs(out: Path) -> int:
    """The audit's real run count: the runs of its plan (plan.parquet), which a target
    reliability grows past ``--runs``."""
    path = Path(out) / "plan.parquet"
    if not path.is_file():
        raise InputError(f"{out}: no plan.parquet (not an audit directory)")
    column = pq.read_table(path, columns=["run"]).column("run").to_numpy()
    return int(column.max()) + 1 if len(column) else 0


def load_runs(out: Path, runs: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Long score and membership tables from the finished runs' files.

    The membership table has ``run, id, in_train, validation``; ``estimate`` counts a
    run's validation pairs neither in nor out. ``runs``: the plan's run count when None.
    """
    runs = plan_runs(out) if runs is None else runs
    scores, members = [], []
    for run in range(runs):
        folder = run_dir(out, run)
        if not run_done(folder):
            continue
        s = pd.read_parquet(folder / "scores.parquet").assign(run=run)
        manifest = json.loads((folder / "manifest.json").read_text())
        train, val = set(manifest["train_ids"]), set(manifest.get("val_ids", []))
        scores.append(s)
        members.append(
            pd.DataFrame(
                {"run": run, "id": s.id, "in_train": s.id.isin(train), "validation": s.id.isin(val)}
            )
        )
    if not scores:
        raise InputError(f"{out}: no finished runs")
    return pd.concat(scores, ignore_index=True), pd.concat(members, ignore_index=True)


@dataclass
class RunMatrices:
    """The finished runs of an audit as (n_pairs, n_finished) matrices.

    ``ids`` (sorted) index the rows, ``runs`` the columns; ``p`` is sigmoid(r+ - r-) (NaN:
    not scored), ``member`` and ``val`` the runs' training and validation pairs (from their
    manifests), ``p_cf`` the paired counterfactuals (None for a brute-force audit).
    """

    ids: pd.Index
    runs: list[int]
    p: np.ndarray
    member: np.ndarray
    val: np.ndarray
    p_cf: np.ndarray | None = None
    damping: dict | None = None  # last-layer influence: how its damping was calibrated

    @property
    def estimator(self) -> str:
        return "brute" if self.p_cf is None else "paired"

    def sides(self) -> tuple[np.ndarray, np.ndarray]:
        """In-side and out-side probabilities (``_estimate.run_sides``)."""
        return run_sides(self.p, self.member, self.val, self.p_cf)


def load_matrices(out: Path, runs: int | None = None) -> RunMatrices:
    """Probabilities and membership of the finished runs, without long tables.

    ``runs``: the run count to read (runs 0 to runs - 1); the plan's (:func:`plan_runs`)
    when None.

    Each run's id column is aligned to one sorted index of ids (all runs of an audit score the
    same pairs), so memory is the (n_pairs, n_runs) matrices plus one run's file at a time.
    A paired audit's ``p`` is read from its scores' ``p`` column, with ``p_cf`` beside it.
    """
    runs = plan_runs(out) if runs is None else runs
    finished = [r for r in range(runs) if run_done(run_dir(out, r))]
    if not finished:
        raise InputError(f"{out}: no finished runs")
    ids = p = member = val = p_cf = sums = counts = damping = None
    previous, position, positions = None, None, []
    for j, run in enumerate(finished):
        folder = run_dir(out, run)
        table = pq.read_table(folder / "scores.parquet")
        column = table.column("id")
        paired = "p_cf" in table.column_names or "p_cf_grid" in table.column_names
        grid = "p_cf_grid" in table.column_names
        if ids is None:
            ids = pd.Index(np.sort(column.to_numpy(zero_copy_only=False)))
            p = np.full((len(ids), len(finished)), np.nan)
            member = np.zeros((len(ids), len(finished)), dtype=bool)
            val = np.zeros((len(ids), len(finished)), dtype=bool)
            p_cf = np.full(p.shape, np.nan) if paired else None
            first_grid = grid
        if paired != (p_cf is not None) or grid != first_grid:
            raise InputError(
                f"{folder / 'scores.parquet'}: the runs of {out} mix estimators (p_cf or "
                "p_cf_grid in some runs' scores only)"
            )
        if previous is None or not column.equals(previous):
            position = ids.get_indexer(column.to_numpy(zero_copy_only=False))
            if (position < 0).any() or len(position) != len(ids):
                return _from_long_tables(out, runs)  # runs scored different pairs
            previous = column
        positions.append(position)
        manifest = json.loads((folder / "manifest.json").read_text())
        rows = ids.get_indexer(manifest["train_ids"])
        member[rows[rows >= 0], j] = True
        rows = ids.get_indexer(manifest.get("val_ids", []))
        val[rows[rows >= 0], j] = True
        if grid:
            p[position, j] = table.column("p").to_numpy()
            values = _grid(table)
            if sums is None:
                sums, counts = np.zeros((len(ids), values.shape[1])), np.zeros(len(ids))
                damping = manifest["metrics"].get("damping_grid")
            s, c = run_sums(p[position, j], values, member[position, j], val[position, j])
            sums[position] += s
            counts[position] += c
        elif paired:
            p[position, j] = table.column("p").to_numpy()
            p_cf[position, j] = table.column("p_cf").to_numpy()
        else:
            r_c = table.column("r_chosen").to_numpy()
            r_r = table.column("r_rejected").to_numpy()
            p[position, j] = expit(r_c - r_r)
        del table
    calibration = None
    if sums is not None:  # second pass: each run's p_cf at the calibrated damping
        grid_values = damping or np.arange(1, sums.shape[1] + 1)
        k, t, calibration = choose_damping(brute_cm(p, member, val), sums, counts, grid_values)
        for j, run in enumerate(finished):
            table = pq.read_table(run_dir(out, run) / "scores.parquet", columns=["p_cf_grid"])
            p_cf[positions[j], j] = blend(_grid(table), k, t)
    return RunMatrices(ids, finished, p, member, val, p_cf, calibration)


def _grid(table) -> np.ndarray:
    """A scores table's ``p_cf_grid`` (one list per pair) as an (n_pairs, K) array."""
    column = table.column("p_cf_grid").combine_chunks()
    return column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), -1)


def _from_long_tables(out: Path, runs: int) -> RunMatrices:
    scores, members = load_runs(out, runs)
    ids = pd.Index(np.sort(scores.id.unique()))
    finished = sorted(scores.run.unique().tolist())
    col = {r: j for j, r in enumerate(finished)}
    p = np.full((len(ids), len(finished)), np.nan)
    member = np.zeros(p.shape, dtype=bool)
    val = np.zeros(p.shape, dtype=bool)
    cell = ids.get_indexer(scores.id), scores.run.map(col).to_numpy()
    p[cell] = expit(scores.r_chosen.to_numpy() - scores.r_rejected.to_numpy())
    where = ids.get_indexer(members.id), members.run.map(col).to_numpy()
    member[where] = members.in_train
    val[where] = members.validation
    p_cf = calibration = None
    if "p_cf" in scores:
        p[cell] = scores.p.to_numpy(float)
        p_cf = np.full(p.shape, np.nan)
        p_cf[cell] = scores.p_cf.to_numpy(float)
    elif "p_cf_grid" in scores:
        p[cell] = scores.p.to_numpy(float)
        grid = grid_matrix(scores.p_cf_grid, p.shape, cell)
        manifest = json.loads((run_dir(out, finished[0]) / "manifest.json").read_text())
        p_cf, calibration = calibrate(p, grid, member, val, manifest["metrics"]["damping_grid"])
    return RunMatrices(ids, finished, p, member, val, p_cf, calibration)
