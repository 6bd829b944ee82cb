"""The experiment folder: its record, atomic reads and writes, and the one resume check.

Every command that writes a directory (DESIGN.md section 6) writes it through
:class:`ExperimentDir`, and every reader reads it through the same class::

    DIR/config.json             the record: settings, data fingerprint, version
    DIR/<table>.parquet|.json   the tables

All writes are atomic (``rmlens._io``). An RM folder of ``rmlens train`` is an experiment
directory whose record is ``train.json``. An audit's plan and runs are
:class:`~rmlens.experiment.AuditDir`'s (``_runs.py``).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from rmlens._errors import InputError
from rmlens._io import write_json, write_parquet
from rmlens._params import dict_changes
from rmlens.experiment._changes import other_data, shown, with_defaults

RECORD = "config.json"

_Dir = TypeVar("_Dir", bound="ExperimentDir")


class UnusableFile(InputError):
    """A file of an experiment directory that is there but cannot be used.

    ``str(err)`` reads ``<path>: <problem>; <advice>``; a reader that can do without the
    file (the report) words its own consequence from ``path`` and ``problem``.

    Parameters
    ----------
    path : Path
        The file.
    problem : str
        What is wrong with it (``"not valid JSON (...)"``).
    advice : str, default=""
        What to do about it (``"delete it"``), for the message.
    """

    def __init__(self, path: Path, problem: str, advice: str = ""):
        self.path, self.problem = path, problem
        super().__init__(f"{path}: {problem}" + (f"; {advice}" if advice else ""))


class ExperimentDir:
    """The folder ``path`` of one experiment: its record (``config.json``) and its tables,
    read and written atomically, and the one resume check. An audit's plan and runs are
    :class:`AuditDir`'s.

    Parameters
    ----------
    path : path
        The folder (a path, or an ExperimentDir); it need not exist yet (:meth:`create`).
    record : str, default="config.json"
        File name of the record inside the folder.

    Examples
    --------
    >>> import tempfile
    >>> exp = ExperimentDir(tempfile.mkdtemp()).create()
    >>> exp.resume({"settings": {"runs": 4}, "data_sha1": "ab"}, what="an audit") is None
    True
    >>> _ = exp.write_record({"settings": {"runs": 4}, "data_sha1": "ab"})
    >>> exp.resume({"settings": {"runs": 6}, "data_sha1": "ab"}, what="an audit")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rmlens._errors.InputError: `out` ... with another configuration: runs 4 (saved) vs 6 (now); ...
    """

    def __init__(self, path: str | Path, record: str = RECORD):
        self.path = Path(path)
        self.record_name = record

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    def __fspath__(self) -> str:
        return str(self.path)

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    # -- the folder and its files ---------------------------------------------------------

    def create(self: _Dir) -> _Dir:
        """Make the folder (and its parents); a file in its place is bad input.

        Returns
        -------
        ExperimentDir
            ``self``.
        """
        if self.path.exists() and not self.path.is_dir():
            raise InputError(f"`out` {self.path}: is a file, not a directory; choose another `out`")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise InputError(
                f"`out` {self.path}: cannot create the directory ({err.strerror})"
            ) from err
        return self

    def read_json(self, name: str, *, required: bool = True, mapping: bool = False) -> Any:
        """The JSON file ``name``; None when absent and not ``required``.

        Parameters
        ----------
        name : str
            File name inside the folder.
        required : bool, default=True
            Raise :class:`InputError` when the file is absent.
        mapping : bool, default=False
            The file must hold a JSON object (an :class:`InputError` otherwise).

        Returns
        -------
        object or None
            The parsed JSON; an unreadable or unparsable file is an :class:`UnusableFile`
            (an :class:`InputError`).
        """
        path = self.path / name
        if not path.is_file():
            if required:
                raise InputError(f"{path}: not found (is {self.path} an experiment directory?)")
            return None
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as err:  # UnicodeDecodeError too
            raise UnusableFile(path, f"not valid JSON ({err})", "delete it") from None
        except OSError as err:
            raise UnusableFile(path, f"not readable ({err.strerror or err})") from None
        if mapping and not isinstance(value, dict):
            raise UnusableFile(path, f"expected a JSON object, found {type(value).__name__}")
        return value

    def write_json(self, obj: Any, name: str) -> Path:
        """Write ``obj`` as the JSON file ``name``, atomically.

        Parameters
        ----------
        obj : object
            A JSON-serializable value.
        name : str
            File name inside the folder.

        Returns
        -------
        Path
            The file written.
        """
        return write_json(obj, self.path / name)

    def read_table(
        self,
        name: str,
        columns: list[str] | None = None,
        *,
        required: bool = True,
        needed: Sequence[str] = (),
    ) -> pd.DataFrame | None:
        """The Parquet table ``name`` (``"memorization.parquet"``); None when absent and not
        ``required``.

        Parameters
        ----------
        name : str
            File name inside the folder.
        columns : list of str, optional
            Read only these columns.
        required : bool, default=True
            Raise :class:`InputError` when the file is absent.
        needed : sequence of str, default=()
            Columns the table must have.

        Returns
        -------
        DataFrame or None
            The table; an unreadable file, or one without a ``needed`` column, is an
            :class:`UnusableFile` (an :class:`InputError`).
        """
        path = self.path / name
        if not path.is_file():
            if required:
                raise InputError(f"{path}: not found (is {self.path} an experiment directory?)")
            return None
        try:
            frame = pd.read_parquet(path, columns=columns)
        except Exception as err:  # noqa: BLE001 - any reader failure is bad input
            raise UnusableFile(path, f"not a readable Parquet file ({err})") from None
        missing = [c for c in needed if c not in frame.columns]
        if missing:
            raise UnusableFile(path, f"missing column(s) {', '.join(missing)}, found "
                                     f"{', '.join(map(str, frame.columns))}")  # fmt: skip
        return frame

    def write_table(self, frame: pd.DataFrame, name: str) -> Path:
        """Write ``frame`` as the Parquet table ``name``, atomically.

        Parameters
        ----------
        frame : DataFrame
            The table.
        name : str
            File name inside the folder.

        Returns
        -------
        Path
            The file written.
        """
        return write_parquet(frame, self.path / name)

    def missing(self, names: Sequence[str]) -> list[str]:
        """The files of ``names`` that the folder lacks (all of them when it does not exist).

        Parameters
        ----------
        names : sequence of str
            File names inside the folder (``(RECORD, "plan.parquet", "memorization.parquet")``).

        Returns
        -------
        list of str
            Those that are not a file there, in the order given.
        """
        return [name for name in names if not (self.path / name).is_file()]

    def clean_stale(self, folder: Path | None = None) -> None:
        """Remove the ``.*.tmp`` files and folders that a killed writer left in ``folder``.

        Parameters
        ----------
        folder : Path, optional
            The folder to clean; default the experiment's own.
        """
        folder = self.path if folder is None else folder
        if not folder.is_dir():
            return
        for path in folder.glob(".*.tmp"):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    # -- the record and the one resume check ----------------------------------------------

    @property
    def has_record(self) -> bool:
        """Whether the record file exists."""
        return (self.path / self.record_name).is_file()

    def read_record(self, *, required: bool = False) -> dict | None:
        """The saved record, None when there is none yet (and it is not ``required``).

        Parameters
        ----------
        required : bool, default=False
            Raise :class:`InputError` when there is no record.

        Returns
        -------
        dict or None
            The record.
        """
        return self.read_json(self.record_name, required=required, mapping=True)

    def write_record(self, record: dict) -> Path:
        """Write the record (``config.json``, or the record name given), atomically.

        Parameters
        ----------
        record : dict
            The settings, data fingerprint and version of the experiment.

        Returns
        -------
        Path
            The file written.
        """
        return self.write_json(record, self.record_name)

    def resume(
        self,
        record: dict,
        *,
        what: str,
        settings: Callable[[dict], dict] = lambda r: r.get("settings") or {},
        data_keys: tuple[str, ...] = ("data_sha1",),
        size_key: str = "n_pairs",
        defaults: dict | None = None,
        hint: str | Callable[[dict], str] = "",
    ) -> dict | None:
        """Check that the experiment saved here is the one ``record`` describes.

        Raises :class:`InputError` naming every setting that differs and whether the data
        did, in one wording for every command.

        Parameters
        ----------
        record : dict
            The record of the experiment about to run.
        what : str
            What the directory holds, for the message (``"an audit"``).
        settings : callable, default=the record's ``"settings"``
            The part of a record that makes the tables, compared field by field (dotted
            names for nested ones).
        data_keys : tuple of str, default=("data_sha1",)
            The record's fingerprints of the data.
        size_key : str, default="n_pairs"
            The record's size of the data.
        defaults : dict, optional
            The settings' defaults, which a saved setting made before it existed had in
            effect.
        hint : str or callable, default=""
            Said after the settings (how to resume instead); a callable gets the saved
            record.

        Returns
        -------
        dict or None
            The saved record; None for a new directory.
        """
        saved = self.read_record()
        if saved is None:
            return None
        if callable(hint):
            hint = hint(saved)
        then = with_defaults(settings(saved), defaults or {})
        changes = dict_changes(then, json.loads(json.dumps(settings(record))))
        text = ", ".join(
            f"{name} {shown(then)} (saved) vs {shown(now)} (now)" if i == 0
            else f"{name} {shown(then)} vs {shown(now)}"
            for i, (name, then, now) in enumerate(changes)
        )  # fmt: skip
        data = None
        if any(saved.get(k) != record.get(k) for k in data_keys):
            data = other_data(saved, record, data_keys, size_key)
        if not text and data is None:
            return saved
        parts = [f"another configuration: {text}{hint}"] if text else []
        parts += [data] if data else []
        raise InputError(
            f"`out` {self.path} holds {what} with {'; and '.join(parts)}; use another `out`, "
            f"or the saved settings and data (its {self.record_name}) to resume it"
        )

    def reusable(self, record: dict, outputs: Sequence[str]) -> dict | None:
        """The saved record when the step cached here was made as ``record`` says: each of
        its keys saved with the same value (the settings, the data's fingerprint) and every
        file of ``outputs`` present. Else None, and the step runs again over it.

        Unlike :meth:`resume`, which refuses another experiment in its directory, this is for
        steps whose outputs are a cache of their settings (a model's token sweep, an SAE):
        other settings redo the step rather than stop the command.

        Parameters
        ----------
        record : dict
            What the step's outputs depend on, as saved in the record (JSON values).
        outputs : sequence of str
            The step's files inside the folder.

        Returns
        -------
        dict or None
            The saved record.
        """
        if self.missing([self.record_name, *outputs]):
            return None
        saved = self.read_record()
        now = json.loads(json.dumps(record))
        return None if any(saved.get(k) != v for k, v in now.items()) else saved
