"""Atomic writes: write to a temporary name in the same folder, then rename (DESIGN.md 6);
and :func:`jsonable`, the one turn of numpy/pandas values into JSON-ready Python."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path``, fsync it, then rename it.

    The file gets the usual permissions (0666 less the umask), not mkstemp's 0600.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        write(tmp_path)
        with open(tmp_path, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp_path, 0o666 & ~_umask())
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
    return path


def write_parquet(frame: pd.DataFrame, path: str | Path) -> Path:
    return write_atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))


def write_json(obj: Any, path: str | Path) -> Path:
    text = json.dumps(obj, indent=2, sort_keys=True, default=str)
    return write_atomic(path, lambda tmp: tmp.write_text(text + "\n"))


def write_text(text: str, path: str | Path) -> Path:
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_bytes(data: bytes, path: str | Path) -> Path:
    return write_atomic(path, lambda tmp: tmp.write_bytes(data))


def jsonable(value: Any, *, missing: bool = True) -> Any:
    """A JSON-ready copy: numpy and pandas scalars and arrays as Python, NaN as ``None``.

    Mappings become dicts with ``str`` keys; lists, tuples and arrays become lists; numpy
    booleans, integers and floats become ``bool``, ``int`` and ``float``, other numpy
    scalars their ``.item()``; anything else is kept.

    Parameters
    ----------
    value : Any
    missing : bool, default=True
        Turn NaN, infinities, ``pd.NA`` and ``NaT`` into ``None`` (JSON has no NaN). False
        keeps them, for records whose checks tell a NaN from a missing value.

    Examples
    --------
    >>> jsonable({"a": np.float32(0.5), 1: [np.int64(2), float("nan")], "b": np.array([True])})
    {'a': 0.5, '1': [2, None], 'b': [True]}
    >>> jsonable([np.float64("inf"), pd.NA], missing=False)
    [inf, <NA>]
    """
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, missing=missing) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v, missing=missing) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v, missing=missing) for v in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if not missing or math.isfinite(value) else None
    if missing and (value is pd.NA or value is pd.NaT):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value
