"""Pair features and their registry (DESIGN.md section 3, attribution).

A *response* feature is computed on the chosen and on the rejected text and gives three
columns, ``<name>_chosen``, ``<name>_rejected`` and ``<name>_diff`` (chosen minus rejected).
A *pair* feature gives one column per pair. Every other column of the pair table is a
*metadata* feature (numeric, or categorical for text), except the excluded ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rmlens._errors import InputError
from rmlens.attribution._config import DEFAULT_EXCLUDE
from rmlens.data import BUILTIN_PAIR, BUILTIN_RESPONSE, Pairs, Texts, to_text

# Columns that are never features: pair identity and texts, and the audit's own outputs
# (``category`` is derived from TM/TG/CM; ``group`` repeats the grouping column).
NON_FEATURE_COLUMNS = frozenset(
    {"id", "prompt", "chosen", "rejected", "group", "category", "tm", "tg", "cm", "n_in", "n_out"}
)
_AUDIT_COLUMN = re.compile(r"^(tm|tg|cm)_")

# `mechanism` is the label-deciding mechanism planted by `rmlens data synth`: the ground truth
# that attribution is meant to recover. As a feature it would leak the answer (a regressor
# could explain CM by the planted label instead of by observable pair properties).


@dataclass(frozen=True)
class Feature:
    """One registered feature.

    Parameters
    ----------
    name : str
        The feature's name (its column, or column prefix).
    description : str
        One line.
    source : str
        Where the feature comes from (package, lexicon, or "user").
    kind : {"response", "pair"}
        Response features give ``_chosen``, ``_rejected`` and ``_diff`` columns.
    func : callable
        Response: ``func(texts: pd.Series) -> array (n_texts,)``.
        Pair: ``func(pairs: pd.DataFrame) -> array (n_pairs,)`` (categorical allowed).
    builtin : bool, default=False
        Built-in response functions take the shared text context instead of a Series.
    """

    name: str
    description: str
    source: str
    kind: str
    func: Callable
    builtin: bool = False


_REGISTRY: dict[str, Feature] = {}


def register_feature(
    name: str,
    func: Callable,
    description: str,
    source: str = "user",
    *,
    kind: str = "response",
    replace: bool = False,
) -> Feature:
    """Add a feature computed by ``func`` to every later ``pair_features`` call.

    Parameters
    ----------
    name : str
        Column stem: a response feature gives ``<name>_chosen``, ``<name>_rejected``,
        ``<name>_diff``; a pair feature gives ``<name>``.
    func : callable
        ``kind="response"``: takes a ``pd.Series`` of response texts, returns numbers
        of the same length. ``kind="pair"``: takes the pair table, returns one value per pair.
    description : str
        One line, shown by ``rmlens attribute --list-features``.
    source : str, default="user"
    kind : {"response", "pair"}, default="response"
    replace : bool, default=False
        Replace a feature of the same name instead of raising.

    Returns
    -------
    Feature

    Examples
    --------
    >>> from rmlens.attribution import register_feature, unregister_feature
    >>> f = register_feature("n_digits", lambda s: s.str.count(r"\\d"), "digits in the text")
    >>> f.kind
    'response'
    >>> unregister_feature("n_digits")
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"feature name must be an identifier (letters, digits, _), got {name!r}")
    if kind not in ("response", "pair"):
        raise ValueError(f"feature kind must be 'response' or 'pair', got {kind!r}")
    if not callable(func):
        raise TypeError(f"feature {name!r}: func must be callable, got {type(func).__name__}")
    if name in _REGISTRY and not replace:
        raise ValueError(f"feature {name!r} is already registered; pass replace=True")
    feature = Feature(name, " ".join(description.split()), source, kind, func)
    _REGISTRY[name] = feature
    return feature


def unregister_feature(name: str) -> None:
    """Remove a registered feature (built-in ones too).

    Parameters
    ----------
    name : str
        The feature's name; an unknown one is a KeyError.
    """
    if name not in _REGISTRY:
        raise KeyError(f"no feature named {name!r}; see list_features()")
    del _REGISTRY[name]


