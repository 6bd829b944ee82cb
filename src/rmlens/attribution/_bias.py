"""Shortcut features of the bias-only model that ``poe`` and ``reweight`` train against."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from rmlens._errors import InputError, RmlensNote
from rmlens.attribution._features import _REGISTRY, pair_features
from rmlens.rewards.objectives import objective_of


def _model_identity(pairs: pd.DataFrame) -> pd.DataFrame | None:
    """One column per system: 1 if it wrote the chosen response, -1 if the rejected one."""
    if not {"chosen_model", "rejected_model"} <= set(pairs):
        return None
    chosen = pairs["chosen_model"].astype("string").fillna("")
    rejected = pairs["rejected_model"].astype("string").fillna("")
    models = sorted((set(chosen) | set(rejected)) - {""})
    if len(models) < 2:
        return None
    return pd.DataFrame(
        {
            f"model={m}": (chosen == m).to_numpy(float) - (rejected == m).to_numpy(float)
            for m in models
        },
        index=pairs.index,
    )


def bias_features(pairs: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """phi(chosen) - phi(rejected) of every pair, for the bias-only model of an objective.

    Parameters
    ----------
    pairs : DataFrame, shape (n_pairs, ...)
        The pair table.
    names : sequence of str
        Registered response features (``list_features()``: ``len_words``, ``compliance``,
        ``refusal``, ...) and ``model``: model identity, one column per system of
        ``chosen_model``/``rejected_model`` (+1 chosen, -1 rejected).

    Returns
    -------
    DataFrame, shape (n_pairs, k)
        One column per feature (``model`` gives one per system), same index as ``pairs``.
        ``.attrs["skipped"]`` maps a feature left out to the reason (``model`` without
        model columns).

    Examples
    --------
    >>> import pandas as pd
    >>> pairs = pd.DataFrame({"prompt": ["Hi"], "chosen": ["Sure, here it is."],
    ...                       "rejected": ["No."]})
    >>> bias_features(pairs, ["len_words", "compliance"]).iloc[0].tolist()
    [3.0, 1.0]
    """
    names = list(dict.fromkeys(names))
    unknown = [n for n in names if n != "model" and n not in _REGISTRY]
    if unknown:
        raise InputError(
            f"`bias_features`: unknown feature(s) {', '.join(unknown)}; use 'model' or a "
            "registered feature (rmlens attribute --list-features)"
        )
    pair_level = [n for n in names if n != "model" and _REGISTRY[n].kind != "response"]
    if pair_level:
        raise InputError(
            f"`bias_features`: {', '.join(pair_level)} describe(s) the pair, not each "
            "response; a bias feature needs a value per response (or 'model')"
        )
    response = [n for n in names if n != "model"]
    columns, skipped = {}, {}
    if response:
        table = pair_features(pairs, features=response, metadata=False)
        skipped.update({n: why for n, why in table.attrs["skipped"].items() if n in response})
        columns.update({n: table[f"{n}_diff"] for n in response if f"{n}_diff" in table})
    out = pd.DataFrame(columns, index=pairs.index)
    if "model" in names:
        models = _model_identity(pairs)
        if models is None:
            skipped["model"] = "no chosen_model and rejected_model columns with 2+ systems"
        else:
            out = pd.concat([out, models], axis=1)
    if out.shape[1] == 0:
        raise InputError(
            f"`bias_features`: none of {', '.join(names)} could be computed on this data "
            f"({'; '.join(f'{k}: {v}' for k, v in skipped.items())})"
        )
    out = out.astype(float).fillna(0.0)
    out.attrs["skipped"] = skipped
    return out


def objective_bias(pairs: pd.DataFrame, trainer_config) -> pd.DataFrame | None:
    """The bias features that the objective of ``trainer_config`` (a ``HeadConfig`` or
    ``TrainConfig``) needs (``poe``, ``reweight``), else None; a feature the data cannot
    give is said once (an :class:`~rmlens.RmlensNote`).

    Parameters
    ----------
    pairs : DataFrame, shape (n_pairs, ...)
        The pair table.
    trainer_config : HeadConfig or TrainConfig
        Its ``objective`` and ``bias_features`` are read.

    Returns
    -------
    DataFrame, shape (n_pairs, k) or None
        :func:`bias_features` of ``pairs`` for ``trainer_config.bias_features`` when the
        objective is ``poe`` or ``reweight``; None for any other objective.

    Raises
    ------
    InputError
        A bias feature that is neither ``model`` nor registered, one that describes the pair
        rather than each response, or none that can be computed on ``pairs``.
    """
    if not objective_of(trainer_config).reads_bias:
        return None
    bias = bias_features(pairs, trainer_config.bias_features)
    for name, why in bias.attrs["skipped"].items():
        warnings.warn(f"bias feature {name} left out ({why})", RmlensNote, stacklevel=2)
    return bias


def bias_summary(bias: pd.DataFrame) -> dict:
    """What the bias features say about the labels: share of pairs where each favours the
    chosen response (> 0) and where it favours the rejected one (< 0)."""
    values = bias.to_numpy(float)
    return {
        name: {"chosen_higher": float(np.mean(col > 0)), "rejected_higher": float(np.mean(col < 0))}
        for name, col in zip(bias.columns, values.T, strict=True)
    }
