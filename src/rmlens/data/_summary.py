"""Summary statistics of a pair table, for ``rmlens data inspect``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from rmlens.data._load import read_pairs
from rmlens.data._schema import to_text


def _stats(values: Any) -> dict[str, float] | None:
    x = np.asarray(values, dtype="float64")
    x = x[~np.isnan(x)]
    if x.size == 0:
        return None
    return {
        "mean": round(float(x.mean()), 4),
        "std": round(float(x.std()), 4),
        "min": round(float(x.min()), 4),
        "median": round(float(np.median(x)), 4),
        "max": round(float(x.max()), 4),
    }


def summarize(pairs: pd.DataFrame) -> dict[str, Any]:
    """Counts and statistics of a canonical pair table.

    Parameters
    ----------
    pairs : pandas.DataFrame
        A table from :func:`load_pairs` or :func:`synthesize`, shape ``(n_pairs, n_columns)``.

    Returns
    -------
    dict
        JSON-ready: ``pairs``, ``columns``, ``format`` (text / conversational counts),
        ``users`` (count, or None without ``user_id``) and ``pairs_per_user``, ``models``
        (per system: pairs, times chosen, win rate), ``margin`` statistics (or None),
        ``length`` (characters and words of prompt, chosen and rejected), ``chosen_longer``
        (share of pairs whose chosen response has more characters), ``duplicates`` (repeated
        ids and repeated prompt/chosen/rejected), ``identical_responses``,
        ``empty_responses`` and ``mechanisms`` (counts, or None).

    Examples
    --------
    >>> from rmlens.data import load_pairs
    >>> summarize(load_pairs([{"prompt": "2+2?", "chosen": "4", "rejected": "5"}]))["pairs"]
    1
    """
    n = len(pairs)
    texts = {c: [to_text(v) for v in pairs[c]] for c in ("prompt", "chosen", "rejected")}
    out: dict[str, Any] = {"pairs": n, "columns": [str(c) for c in pairs.columns]}
    conversational = int(sum(not isinstance(v, str) for v in pairs["chosen"]))
    out["format"] = {"text": n - conversational, "conversational": conversational}

    if "user_id" in pairs:
        users = pairs["user_id"].dropna()
        counts = users.value_counts()
        out["users"] = int(counts.size)
        out["pairs_per_user"] = _stats(counts.to_numpy())
        out["missing_user_id"] = int(n - users.size)
    else:
        out["users"] = None

    models: dict[str, dict[str, Any]] = {}
    if "chosen_model" in pairs and "rejected_model" in pairs:
        chosen = pairs["chosen_model"].dropna().value_counts()
        rejected = pairs["rejected_model"].dropna().value_counts()
        for name in sorted(set(chosen.index) | set(rejected.index)):
            wins, losses = int(chosen.get(name, 0)), int(rejected.get(name, 0))
            models[str(name)] = {
                "pairs": wins + losses,
                "chosen": wins,
                "win_rate": round(wins / (wins + losses), 4),
            }
    out["models"] = models or None
    out["margin"] = _stats(pairs["margin"]) if "margin" in pairs else None

    chars = {c: np.array([len(t) for t in v], dtype="float64") for c, v in texts.items()}
    words = {c: np.array([len(t.split()) for t in v], dtype="float64") for c, v in texts.items()}
    out["length"] = {c: {"chars": _stats(chars[c]), "words": _stats(words[c])} for c in texts}
    longer = chars["chosen"] > chars["rejected"]
    differ = chars["chosen"] != chars["rejected"]
    out["chosen_longer"] = round(float(longer.sum() / differ.sum()), 4) if differ.any() else None

    keys = list(zip(texts["prompt"], texts["chosen"], texts["rejected"]))
    out["duplicates"] = {
        "ids": int(pairs["id"].duplicated().sum()) if "id" in pairs else 0,
        "pairs": int(n - len(set(keys))),
    }
    responses = list(zip(texts["chosen"], texts["rejected"]))
    out["identical_responses"] = int(sum(c == r for c, r in responses))
    out["empty_responses"] = int(sum(not c.strip() or not r.strip() for c, r in responses))
    if "mechanism" in pairs:
        counts = pairs["mechanism"].value_counts()
        out["mechanisms"] = {str(k): int(v) for k, v in counts.sort_index().items()}
    else:
        out["mechanisms"] = None
    return out


def inspect_pairs(
    source: Any,
    *,
    column_map: Mapping[str, str] | None = None,
    split: str | None = None,
) -> dict[str, Any]:
    """Read a preference source leniently: summary of the good pairs plus every problem.

    Parameters
    ----------
    source, column_map, split
        As in :func:`load_pairs`.

    Returns
    -------
    dict
        ``source``, ``layout`` (explicit, implicit or rankings), ``summary`` (see
        :func:`summarize`, over the pairs without problems) and ``problems`` (list of str).

    Raises
    ------
    InputError
        When the source cannot be read at all (missing, empty, unknown layout).
    """
    loaded = read_pairs(source, column_map=column_map, split=split, collect=True)
    return {
        "source": loaded.name,
        "layout": loaded.layout,
        "summary": summarize(loaded.table),
        "problems": loaded.problems,
    }
