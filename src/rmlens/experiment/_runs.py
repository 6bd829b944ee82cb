"""An audit's directory: its run plan, and one folder per run with its manifest and scores
(the layout is :class:`AuditDir`'s docstring)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from rmlens._errors import InputError
from rmlens.experiment._folder import ExperimentDir

PLAN = "plan.parquet"
MANIFEST = "manifest.json"
SCORES = "scores.parquet"
ERROR = "error.json"


class AuditDir(ExperimentDir):
    """The folder ``path`` of one audit: an :class:`ExperimentDir` (its record, tables and
    resume check) with the audit's run plan and one folder per run::

        plan.parquet        run, group, in_train, validation
        runs/<run:03d>/     scores.parquet, rm/, and manifest.json written last
                            (or error.json for a run that failed for good)

    A run is finished when its manifest parses and names its training pairs and its scores
    exist (:meth:`run_done`); anything else in its folder is redone, never read.

    Parameters
    ----------
    path : path
        The folder (a path, or an ExperimentDir); it need not exist yet (:meth:`create`).
    record : str, default="config.json"
        File name of the record inside the folder.

    Examples
    --------
    >>> import tempfile
    >>> import pandas as pd
    >>> exp = AuditDir(tempfile.mkdtemp()).create()
    >>> _ = exp.write_plan(pd.DataFrame({"run": [0, 0, 1], "group": ["a", "b", "a"]}))
    >>> exp.n_runs(), exp.finished_runs(), exp.run_dir(1).name
    (2, [], '001')
    """

    # -- the plan ------------------------------------------------------------------------

    def read_plan(self, columns: list[str] | None = None) -> pd.DataFrame:
        """The run plan (``plan.parquet``: ``run, group, in_train, validation``).

        Parameters
        ----------
        columns : list of str, optional
            Read only these columns.

        Returns
        -------
        DataFrame
            The plan.
        """
        return self.read_table(PLAN, columns)

    def write_plan(self, plan: pd.DataFrame) -> Path:
        """Write the run plan (``plan.parquet``), atomically.

        Parameters
        ----------
        plan : DataFrame
            One row per run and group.

        Returns
        -------
        Path
            The file written.
        """
        return self.write_table(plan, PLAN)

    def n_runs(self) -> int:
        """The plan's run count (plan.parquet), which a target reliability grows.

        Returns
        -------
        int
            The highest run of the plan plus 1; 0 for an empty plan. No plan, or an
            unreadable one, is an :class:`InputError`.
        """
        path = self.path / PLAN
        if not path.is_file():
            raise InputError(f"{self.path}: no {PLAN} (not an audit directory)")
        try:
            column = pq.read_table(path, columns=["run"]).column("run").to_numpy()
        except Exception as err:  # noqa: BLE001 - an unreadable plan is bad input
            raise InputError(f"{path}: not a readable plan ({err})") from None
        return int(column.max()) + 1 if len(column) else 0

    # -- the runs ------------------------------------------------------------------------

    @property
    def has_runs(self) -> bool:
        """Whether the ``runs/`` folder exists."""
        return (self.path / "runs").is_dir()

    @property
    def is_experiment(self) -> bool:
        """A record beside ``runs/``: an experiment directory of ``rmlens memorize``."""
        return self.has_record and self.has_runs

    def run_numbers(self) -> list[int]:
        """The runs that have a folder in ``runs/``, finished or not, in order.

        Returns
        -------
        list of int
            The run numbers.
        """
        if not self.has_runs:
            return []
        return sorted(int(p.name) for p in (self.path / "runs").iterdir()
                      if p.is_dir() and p.name.isdigit())  # fmt: skip

    def run_dir(self, run: int) -> Path:
        """The folder of run ``run`` (``runs/007``).

        Parameters
        ----------
        run : int
            The run number.

        Returns
        -------
        Path
            The folder (it may not exist).
        """
        return self.path / "runs" / f"{run:03d}"

    def run_done(self, run: int) -> bool:
        """Whether run ``run`` is finished: its manifest parses and names its training pairs,
        and its scores exist.

        Parameters
        ----------
        run : int
            The run number.

        Returns
        -------
        bool
            True for a finished run; anything else in its folder is redone.
        """
        folder = self.run_dir(run)
        manifest = folder / MANIFEST
        if not manifest.exists() or not (folder / SCORES).exists():
            return False
        try:
            return "train_ids" in json.loads(manifest.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return False

    def outputs_current(self, outputs: Sequence[str], n_runs: int) -> bool:
        """Whether every file of ``outputs`` exists and was written after the record, the
        plan and every run's manifest: then nothing has changed since they were made.

        Parameters
        ----------
        outputs : sequence of str
            File names inside the folder (``"memorization.parquet"``, ...).
        n_runs : int
            Runs 0 to ``n_runs`` - 1 whose manifests count.

        Returns
        -------
        bool
        """
        inputs = [self.path / self.record_name, self.path / PLAN,
                  *(self.run_dir(r) / MANIFEST for r in range(n_runs))]  # fmt: skip
        try:
            newest = max(p.stat().st_mtime_ns for p in inputs)
            return all((self.path / name).stat().st_mtime_ns >= newest for name in outputs)
        except OSError:  # a file is missing
            return False

    def finished_runs(self, n_runs: int | None = None) -> list[int]:
        """Runs 0 to ``n_runs`` - 1 that are finished (:meth:`run_done`).

        Parameters
        ----------
        n_runs : int, optional
            How many runs to look at; default the plan's count (:meth:`n_runs`).

        Returns
        -------
        list of int
            The finished runs, in order.
        """
        n_runs = self.n_runs() if n_runs is None else n_runs
        return [r for r in range(n_runs) if self.run_done(r)]

    def manifest(self, run: int, *, required: bool = True) -> Any:
        """The manifest of run ``run`` (``runs/<run>/manifest.json``).

        Parameters
        ----------
        run : int
            The run number.
        required : bool, default=True
            Raise :class:`InputError` when the run has no manifest (yet); None otherwise.

        Returns
        -------
        dict or None
            Its training and validation ids, metrics and settings (as parsed: an unfinished
            run's may be anything); an unparsable file is an :class:`UnusableFile`.
        """
        return self.read_json(f"runs/{run:03d}/{MANIFEST}", required=required)

    def read_scores(self, run: int, columns: list[str] | None = None) -> pd.DataFrame:
        """The scores of run ``run`` (``runs/<run>/scores.parquet``).

        Parameters
        ----------
        run : int
            The run number.
        columns : list of str, optional
            Read only these columns.

        Returns
        -------
        DataFrame
            ``id, r_chosen, r_rejected`` (and ``p`` with ``p_cf`` or ``p_cf_grid`` for a
            paired audit); a missing or unreadable file is an :class:`InputError`.
        """
        return self.read_table(f"runs/{run:03d}/{SCORES}", columns)

    def scores_path(self, run: int) -> Path:
        """The scores file of run ``run`` (``runs/<run>/scores.parquet``).

        Parameters
        ----------
        run : int
            The run number.

        Returns
        -------
        Path
            The file (it may not exist).
        """
        return self.run_dir(run) / SCORES

    def write_error(self, run: int, record: dict) -> Path:
        """Run ``run``'s error.json: why it failed for good (``record["error"]``, one line).

        Parameters
        ----------
        run : int
            The run number.
        record : dict
            What is saved; ``record["error"]`` is the one-line reason.

        Returns
        -------
        Path
            The file written.
        """
        return self.write_json(record, f"runs/{run:03d}/{ERROR}")

    def read_error(self, run: int) -> str | None:
        """The one-line error of a run that failed for good, None when there is none.

        Parameters
        ----------
        run : int
            The run number.

        Returns
        -------
        str or None
            ``error.json``'s ``error``; None when the file is absent or unreadable.
        """
        try:
            return str(json.loads((self.run_dir(run) / ERROR).read_text())["error"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