def list_features() -> pd.DataFrame:
    """The registered features: ``name, kind, columns, description, source``.

    Metadata features (every other column of the pair table) are listed as one row.

    Returns
    -------
    DataFrame
        One row per feature, ``name, kind, columns, description, source``.
    """
    rows = []
    for f in _REGISTRY.values():
        cols = f"{f.name}_chosen, _rejected, _diff" if f.kind == "response" else f.name
        rows.append((f.name, f.kind, cols, f.description, f.source))
    rows.append((
        "<metadata>", "metadata", "<column>",
        "every other pair-table column: numeric as is, text as a category; not id/prompt/"
        "chosen/rejected, the audit's outputs, or 'mechanism' (planted ground truth: leaks); "
        "attribution leaves out identifier-like columns (the grouping column, *_id, one value "
        "per group, free text) unless named in --features",
        "pair table",
    ))
    return pd.DataFrame(rows, columns=["name", "kind", "columns", "description", "source"])


def _install_builtins() -> None:
    for name, desc, source, func in BUILTIN_RESPONSE:
        _REGISTRY[name] = Feature(name, desc, source, "response", func, builtin=True)
    for name, desc, source, func in BUILTIN_PAIR:
        _REGISTRY[name] = Feature(name, desc, source, "pair", func, builtin=True)


_install_builtins()
_BUILTIN_PAIR_COLUMNS = frozenset(name for name, *_ in BUILTIN_PAIR)


def _as_text(values: pd.Series) -> pd.Series:
    if values.map(lambda v: isinstance(v, str)).all():
        return values.astype(object)

    def text(v) -> str:
        if isinstance(v, str):
            return v
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return ""
        return to_text(v)

    return values.map(text).astype(object)


def _as_feature(values, n: int, name: str) -> pd.Series:
    s = pd.Series(values).reset_index(drop=True)
    if len(s) != n:
        raise ValueError(f"feature {name!r} returned {len(s)} values for {n} rows")
    if pd.api.types.is_bool_dtype(s.dtype):
        return s.astype(float)
    if isinstance(s.dtype, pd.CategoricalDtype):
        return s
    if pd.api.types.is_numeric_dtype(s.dtype):
        return s.astype(float)
    return s.map(lambda v: np.nan if pd.isna(v) else str(v)).astype("category")


def _metadata(pairs: pd.DataFrame, exclude: set[str]) -> tuple[dict[str, pd.Series], dict]:
    out, skipped = {}, {}
    for col in pairs.columns:
        if (not isinstance(col, str) or col in NON_FEATURE_COLUMNS or col in exclude
                or _AUDIT_COLUMN.match(col)
                or col in _BUILTIN_PAIR_COLUMNS):
            continue
        s = pairs[col].reset_index(drop=True)
        if pd.api.types.is_bool_dtype(s.dtype) or pd.api.types.is_numeric_dtype(s.dtype):
            out[col] = s.astype(float)
        elif pd.api.types.is_datetime64_any_dtype(s.dtype):
            skipped[col] = "datetime column"
        elif s.map(lambda v: v is None or isinstance(v, (str, int, float, bool, np.generic))).all():
            out[col] = _as_feature(s, len(s), col)
        else:
            skipped[col] = "values are not scalars (lists, dicts or arrays)"
    return out, skipped


