"""Short display forms of numbers and texts: the one number format that the report's tables
and the sentences it shares with the console (``rmlens.memorization``'s summary) use."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from rmlens._io import jsonable as clean

ROUNDING_NOISE = 1e-12  # below this a float is the rounding of equal values (a std of copies)


def fmt(value: Any, digits: int = 3) -> str:
    """Short display form of a table cell or a number in a sentence: the report's one number
    format. Integers with thousands separators; floats to ``digits`` decimals, those too small
    to show that way (0 < |x| < 10^-digits) to two significant digits (``9.6e-07``) unless
    they are rounding noise (under ``ROUNDING_NOISE``: 0), large
    ones (|x| >= 10^5) as whole numbers; booleans as yes/no; missing values as an en dash."""
    if value is None or value is pd.NA:
        return "\u2013"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            return "\u2013"
        if abs(value) >= 1e15:
            return f"{value:.3g}"
        if abs(value) >= 1e5:
            return f"{value:,.0f}"
        if abs(value) < ROUNDING_NOISE:  # a difference of equal floats: 0, as written
            value = 0.0
        if value != 0 and abs(value) < 10 ** (-digits):
            return f"{value:.2g}"
        return f"{value:.{digits}f}"
    if isinstance(value, (list, tuple, np.ndarray, Mapping)):
        return snippet(json.dumps(clean(value), ensure_ascii=False, default=str), 300)
    return str(value)


def snippet(text: Any, limit: int) -> str:
    """First ``limit`` characters of ``text`` on one line, with an ellipsis when cut."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "\u2026"
