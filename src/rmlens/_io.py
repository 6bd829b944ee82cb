"""Atomic writes: write to a temporary name in the same folder, then rename (DESIGN.md 6);
:func:`jsonable`, the one turn of numpy/pandas values into JSON-ready Python; and
:func:`json_sha1`, the one fingerprint of settings (the sha1 of their JSON text)."""

from __future__ import annotations

import hashlib
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


def readable(folder: str | Path) -> None:
    """Every safetensors file under ``folder`` with the usual permissions (0666 less the
    umask), as ``save_pretrained`` leaves other files: safetensors writes them owner-only
    (0600)."""
    mode = 0o666 & ~_umask()
    for path in Path(folder).rglob("*.safetensors"):
        if path.is_file():
            path.chmod(mode)


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
    """Write ``obj`` as strict JSON (:func:`strict_json`), atomically."""
    text = strict_json(obj, indent=2, sort_keys=True)
    return write_atomic(path, lambda tmp: tmp.write_text(text + "\n"))


def strict_json(obj: Any, **dumps) -> str:
    """JSON text that strict readers (jq, JavaScript's ``JSON.parse``) accept: NaN and the
    infinities, which :func:`json.dumps` writes as ``NaN`` and ``Infinity``, become ``null``
    (:func:`jsonable`); what JSON cannot hold otherwise is written as its ``str``.

    Examples
    --------
    >>> strict_json({"cm": float("nan"), "n": np.int64(3)}, sort_keys=True)
    '{"cm": null, "n": 3}'
    """
    return json.dumps(jsonable(obj), allow_nan=False, default=str, **dumps)


def number(value: Any) -> float:
    """A number read back from rmlens's JSON: ``null``, which :func:`strict_json` writes for
    NaN (an undefined figure), as NaN again.

    Examples
    --------
    >>> number(None), number(3)
    (nan, 3.0)
    """
    return float("nan") if value is None else float(value)


def write_text(text: str, path: str | Path) -> Path:
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_bytes(data: bytes, path: str | Path) -> Path:
    return write_atomic(path, lambda tmp: tmp.write_bytes(data))


def json_digest(obj: Any, *, sort_keys: bool = True,
                default: Callable[[Any], Any] | None = None):  # fmt: skip
    """sha1 (a ``hashlib`` object, to update further) of ``json.dumps(obj, sort_keys=sort_keys,
    default=default)``, UTF-8 encoded: :func:`json_sha1` before its hex digest."""
    return hashlib.sha1(json.dumps(obj, sort_keys=sort_keys, default=default).encode())


def json_sha1(obj: Any, length: int | None = None, *, sort_keys: bool = True,
              default: Callable[[Any], Any] | None = None) -> str:  # fmt: skip
    """Fingerprint of JSON-able settings: the sha1 hex digest of their JSON text.

        json_sha1(obj, n) == sha1(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:n]

    Parameters
    ----------
    obj : JSON-able
        The settings (dicts, lists, strings, numbers, None).
    length : int, optional
        Hex digits kept; all 40 by default.
    sort_keys : bool, default=True
        Passed to ``json.dumps``: True makes the key order of dicts irrelevant; False keeps
        it in the text (and so in the fingerprint).
    default : callable, optional
        Passed to ``json.dumps``: how to write what JSON cannot (``str`` for paths, dtypes).

    Returns
    -------
    str

    Examples
    --------
    >>> json_sha1({"b": 1, "a": [1, 2]}, 12) == json_sha1({"a": [1, 2], "b": 1}, 12)
    True
    >>> json_sha1([])  # sha1 of the text "[]"
    '97d170e1550eee4afc0af065b78cda302a97674c'
    """
    return json_digest(obj, sort_keys=sort_keys, default=default).hexdigest()[:length]


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
