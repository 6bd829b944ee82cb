"""How a saved experiment differs from the one about to run, in the words of
:meth:`~rmlens.experiment.ExperimentDir.resume`."""

from __future__ import annotations

import json
from typing import Any


def shown(value: Any) -> str:
    """A setting as the record holds it: strings quoted, None as null.

    Parameters
    ----------
    value : object
        The setting's value.

    Returns
    -------
    str
        JSON for a string, list, dict or None; ``str(value)`` otherwise.
    """
    return json.dumps(value) if isinstance(value, (str, list, dict, type(None))) else str(value)


def with_defaults(saved: dict, defaults: dict) -> dict:
    """``saved`` with every key it lacks (nested too) taken from ``defaults``.

    Parameters
    ----------
    saved : dict
        Settings as saved.
    defaults : dict
        The settings' defaults.

    Returns
    -------
    dict
        A copy of ``saved``, completed.
    """
    out = dict(saved)
    for key, value in defaults.items():
        if key not in out:
            out[key] = value
        elif isinstance(value, dict) and isinstance(out[key], dict):
            out[key] = with_defaults(out[key], value)
    return out


def other_data(saved: dict, record: dict, keys: tuple[str, ...], size_key: str) -> str:
    """How the data differ: pair counts when they do, and the fingerprints.

    Parameters
    ----------
    saved : dict
        The saved record.
    record : dict
        The record now.
    keys : tuple of str
        The records' fingerprint keys; at least one must differ.
    size_key : str
        The records' key of the data size.

    Returns
    -------
    str
        The words of :meth:`ExperimentDir.resume` for other data.
    """
    n_old, n_now = saved.get(size_key), record.get(size_key)
    size = f"{n_old} pairs (saved) vs {n_now} (now), " if n_old != n_now else (
        f"{n_now} pairs, " if n_now is not None else ""
    )
    key = next(k for k in keys if saved.get(k) != record.get(k))
    return (
        f"other data ({size}fingerprint {saved.get(key)} vs {record.get(key)}: "
        "pairs, margins or groups changed)"
    )
