"""Identifier-like metadata columns, left out of attribution's features by default.

A column that names *which* item, story, user or group a pair belongs to lets a regressor
explain TM, TG and CM by memorizing ids: with group K-fold it mostly adds noise to the
held-out R^2, and its SHAP importance (fit on all pairs) ranks an id among the "features"
(on SQuALITY, ``passage_id``, one value per story, ranked among the top TG and CM
features). Such columns are left out unless named in ``AttributeConfig.features``; the
rules, first match wins:

1. the audit's grouping column (``group_by`` in ``config.json``);
2. named like an identifier: ``id``, ``*_id``, ``*_ids``, ``*_uuid``, ``*_guid``,
   ``*_hash`` (any case), or camelCase ``*Id``/``*ID``;
3. one value per group of the audit: constant within each group, a different value in
   each (the grouping column under another name), where groups gather pairs (no more
   groups than ``max_unique_fraction`` of the pairs);
4. text with more distinct values than ``max_unique_fraction`` of the pairs: free text or
   a high-cardinality id.

Low-cardinality metadata (``wave``, ``subset``) and the model names (``chosen_model``,
``rejected_model``, built-in features) stay.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from rmlens.attribution._features import (
    _AUDIT_COLUMN,
    _BUILTIN_PAIR_COLUMNS,
    NON_FEATURE_COLUMNS,
)

ID_NAME = re.compile(r"(?i:(?:^|[_\-. ])(?:id|ids|uuid|guid|hash))$|[a-z0-9](?:Id|ID|Ids|IDs)$")


def metadata_columns(table: pd.DataFrame, exclude: Sequence[str] = ()) -> list[str]:
    """Columns of ``table`` that ``pair_features`` would use as metadata features."""
    return [
        c for c in table.columns
        if isinstance(c, str) and c not in NON_FEATURE_COLUMNS and c not in exclude
        and c not in _BUILTIN_PAIR_COLUMNS and not _AUDIT_COLUMN.match(c)
    ]


def _labels(values: pd.Series) -> pd.Series:
    return values.map(lambda v: None if _missing(v) else str(v))


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v))


def _one_per_group(values: pd.Series, groups: np.ndarray, most: float) -> bool:
    """Constant within each group and different between groups (a relabelled group).

    Only where groups gather pairs (at most ``most`` groups): with about one pair per
    group, any column of distinct values (a continuous score) would pass.
    """
    labels = _labels(values)
    if labels.isna().any():
        return False
    frame = pd.DataFrame({"v": labels.to_numpy(), "g": groups})
    per_group = frame.groupby("g").v.nunique()
    n_groups = len(per_group)
    return (2 <= n_groups <= most and bool((per_group == 1).all())
            and frame.v.nunique() == n_groups)


def identifier_columns(
    table: pd.DataFrame,
    *,
    groups: Sequence | np.ndarray | None = None,
    group_by: str | None = None,
    max_unique_fraction: float = 0.5,
    exclude: Sequence[str] = (),
) -> dict[str, str]:
    """Metadata columns that look like identifiers, with the reason for each.

    Parameters
    ----------
    table : DataFrame, shape (n_pairs, ...)
        Pair table or memorization table.
    groups : array-like, shape (n_pairs,), optional
        The audit's group of each pair (default: the ``group`` column, if any).
    group_by : str, optional
        The audit's grouping column (``config.json``'s ``group_by``).
    max_unique_fraction : float, default=0.5
        A text column with more distinct values than this share of the pairs is taken for
        free text or an id.
    exclude : sequence of str
        Columns that are not features anyway.

    Returns
    -------
    dict of str to str
        Column -> why it is taken for an identifier, in table order.

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"prompt": ["q"] * 4, "chosen": ["a"] * 4, "rejected": ["b"] * 4,
    ...                   "passage_id": [1, 1, 2, 2], "wave": [1, 2, 1, 2],
    ...                   "user": ["ann", "ann", "bo", "bo"], "group": ["u1", "u1", "u2", "u2"]})
    >>> identifier_columns(t)  # doctest: +NORMALIZE_WHITESPACE
    {'passage_id': 'named like an identifier',
     'user': 'one value per group of the audit (the grouping column under another name)'}
    """
    n = len(table)
    if groups is None and "group" in table.columns:
        groups = table["group"]
    groups = None if groups is None else pd.Series(np.asarray(groups)).astype(str).to_numpy()
    found: dict[str, str] = {}
    for col in metadata_columns(table, exclude):
        values = table[col].reset_index(drop=True)
        if col == group_by:
            found[col] = "the audit's grouping column"
        elif ID_NAME.search(col):
            found[col] = "named like an identifier"
        elif (groups is not None and len(groups) == n
              and _one_per_group(values, groups, max_unique_fraction * n)):
            found[col] = "one value per group of the audit (the grouping column under another name)"
        elif not (pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values)):
            scalar = values.map(lambda v: _missing(v) or isinstance(v, (str, int, float, bool,
                                                                        np.generic)))
            if not scalar.all():
                continue  # lists or dicts: pair_features skips them with its own reason
            distinct = _labels(values).nunique(dropna=True)
            if distinct > 2 and distinct > max_unique_fraction * n:
                found[col] = (f"{distinct} distinct values in {n} pairs: free text or a "
                              "high-cardinality id")
    return found
