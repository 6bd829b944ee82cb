"""Atomic writes: write to a temporary name in the same folder, then rename (DESIGN.md 6)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
