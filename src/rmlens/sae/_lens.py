"""The SAE lens on a frozen audit (DESIGN.md section 3, "The SAE lens").

:func:`fit_sae` trains a TopK SAE on the unique responses' features that the audit's runs
read (``_responses``: the audit's backbone, format and embedding cache) or loads one
trained elsewhere, then writes into ``DIR/sae/``, each file atomically:

- ``cfg.json``, ``sae_weights.safetensors``: the SAE, in sae-lens's format, reading raw
  features (a standardization it was fit under is folded into its weights);
- ``config.json``: settings, figures (FVU on held-out responses, dead latents), the data's
  fingerprint and the weights' SHA-1; the same settings on the same data reuse the saved
  SAE instead of training it again;
- ``latents.parquet``: per pair, ``id`` and ``sae_<j>``, the activation of latent j on the
  chosen response minus that on the rejected one, for each latent active on some response
  (``rmlens attribute DIR --features sae`` adds them to the pair features);
- ``cards.json``: one name card per active latent (``_cards``);
- ``correlations.parquet``: ``latent`` and each hand-built response feature's Spearman rho.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import rmlens
from rmlens._base import resolve_config
from rmlens._errors import InputError, RmlensWarning
from rmlens._io import jsonable, write_json, write_parquet
from rmlens.experiment import ExperimentDir
from rmlens.progress import status
from rmlens.sae._cards import latent_name, name_cards, shap_shares
from rmlens.sae._config import SAEConfig
from rmlens.sae._files import WEIGHTS, load_sae, save_sae, weights_sha1
from rmlens.sae._responses import Responses, audit_responses
from rmlens.sae._topk import SCALE_FLOOR, TopKSAE, destandardized, fit_topk, fvu

FOLDER = "sae"
RECORD = "config.json"
LATENTS = "latents.parquet"
CARDS = "cards.json"
CORRELATIONS = "correlations.parquet"
# Settings that do not change the SAE (only what the cards show).
CARD_FIELDS = ("top_responses",)


@dataclass
class SAELens:
    """An SAE lens fitted on an audit (what :func:`fit_sae` wrote).

    Parameters
    ----------
    sae : TopKSAE
        Reads raw backbone features (n, d): ``encode``/``decode``, ``codes``, ``W_dec``
        (n_latents, d) and the unit ``directions``.
    record : dict
        ``DIR/sae/config.json``: settings, ``fvu``, ``fvu_standardized``, ``dead_latents``,
        ``n_responses``, ``n_heldout``, ``data_sha1``, ``sae_sha1``, ``reused``.
    latents : DataFrame
        ``id`` and ``sae_<j>`` per active latent: chosen minus rejected activation per pair.
    cards : list of dict
        One name card per active latent.
    correlations : DataFrame
        ``latent`` and one Spearman column per hand-built response feature.
    folder : Path
        ``DIR/sae``.
    """

    sae: TopKSAE
    record: dict
    latents: pd.DataFrame
    cards: list[dict]
    correlations: pd.DataFrame
    folder: Path


def fit_sae(
    directory: str | Path,
    config: SAEConfig | None = None,
    *,
    quiet: bool = False,
    **overrides,
) -> SAELens:
    """Fit the SAE lens on a frozen audit and write it into ``DIR/sae/``.

    Parameters
    ----------
    directory : str or Path
        The experiment directory of a frozen audit (``rmlens memorize``).
    config : SAEConfig, optional
        The settings (default ``SAEConfig()``).
    quiet : bool, default=False
        No progress bars or status lines.
    **overrides
        Fields of ``SAEConfig`` (``fit_sae(dir, k=8)``).

    Returns
    -------
    SAELens

    Raises
    ------
    InputError
        ``directory`` is not a frozen audit with saved RMs; ``sae`` is not a readable SAE
        in sae-lens's format or reads vectors of another size than the backbone's.

    Examples
    --------
    >>> lens = fit_sae("audit", n_latents=256, k=8)  # doctest: +SKIP
    >>> lens.record["fvu"], lens.record["dead_latents"]  # doctest: +SKIP
    """
    cfg = resolve_config("fit_sae", SAEConfig, config, overrides)
    cfg.check()  # ParamError (an InputError) names the field
    directory = Path(directory)
    resp = audit_responses(directory, quiet=quiet)
    folder = directory / FOLDER
    sae, record = _sae(folder, cfg, resp, quiet)
    z = sae.codes(resp.x)  # (n_responses, n_latents)
    active = np.flatnonzero((z > 0).any(0))
    record["dead_latents"] = int(sae.n_latents - len(active))
    latents = pair_latents(z, resp, active)
    shap, shap_note = shap_shares(directory, record["sae_sha1"])
    cards, table = name_cards(z, resp, sae, top=cfg.top_responses, shap=shap)
    record |= {"top_responses": cfg.top_responses, "shap": shap_note,
               "n_encoded": resp.n_encoded}  # fmt: skip
    write_parquet(latents, folder / LATENTS)
    write_json(jsonable(cards), folder / CARDS)
    write_parquet(table, folder / CORRELATIONS)
    ExperimentDir(folder).write_record(jsonable(record))
    return SAELens(sae, record, latents, cards, table, folder)


def pair_latents(z: np.ndarray, resp: Responses, active: np.ndarray) -> pd.DataFrame:
    """The pairs' latents: chosen minus rejected activation of each latent.

    Parameters
    ----------
    z : ndarray of shape (n_responses, n_latents)
        Latent activations of the audit's unique responses.
    resp : Responses
        The responses (``audit_responses``): each pair's chosen and rejected row of ``z``.
    active : ndarray of int
        The latents to keep (those active on some response).

    Returns
    -------
    DataFrame
        ``id``, then ``sae_<j>`` (float32) for each j in ``active``; one row per pair.
    """
    diff = z[resp.chosen][:, active] - z[resp.rejected][:, active]  # (n_pairs, n_active)
    frame = pd.DataFrame(diff.astype(np.float32), columns=[latent_name(j) for j in active])
    frame.insert(0, "id", resp.ids)
    return frame


def _settings(cfg: SAEConfig) -> dict[str, Any]:
    """What makes the SAE: the config less what only the cards show."""
    settings = {k: v for k, v in cfg.to_dict().items() if k not in CARD_FIELDS}
    if cfg.sae is not None:
        settings["sae"] = str(Path(cfg.sae).expanduser().resolve())
    return settings


def _sae(folder: Path, cfg: SAEConfig, resp: Responses, quiet: bool) -> tuple[TopKSAE, dict]:
    """The SAE and its record: the saved one when it was made with these settings from
    these features, else one loaded from ``cfg.sae`` or trained now (and saved)."""
    settings = _settings(cfg)
    if cfg.sae is not None:
        source = Path(settings["sae"])
        sae = load_sae(source, d=resp.d)
        sha = weights_sha1(source)  # not trained on them here: FVU on every response
        figures = _figures(sae, resp.x, np.arange(len(resp.x)), None)
        return sae, _record(settings, resp, sha, figures, reused=False, source=str(source))
    saved = ExperimentDir(folder).reusable({"settings": settings, "data_sha1": resp.fingerprint},
                                           [WEIGHTS])  # fmt: skip
    if saved and weights_sha1(folder) == saved.get("sae_sha1"):
        if not quiet:
            status(f"reusing the SAE in {folder} (same settings, same features)")
        sae = load_sae(folder, d=resp.d)
        train, held = _split(len(resp.x), cfg)
        figures = _figures(sae, resp.x, held, _scaling(resp.x[train]) if cfg.standardize
                           else None)
        figures["train_fvu_last_epoch"] = saved.get("train_fvu_last_epoch")
        figures["size_warning"] = size_warning(cfg.n_latents, cfg.k, len(train))
        return sae, _record(settings, resp, saved["sae_sha1"], figures, reused=True)
    sae, figures = _train(resp, cfg, quiet)
    save_sae(sae, folder, metadata={
        "model_name": resp.backbone.name, "hook_name": "rmlens pooled response features",
        "rmlens_identity": resp.backbone.identity, "rmlens_version": rmlens.__version__,
    })  # fmt: skip
    return sae, _record(settings, resp, weights_sha1(folder), figures, reused=False)


def _train(resp: Responses, cfg: SAEConfig, quiet: bool) -> tuple[TopKSAE, dict]:
    """Train on all but the held-out responses (standardized first with ``standardize``);
    return the SAE on raw features and its figures on the held-out responses."""
    train, held = _split(len(resp.x), cfg)
    oversized = size_warning(cfg.n_latents, cfg.k, len(train))
    if oversized:
        warnings.warn(oversized, RmlensWarning, stacklevel=3)
    x = resp.x[train]
    scaling = _scaling(x) if cfg.standardize else None
    if scaling is not None:
        x = (x - scaling[0]) / scaling[1]
    if not quiet:
        status(f"training an SAE: {cfg.n_latents} latents, k={cfg.k}, on {len(train)} of "
               f"{len(resp.x)} responses ({resp.d} features)")
    sae, history = fit_topk(x, n_latents=cfg.n_latents, k=cfg.k, epochs=cfg.epochs, lr=cfg.lr,
                            batch_size=cfg.batch_size, seed=cfg.seed, quiet=quiet)
    if scaling is not None:
        sae = destandardized(sae, *scaling)
    figures = _figures(sae, resp.x, held, scaling)
    figures["train_fvu_last_epoch"] = history[-1] if history else float("nan")
    figures["size_warning"] = oversized
    return sae, figures


def size_warning(n_latents: int, k: int, n_train: int) -> str | None:
    """One line when the SAE has more latents than the responses it trains on (it can then
    give each response latents of its own: a lookup table, not features), with a size to
    try: the largest power of 2 up to a quarter of the responses, at least 2 k; None when
    the size fits.

    Examples
    --------
    >>> size_warning(512, 16, 270)[:58]
    '`n_latents` 512 is more than the 270 responses the SAE tra'
    >>> size_warning(64, 16, 270) is None
    True
    """
    if n_latents <= n_train:
        return None
    suggest = max(2 * k, 2 ** int(np.floor(np.log2(max(n_train / 4, 1)))))
    return (f"`n_latents` {n_latents} is more than the {n_train} responses the SAE trains on: "
            "it can give each response latents of its own (a lookup table, not features); "
            f"try `n_latents` {suggest}, or audit more pairs")


def _split(n: int, cfg: SAEConfig) -> tuple[np.ndarray, np.ndarray]:
    """Training and held-out rows of ``n`` responses (a seeded ``heldout_fraction``)."""
    n_held = int(round(cfg.heldout_fraction * n))
    if n - n_held < 2 or n_held < 1:
        raise InputError(f"the audit has {n} distinct responses: too few to train an SAE and "
                         f"hold out {cfg.heldout_fraction:g} of them (`heldout_fraction`)")
    order = np.random.default_rng(cfg.seed).permutation(n)
    return np.sort(order[n_held:]), np.sort(order[:n_held])


def _scaling(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation per feature (at least 1e-6), as the heads standardize."""
    return x.mean(0), np.maximum(x.std(0, ddof=1), SCALE_FLOOR)


