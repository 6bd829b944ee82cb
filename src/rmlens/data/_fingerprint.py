"""One fingerprint of a pair table: what resuming an audit, a training run or a comparison
checks before it reuses saved work.

It covers every column that training or estimation reads, so a change to any of them (a
margin, a grouping label, a ranking's scores) makes a saved run stale. It is stable across
processes and machines: SHA-1 of a canonical encoding of each value (JSON with sorted keys,
numbers as float64), never Python's salted ``hash()``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import numpy as np
import pandas as pd

from rmlens._errors import InputError

# What a trainer reads: the pair (or ranking) and its margin. An audit adds its grouping
# column (``user_id`` or ``--group-by``).
FINGERPRINT_COLUMNS = (
    "id",
    "ranking_id",
    "prompt",
    "chosen",
    "rejected",
    "margin",
    "responses",
    "scores",
    "ranks",
)


def _plain(value):
    """A JSON-ready copy: arrays to lists, NumPy scalars to Python, numbers to float."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)  # 1 and 1.0 (CSV vs JSONL) are the same margin
    return str(value)


def _column_bytes(column: pd.Series) -> bytes:
    if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
        values = column.to_numpy(dtype=np.float64, na_value=np.nan)
        values = np.where(np.isnan(values), np.nan, values)  # one NaN bit pattern
        return b"f8" + values.astype("<f8").tobytes()
    digest = hashlib.sha1()
    for value in column.array:
        if isinstance(value, str):
            data = b"s" + value.encode("utf-8", "surrogatepass")
        elif value is None or (isinstance(value, float) and np.isnan(value)):
            data = b"n"
        else:
            data = b"j" + json.dumps(_plain(value), sort_keys=True, default=str).encode()
        digest.update(len(data).to_bytes(8, "little") + data)
    return b"o" + digest.digest()


def data_sha1(pairs: pd.DataFrame, columns: Sequence[str] | None = None) -> str:
    """A stable 16-hex-digit fingerprint of the columns of ``pairs`` that training reads.

    Parameters
    ----------
    pairs : DataFrame
        A pair table (``load_pairs``) or rankings (``load_rankings``).
    columns : sequence of str, optional
        Columns to cover, in this order; each must be in ``pairs``. Default: those of
        :data:`FINGERPRINT_COLUMNS` present (id, prompt, chosen, rejected, margin, and the
        ranking columns).

    Returns
    -------
    str
        Equal for equal values in the same row order, whatever the process, the file format
        (an int margin equals the same float) or the dtype; different when any covered value,
        the row order or the set of covered columns differs.

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"id": ["a"], "prompt": ["q"], "chosen": ["y"], "rejected": ["n"]})
    >>> data_sha1(t) == data_sha1(t.assign(margin=1.0))
    False
    """
    if columns is None:
        columns = [c for c in FINGERPRINT_COLUMNS if c in pairs]
    missing = [c for c in columns if c not in pairs]
    if missing:
        raise InputError(
            f"no column {missing[0]!r} to fingerprint (columns: {', '.join(map(str, pairs))})"
        )
    digest = hashlib.sha1(f"rows={len(pairs)}".encode())
    for name in dict.fromkeys(columns):  # each once, in order
        digest.update(f"\x1e{name}\x1f".encode())
        digest.update(_column_bytes(pairs[name]))
    return digest.hexdigest()[:16]
