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
from rmlens._io import write_parquet
from rmlens.experiment import ERROR, MANIFEST, AuditDir
from rmlens.memorization._damping import (
    blend,
    brute_cm,
    calibrate,
    choose_damping,
    grid_matrix,
    run_sums,
)
from rmlens.memorization._reliability import run_sides


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

    def record(self) -> dict:
        """What the run's error.json holds."""
        return {
            "run": self.run,
            "attempts": self.attempts,
            "error": self.error,
            "traceback": self.traceback,
        }


def write_run(
    out: str | Path | AuditDir,
    run: int,
    ids: np.ndarray,
    kept: np.ndarray,
    output: RunOutput,
    manifest: dict,
) -> None:
    """Scores, then the RM, then the manifest: a run counts as finished only once all exist."""
    exp = AuditDir(out)
    folder = exp.run_dir(run)
    exp.clean_stale(folder)
    (folder / MANIFEST).unlink(missing_ok=True)
    columns = {"id": ids, "r_chosen": output.r_chosen, "r_rejected": output.r_rejected}
    if output.p_cf is not None and output.p_cf.ndim == 2:  # last-layer influence: a grid
        columns.update(p=output.p, p_cf_grid=list(output.p_cf))
    elif output.p_cf is not None:
        columns.update(p=output.p, p_cf=output.p_cf)
    scores = pd.DataFrame(columns)[kept]
    write_parquet(scores, exp.scores_path(run))
    if output.save_rm is not None:
        tmp = folder / f".rm.{uuid.uuid4().hex[:8]}.tmp"
        output.save_rm(tmp)
        shutil.rmtree(folder / "rm", ignore_errors=True)
        tmp.rename(folder / "rm")
    (folder / ERROR).unlink(missing_ok=True)
    exp.write_json(manifest, f"runs/{run:03d}/{MANIFEST}")