def _figures(sae: TopKSAE, x: np.ndarray, held: np.ndarray, scaling) -> dict[str, Any]:
    """FVU of the held-out responses, on the raw features and on the standardized ones."""
    x_held = x[held]
    x_hat = sae.reconstruct(x_held)
    mean, scale = scaling if scaling is not None else _scaling(x)
    return {"fvu": fvu(x_held, x_hat),
            "fvu_standardized": fvu((x_held - mean) / scale, (x_hat - mean) / scale),
            "n_heldout": int(len(held))}  # fmt: skip


def _record(settings: dict, resp: Responses, sha: str, figures: dict, *, reused: bool,
            source: str = "trained here") -> dict:  # fmt: skip
    return {
        "version": rmlens.__version__, "settings": settings, "data_sha1": resp.fingerprint,
        "sae_sha1": sha, "source": source, "reused": reused, "d": resp.d,
        "n_responses": int(len(resp.x)), "n_pairs": int(len(resp.ids)),
        "n_runs": len(resp.heads), "backbone": resp.backbone.name, **figures,
    }  # fmt: skip


def audit_sae(directory: str | Path) -> TopKSAE:
    """The SAE of ``rmlens sae DIR`` (the one in ``DIR/sae/``, or the one it was given).

    Parameters
    ----------
    directory : str or Path
        An audit directory on which ``rmlens sae`` ran.

    Returns
    -------
    TopKSAE
        Reads raw backbone features; ``W_dec`` (n_latents, d), ``directions``.
    """
    folder = Path(directory) / FOLDER
    record = ExperimentDir(folder).read_record()
    if record is None:
        raise InputError(f"{folder / RECORD}: not found; run `rmlens sae {directory}` first")
    source = record.get("source")
    return load_sae(folder if source in (None, "trained here") else source, d=record.get("d"))


def load_latents(directory: str | Path) -> tuple[pd.DataFrame, dict]:
    """The pair latents of ``rmlens sae DIR`` (``id`` and ``sae_<j>``) and its record.

    Parameters
    ----------
    directory : str or Path
        An audit directory.

    Returns
    -------
    latents : DataFrame
    record : dict
        ``DIR/sae/config.json``.

    Raises
    ------
    InputError
        ``rmlens sae DIR`` has not run.
    """
    folder = Path(directory) / FOLDER
    if not (folder / LATENTS).is_file() or not (folder / RECORD).is_file():
        raise InputError(f"`features` sae: {folder / LATENTS} not found; run `rmlens sae "
                         f"{directory}` first")
    exp = ExperimentDir(folder)
    return exp.read_table(LATENTS), exp.read_record(required=True)
