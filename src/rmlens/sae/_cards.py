"""Name cards: what each active latent of the SAE is, read from the data.

A card (one per latent active on some response) holds the latent's top-activating
responses; its Spearman correlation with the hand-built response features (attribution's
built-in ones, computed on the responses, plus ``model=<name>`` for the system that wrote
each response); its weight in the audited heads, the head's weight on the raw features
(``w / scale``, standardization undone) dotted with the latent's unit decoder direction,
mean and std over the runs (linear and logistic heads; MLP heads have none); and, once
``rmlens attribute DIR --features sae`` has run with this SAE, its SHAP share for TM, TG
and CM.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from torch import nn

from rmlens._errors import InputError
from rmlens.data import BUILTIN_RESPONSE, Texts
from rmlens.experiment import ExperimentDir
from rmlens.sae._responses import Responses
from rmlens.sae._topk import TopKSAE
from rmlens.stats import spearman_columns

N_CORRELATES = 5  # hand-built features listed per card, strongest first
MAX_CHARS = 1000  # a top response's text on a card
MAX_PROMPT_CHARS = 300


def latent_name(j: int) -> str:
    """The pair feature of latent ``j``: ``sae_<j>``."""
    return f"sae_{j}"


def response_features(resp: Responses) -> pd.DataFrame:
    """The hand-built features of each response.

    Parameters
    ----------
    resp : Responses
        The audit's unique responses (``audit_responses``).

    Returns
    -------
    DataFrame of shape (n_responses, n_features)
        Attribution's built-in response features (``len_tokens`` with the backbone's
        tokenizer; a feature whose optional package is missing is left out), then
        ``model=<name>``, 1.0 where that system wrote the response, where models are known.
    """
    texts = Texts(pd.Series(resp.text, dtype=object), getattr(resp.backbone, "tokenizer", None))
    columns: dict[str, np.ndarray] = {}
    for name, _, _, func in BUILTIN_RESPONSE:
        if name == "len_tokens" and texts.tokenizer is None:
            continue
        try:
            columns[name] = np.asarray(func(texts), dtype=float)
        except ModuleNotFoundError:  # an optional lexicon package is missing
            continue
    models = pd.Series(resp.model, dtype=object)
    for model in sorted(models.dropna().unique()):
        columns[f"model={model}"] = (models == model).to_numpy(dtype=float)
    return pd.DataFrame(columns)


def correlations(z: np.ndarray, features: pd.DataFrame) -> np.ndarray:
    """Spearman correlation (n_latents, n_features) of each latent's activations with each
    feature over the responses (rows where the feature is finite); NaN where either side is
    constant (:func:`rmlens.stats.spearman_columns`)."""
    return spearman_columns(z, features.to_numpy(dtype=float))


def head_weights(heads: list[Any], sae: TopKSAE) -> np.ndarray:
    """Weight (n_runs, n_latents) of each run's head along each latent's unit decoder
    direction: (w / scale) . u_j, the reward's change per unit step along u_j in the raw
    features; NaN rows for heads that are not linear (MLP)."""
    u = sae.directions  # (n_latents, d)
    rows = []
    for head in heads:
        net = getattr(getattr(head, "head_", None), "net", None)
        if not isinstance(net, nn.Linear):
            rows.append(np.full(len(u), np.nan))
            continue
        w = net.weight.detach().double().numpy()[0] / head.head_.scale.double().numpy()  # (d,)
        rows.append(u @ w)
    return np.array(rows).reshape(len(heads), len(u))


def shap_shares(directory: Path, sae_sha1: str) -> tuple[dict[str, dict], str | None]:
    """Per latent name and target, its SHAP share and rank, from the attribution in
    ``directory`` when it ran with this SAE's latents (``attribution.json``'s ``sae``);
    else ``{}`` and why not."""
    exp = ExperimentDir(directory)
    if not (exp / "attribution.parquet").is_file() or not (exp / "attribution.json").is_file():
        return {}, "no attribution yet: run `rmlens attribute DIR --features sae`"
    try:
        record = exp.read_json("attribution.json")
        imp = exp.read_table("attribution.parquet")
    except InputError:  # unparsable, or unreadable
        return {}, "attribution.json or attribution.parquet is unreadable"
    if (record.get("sae") or {}).get("sae_sha1") != sae_sha1:
        return {}, ("the attribution ran without this SAE's latents: run `rmlens attribute DIR "
                    "--features sae`")
    regressor = "lightgbm" if "lightgbm" in set(imp.regressor) else imp.regressor.iloc[0]
    imp = imp[imp.regressor == regressor]
    out: dict[str, dict] = {}
    for target, rows in imp.groupby("target"):
        total = rows.importance.sum()
        latents = rows[rows.feature.str.match(r"^sae_\d+$")]
        among = latents.importance.rank(ascending=False, method="first")
        for row, r in zip(latents.itertuples(), among):
            out.setdefault(row.feature, {})[target] = {
                "share": float(row.importance / total) if total > 0 else float("nan"),
                "rank": int(row.rank), "rank_among_latents": int(r),
                "informative": bool(getattr(row, "informative", True)),
            }
    joined = (record.get("sae") or {}).get("rule")
    note = f"SHAP of {regressor}, from attribution.parquet"
    return out, note + (f" ({joined})" if joined else "")


def name_cards(
    z: np.ndarray, resp: Responses, sae: TopKSAE, *, top: int, shap: dict[str, dict]
) -> tuple[list[dict], pd.DataFrame]:
    """The cards of the active latents, and their correlation table.

    Parameters
    ----------
    z : ndarray of shape (n_responses, n_latents)
        Latent activations of the responses.
    resp : Responses
    sae : TopKSAE
    top : int
        Top-activating responses per card.
    shap : dict
        ``shap_shares``'s first value (may be empty).

    Returns
    -------
    cards : list of dict
        One per active latent, by latent index.
    correlations : DataFrame
        ``latent`` and one column per hand-built feature: Spearman's rho.
    """
    active = np.flatnonzero((z > 0).any(0))
    features = response_features(resp)
    rho = correlations(z[:, active], features)  # (n_active, n_features)
    weights = head_weights(resp.heads, sae)[:, active]  # (n_runs, n_active)
    cards = []
    for a, j in enumerate(active):
        on = z[:, j] > 0
        best = np.argsort(-z[:, j], kind="stable")[: min(top, int(on.sum()))]
        strongest = [c for c in np.argsort(-np.nan_to_num(np.abs(rho[a]), nan=-1.0))
                     if np.isfinite(rho[a, c])][:N_CORRELATES]  # fmt: skip
        runs = weights[:, a][np.isfinite(weights[:, a])]
        cards.append({
            "latent": int(j), "name": latent_name(j),
            "frequency": float(on.mean()), "mean_activation": float(z[on, j].mean()),
            "top_responses": [{"activation": float(z[i, j]), "model": resp.model[i],
                               "text": _cut(resp.text[i], MAX_CHARS),
                               "prompt": _cut(resp.prompt[i], MAX_PROMPT_CHARS)}
                              for i in best],
            "correlates": [{"feature": features.columns[c], "spearman": float(rho[a, c])}
                           for c in strongest],
            "head_weight": {"mean": _mean(runs), "std": _std(runs), "runs": len(runs)},
            "shap": shap.get(latent_name(j)),
        })  # fmt: skip
    table = pd.DataFrame(rho, columns=features.columns)
    table.insert(0, "latent", active.astype(int))
    return cards, table


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _mean(v: np.ndarray) -> float:
    return float(v.mean()) if len(v) else math.nan


def _std(v: np.ndarray) -> float:
    return float(v.std(ddof=1)) if len(v) > 1 else math.nan