def load_runs(
    out: str | Path | AuditDir, runs: int | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Long score and membership tables from the finished runs' files.

    The membership table has ``run, id, in_train, validation``; ``estimate`` counts a
    run's validation pairs neither in nor out. ``runs``: the plan's run count when None.
    """
    exp = AuditDir(out)
    scores, members = [], []
    for run in exp.finished_runs(runs):
        s = exp.read_scores(run).assign(run=run)
        manifest = exp.manifest(run)
        train, val = set(manifest["train_ids"]), set(manifest.get("val_ids", []))
        scores.append(s)
        members.append(
            pd.DataFrame(
                {"run": run, "id": s.id, "in_train": s.id.isin(train), "validation": s.id.isin(val)}
            )
        )
    if not scores:
        raise InputError(f"{exp.path}: no finished runs")
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
        """In-side and out-side probabilities (``_sides.run_sides``)."""
        return run_sides(self.p, self.member, self.val, self.p_cf)


def load_matrices(out: str | Path | AuditDir, runs: int | None = None) -> RunMatrices:
    """Probabilities and membership of the finished runs, without long tables.

    Each run's id column is aligned to one sorted index of ids (all runs of an audit score the
    same pairs), so memory is the (n_pairs, n_runs) matrices plus one run's file at a time.
    A paired audit's ``p`` is read from its scores' ``p`` column, with ``p_cf`` beside it.

    Parameters
    ----------
    out : str, Path or AuditDir
        The audit's folder.
    runs : int or None, default=None
        The run count to read (runs 0 to runs - 1); the plan's (``AuditDir.n_runs``) when
        None.

    Returns
    -------
    RunMatrices
        ``ids`` (sorted) index the rows, ``runs`` the columns; ``p``, ``member``, ``val``
        and ``p_cf`` are (n_pairs, n_finished) matrices.

    Raises
    ------
    InputError
        No run has finished.
    """
    exp = AuditDir(out)
    finished = exp.finished_runs(runs)
    if not finished:
        raise InputError(f"{exp.path}: no finished runs")
    reader = _MatrixReader(exp, finished)
    for j, run in enumerate(finished):
        if not reader.read(j, run):
            return _from_long_tables(exp, runs)  # runs scored different pairs
    return reader.matrices()


class _MatrixReader:
    """Fills the matrices of :func:`load_matrices` one finished run at a time."""

    def __init__(self, exp: AuditDir, finished: list[int]):
        self.exp, self.finished = exp, finished
        self.ids: pd.Index | None = None
        self.previous = self.position = None
        self.positions: list[np.ndarray] = []
        self.sums = self.counts = self.damping = None

    def _start(self, column, paired: bool, grid: bool) -> None:
        self.ids = pd.Index(np.sort(column.to_numpy(zero_copy_only=False)))
        shape = (len(self.ids), len(self.finished))
        self.p = np.full(shape, np.nan)
        self.member = np.zeros(shape, dtype=bool)
        self.val = np.zeros(shape, dtype=bool)
        self.p_cf = np.full(shape, np.nan) if paired else None
        self.grid = grid

    def read(self, j: int, run: int) -> bool:
        """Run ``run`` into column ``j``; False when it scored other pairs than the first."""
        path = self.exp.scores_path(run)
        table = pq.read_table(path)
        column = table.column("id")
        grid = "p_cf_grid" in table.column_names
        paired = "p_cf" in table.column_names or grid
        if self.ids is None:
            self._start(column, paired, grid)
        if paired != (self.p_cf is not None) or grid != self.grid:
            raise InputError(
                f"{path}: the runs of {self.exp.path} mix estimators (p_cf or p_cf_grid in "
                "some runs' scores only)"
            )
        if self.previous is None or not column.equals(self.previous):
            position = self.ids.get_indexer(column.to_numpy(zero_copy_only=False))
            if (position < 0).any() or len(position) != len(self.ids):
                return False
            self.position, self.previous = position, column
        self.positions.append(self.position)
        manifest = self.exp.manifest(run)
        rows = self.ids.get_indexer(manifest["train_ids"])
        self.member[rows[rows >= 0], j] = True
        rows = self.ids.get_indexer(manifest.get("val_ids", []))
        self.val[rows[rows >= 0], j] = True
        self._scores(j, table, manifest)
        return True

    def _scores(self, j: int, table, manifest: dict) -> None:
        position = self.position
        if self.grid:
            self.p[position, j] = table.column("p").to_numpy()
            values = _grid(table)
            if self.sums is None:
                self.sums = np.zeros((len(self.ids), values.shape[1]))
                self.counts = np.zeros(len(self.ids))
                self.damping = manifest["metrics"].get("damping_grid")
            s, c = run_sums(
                self.p[position, j], values, self.member[position, j], self.val[position, j]
            )
            self.sums[position] += s
            self.counts[position] += c
        elif self.p_cf is not None:
            self.p[position, j] = table.column("p").to_numpy()
            self.p_cf[position, j] = table.column("p_cf").to_numpy()
        else:
            r_c = table.column("r_chosen").to_numpy()
            r_r = table.column("r_rejected").to_numpy()
            self.p[position, j] = expit(r_c - r_r)

    def matrices(self) -> RunMatrices:
        """The matrices; last-layer influence's p_cf at the calibrated damping (a second
        pass over the runs' grids)."""
        p, member, val, p_cf = self.p, self.member, self.val, self.p_cf
        calibration = None
        if self.sums is not None:
            grid_values = self.damping or np.arange(1, self.sums.shape[1] + 1)
            k, t, calibration = choose_damping(
                brute_cm(p, member, val), self.sums, self.counts, grid_values
            )
            for j, run in enumerate(self.finished):
                table = pq.read_table(self.exp.scores_path(run), columns=["p_cf_grid"])
                p_cf[self.positions[j], j] = blend(_grid(table), k, t)
        return RunMatrices(self.ids, self.finished, p, member, val, p_cf, calibration)


def _grid(table) -> np.ndarray:
    """A scores table's ``p_cf_grid`` (one list per pair) as an (n_pairs, K) array."""
    column = table.column("p_cf_grid").combine_chunks()
    return column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), -1)


def _from_long_tables(exp: AuditDir, runs: int | None) -> RunMatrices:
    scores, members = load_runs(exp, runs)
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
        manifest = exp.manifest(finished[0])
        p_cf, calibration = calibrate(p, grid, member, val, manifest["metrics"]["damping_grid"])
    return RunMatrices(ids, finished, p, member, val, p_cf, calibration)