def pair_features(
    pairs: pd.DataFrame,
    *,
    tokenizer=None,
    extra: Mapping[str, Callable] | None = None,
    features: Sequence[str] | None = None,
    exclude: Sequence[str] = DEFAULT_EXCLUDE,
    metadata: bool = True,
) -> pd.DataFrame:
    """Features of each preference pair, vectorized over all pairs.

    Parameters
    ----------
    pairs : DataFrame, shape (n_pairs, ...)
        Pair table (``prompt``, ``chosen``, ``rejected`` and any metadata), or the
        memorization table of an experiment directory.
    tokenizer : transformers tokenizer, optional
        Gives ``len_tokens_*``; skipped without one.
    extra : mapping of str to callable, optional
        More response features for this call only: ``{name: func(texts) -> numbers}``.
    features : sequence of str, optional
        Registered feature names to compute (default all); metadata columns come on top.
    exclude : sequence of str, default=("mechanism",)
        Pair-table columns never used as features. ``mechanism`` (planted by
        ``rmlens data synth``) names what decided the label: it is the ground truth that
        attribution should recover, so as a feature it would leak.
    metadata : bool, default=True
        Add every other pair-table column as a feature.

    Returns
    -------
    DataFrame, shape (n_pairs, n_columns)
        Same index as ``pairs``; numeric columns as float, categories as ``category``.
        ``.attrs["skipped"]`` maps each feature or column left out to the reason.

    Examples
    --------
    >>> import pandas as pd
    >>> from rmlens.attribution import pair_features
    >>> pairs = pd.DataFrame({"prompt": ["Hi?"], "chosen": ["Sure, here it is."],
    ...                       "rejected": ["I can't help with that."]})
    >>> f = pair_features(pairs)
    >>> f[["refusal_chosen", "refusal_rejected", "refusal_diff"]].iloc[0].tolist()
    [0.0, 1.0, -1.0]
    """
    _check_pairs(pairs)
    n = len(pairs)
    names = list(_REGISTRY) if features is None else list(features)
    unknown = [f for f in names if f not in _REGISTRY]
    if unknown:
        raise ValueError(f"unknown features {unknown}; see list_features()")
    context = _context(pairs, tokenizer)
    pair_cols, resp_cols, skipped = _registered(names, context, tokenizer, n)
    for name, func in (extra or {}).items():
        resp_cols.update(_response_columns(name, func(context.texts.texts.copy()), n))
    meta, meta_skipped = _metadata(pairs, set(exclude)) if metadata else ({}, {})
    skipped.update(meta_skipped)
    skipped.update({c: "excluded" for c in exclude if c in pairs.columns})
    out = pd.DataFrame({**pair_cols, **meta, **resp_cols})
    out.index = pairs.index
    out.attrs["skipped"] = skipped
    return out


def _check_pairs(pairs: pd.DataFrame) -> None:
    """Refuse a pair table without the prompt and response columns."""
    for field in ("prompt", "chosen", "rejected"):
        if field not in pairs.columns:
            raise InputError(f"pair table: column '{field}' is missing (found {list(pairs)})")


def _context(pairs: pd.DataFrame, tokenizer) -> Pairs:
    """What the built-in features read: the table, the prompts, the chosen then rejected texts."""
    chosen = _as_text(pairs["chosen"].reset_index(drop=True))
    rejected = _as_text(pairs["rejected"].reset_index(drop=True))
    prompt = _as_text(pairs["prompt"].reset_index(drop=True))
    table = pairs.reset_index(drop=True)
    both = Texts(pd.concat([chosen, rejected], ignore_index=True), tokenizer)
    return Pairs(table, prompt, both)


def _registered(
    names: list[str], context: Pairs, tokenizer, n: int
) -> tuple[dict[str, pd.Series], dict[str, pd.Series], dict[str, str]]:
    """The columns of the registered features ``names``: pair columns, response columns,
    and the features skipped with the reason."""
    both, table = context.texts, context.table
    skipped: dict[str, str] = {}
    pair_cols: dict[str, pd.Series] = {}
    resp_cols: dict[str, pd.Series] = {}
    for name in names:
        f = _REGISTRY[name]
        if name == "len_tokens" and tokenizer is None:
            skipped[name] = "no tokenizer given"
            continue
        if f.kind == "response":
            try:
                values = f.func(both) if f.builtin else f.func(both.texts.copy())
            except ModuleNotFoundError as err:  # an optional lexicon package is missing
                skipped[name] = str(err)
                continue
            resp_cols.update(_response_columns(name, values, n))
        else:
            values = f.func(context) if f.builtin else f.func(table.copy())
            if values is None or pd.Series(values).isna().all():
                skipped[name] = "column absent or empty"
                continue
            pair_cols[name] = _as_feature(values, n, name)
    return pair_cols, resp_cols, skipped


def _response_columns(name: str, values, n: int) -> dict[str, pd.Series]:
    """``<name>_chosen``, ``_rejected`` and ``_diff`` from the 2n values of a response feature."""
    v = pd.Series(np.asarray(values, dtype=float))
    if len(v) != 2 * n:
        raise ValueError(f"feature {name!r} returned {len(v)} values for {2 * n} texts")
    c, r = v.iloc[:n].reset_index(drop=True), v.iloc[n:].reset_index(drop=True)
    return {f"{name}_chosen": c, f"{name}_rejected": r, f"{name}_diff": c - r}
