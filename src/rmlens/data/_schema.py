"""The canonical pair table (DESIGN.md section 1): column names, ids, text rendering."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from rmlens._io import jsonable

CORE_COLUMNS = (
    "id",
    "prompt",
    "chosen",
    "rejected",
    "user_id",
    "chosen_model",
    "rejected_model",
    "margin",
)
TEXT_COLUMNS = ("prompt", "chosen", "rejected")
LABEL_COLUMNS = ("user_id", "chosen_model", "rejected_model")
RANKING_COLUMNS = ("prompt", "responses", "ranks", "scores", "models")
ASSISTANT_TURN = "\n\nAssistant:"


def is_null(value: Any) -> bool:
    """True for None, NaN and pandas' missing-value markers."""
    if value is None:
        return True
    if type(value) is str:
        return False
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, np.floating):
        return bool(np.isnan(value))
    return type(value).__name__ in ("NAType", "NaTType")


def native(value: Any) -> Any:
    """Numpy scalars and arrays (as pandas hands them out) -> plain Python values, NaN and
    missing values kept as they are (``_io.jsonable`` with ``missing=False``)."""
    return jsonable(value, missing=False)


def is_messages(value: Any) -> bool:
    """True for a list of chat messages: dicts with a ``role`` and a ``content``."""
    return (
        isinstance(value, (list, tuple, np.ndarray))
        and len(value) > 0
        and all(isinstance(m, Mapping) and "role" in m and "content" in m for m in value)
    )


def to_text(value: Any) -> str:
    """Render a prompt or response as plain text.

    Parameters
    ----------
    value : str or list of dict
        A string, or chat messages ``[{"role": ..., "content": ...}, ...]``.

    Returns
    -------
    str
        The string unchanged; messages as ``"role: content"`` lines joined by a blank line.
        None renders as the empty string.

    Examples
    --------
    >>> to_text([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}])
    'user: Hi\\n\\nassistant: Hello'
    """
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, (list, tuple, np.ndarray)):
        parts = []
        for message in value:
            if not isinstance(message, Mapping) or "content" not in message:
                raise TypeError(f"to_text expects chat messages with 'content'; got {message!r}")
            parts.append(f"{message.get('role', '')}: {message['content']}")
        return "\n\n".join(parts)
    raise TypeError(f"to_text expects a string or a list of messages; got {type(value).__name__}")



def word_counts(texts) -> np.ndarray:
    """Whitespace-separated words of each prompt or response (:func:`to_text`).

    The length that ``len_words`` (attribution), the comparison's slices and the audit's
    length-only rule read.

    Parameters
    ----------
    texts : sequence of str or list of chat messages
        Prompts or responses, (n,).

    Returns
    -------
    ndarray of shape (n,), float
        Each text's word count.
    """
    return np.fromiter((len(to_text(t).split()) for t in texts), dtype=float, count=len(texts))

def derive_id(*parts: Any, length: int | None = 16) -> str:
    """Stable id: the first ``length`` hex digits (None: all 40) of sha1 over the parts
    rendered as text, joined by ``"\\x1f"`` (unit separator); one part hashes its text
    alone (a prompt's key).

    Parameters
    ----------
    *parts : str or list of chat messages
        What the id is of (a pair: prompt, chosen, rejected).
    length : int or None, default=16
        Hex digits kept.

    Returns
    -------
    str

    Examples
    --------
    >>> derive_id("Hi", length=8)
    '94dd9e08'
    """
    text = "\x1f".join(to_text(p) for p in parts)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:length]


def id_text(value: Any) -> str | None:
    """An id as a string (numbers become strings, 7.0 -> '7'); None when it is not usable."""
    if type(value) is str:
        return value if value.strip() else None
    if isinstance(value, bool) or is_null(value):
        return None
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if math.isinf(value):
            return None
        return str(int(value)) if float(value).is_integer() else repr(float(value))
    return None


def describe(value: Any) -> str:
    """A short, user-facing account of a bad value, for error messages ('got ...')."""
    if value is None:
        return "null"
    if is_null(value):
        return "NaN" if isinstance(value, (float, np.floating)) else "a missing value"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        if value == "":
            return "an empty string"
        if not value.strip():
            return f"whitespace only ({value!r})"
        shown = value if len(value) <= 40 else value[:37] + "..."
        return repr(shown)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return f"the number {value}"
    if isinstance(value, Mapping):
        keys = ", ".join(repr(k) for k in list(value)[:4])
        return f"an object with keys {keys}" if keys else "an empty object"
    if isinstance(value, (list, tuple, np.ndarray)):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    return f"a value of type {type(value).__name__}"
