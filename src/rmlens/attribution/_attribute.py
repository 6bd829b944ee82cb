"""What drives memorization: regress TM, TG and CM on pair features, explain with SHAP.

DESIGN.md section 3, last paragraph. :func:`attribute` reads an audit's experiment
directory, fits the :class:`~rmlens.attribution._attributor.Attributor` (group K-fold
held-out R^2, a fit on all pairs and mean ``|SHAP|`` per feature, per target and regressor) and
writes its tables, plots and ``attribution.json`` back. A feature much more important for TM
than for TG is one the RMs use to memorize rather than to generalize (the TM-vs-TG
difference table). The same fit on the targets of each half of the audit's runs says how
stable the feature ranking is (``_stability``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import rmlens
from rmlens._base import resolve_config
from rmlens._errors import InputError
from rmlens._io import jsonable, write_json, write_parquet
from rmlens.attribution._attributor import Attributor
from rmlens.attribution._config import SAE_FEATURES, AttributeConfig
from rmlens.attribution._informative import R2_FLOOR, fit_warnings
from rmlens.attribution._stability import (
    STABILITY_COLUMNS,
    Halves,
    run_halves,
    stability_warnings,
)
from rmlens.backbones import resolve_model
from rmlens.experiment import ExperimentDir


def attribute(
    directory: str | Path,
    config: AttributeConfig | None = None,
    *,
    out: str | Path | None = None,
    quiet: bool = False,
    **overrides,
) -> Attributor:
    """Attribute an audit's TM, TG and CM to pair features; write the results into the dir.

    Reads ``DIR/memorization.parquet`` (and ``DIR/config.json`` for the audit's model), then
    writes, each atomically: ``attribution.parquet`` (``target, regressor, feature,
    importance, rank``; importance = mean ``|SHAP|``), ``attribution_fit.parquet`` (``target,
    regressor, r2, r2_std, informative, n_pairs, n_dropped_nan, n_folds`` and the stability
    columns of ``Attributor.fit_``), ``attribution_diff.parquet`` (TM-vs-TG),
    ``attribution.json`` (resolved config, notes, skipped features, the identifier-like
    columns left out as ``left_out``, ``r2_floor``, ``fit``: per target and regressor the
    held-out R^2 and ``informative``, ``warnings``: every plain warning (fits that explain
    nothing, unstable rankings), ``stability``: the halves and, per target and regressor,
    rank_spearman, top10_overlap and the two top-10 lists, with its own warnings) and the
    plots ``attribution_importance.png``, ``attribution_beeswarm_<regressor>.png``,
    ``attribution_diff.png`` (each panel titled with its held-out R^2).

    With ``sae`` in ``config.features``, the SAE latents that ``rmlens sae DIR`` wrote
    (``DIR/sae/latents.parquet``: ``sae_<j>``, chosen minus rejected activation) join the
    pair features, and ``attribution.json``'s ``sae`` names the SAE (``sae_sha1``), so that
    the SAE's name cards read their SHAP shares only from an attribution of their latents.

    With ``config.stability`` (default), TM, TG and CM are also estimated from each half of
    the audit's runs (``run_halves``: alternating whole repeats of the plan) and every
    regressor is fit to each half's targets, to say how stable the feature ranking is; when
    ``directory`` has no runs or fewer than 2 whole repeats, the figures are NaN and the
    ``stability_note`` says why.

    Parameters
    ----------
    directory : str or Path
        The experiment directory of an audit (``audit``, ``rmlens memorize``).
    config : AttributeConfig, optional
        The settings (default ``AttributeConfig()``).
    out : str or Path, optional
        The folder the results are written to (default ``directory``).
    quiet : bool, default=False
        No progress bars or status lines.
    **overrides
        Fields of ``AttributeConfig``, applied to ``config`` (``attribute(dir, folds=3)``).

    Returns
    -------
    Attributor
        Fitted; its tables are the ones written.

    Raises
    ------
    InputError
        No memorization table in ``directory``, or it lacks the target columns; ``sae``
        in ``config.features`` before ``rmlens sae DIR`` ran.

    Examples
    --------
    >>> attributor = attribute("rmlens-demo", regressors=("lightgbm",))  # doctest: +SKIP
    >>> attributor.importance_.head()  # doctest: +SKIP
    """
    cfg = resolve_config("attribute", AttributeConfig, config, overrides)
    cfg.check()  # ParamError (an InputError) names the field
    source = Path(directory)
    out = source if out is None else Path(out)
    table = _read_table(source)
    record = _read_record(source)
    tokenizer, tok_note = _resolve_tokenizer(cfg.tokenizer, record)
    halves, why = _run_halves(source, record, cfg)
    latents, sae = _sae_latents(source, cfg)
    attributor = Attributor(config=cfg).fit(table, group_by=record.get("group_by"),
                                            tokenizer=tokenizer, halves=halves, extra=latents,
                                            quiet=quiet)
    if why:
        attributor.fit_["stability_note"] = f"not computed: {why}"
    write_parquet(attributor.importance_, out / "attribution.parquet")
    write_parquet(attributor.fit_, out / "attribution_fit.parquet")
    write_parquet(attributor.diff_, out / "attribution_diff.parquet")
    plots = _write_plots(attributor, cfg, out)
    write_json({**_attribution_record(attributor, cfg, record, table, tok_note, plots),
                "sae": sae}, out / "attribution.json")
    return attributor


def _sae_latents(source: Path, cfg: AttributeConfig) -> tuple[pd.DataFrame | None, dict | None]:
    """With ``sae`` in ``cfg.features``: the pair latents of ``rmlens sae`` (the
    ``cfg.sae_latents`` whose pair activations vary most) and which SAE made them
    (``sae_sha1``, ``data_sha1``) with how many latents joined; else None, None."""
    if SAE_FEATURES not in cfg.features:
        return None, None
    # lazy: torch loads only when this runs
    from rmlens.sae import load_latents

    latents, record = load_latents(source)
    columns = [c for c in latents.columns if c != "id"]
    kept = columns
    if 0 < cfg.sae_latents < len(columns):
        variance = latents[columns].var(ddof=0).to_numpy()
        kept = [columns[i] for i in np.sort(np.argsort(-variance, kind="stable")[:cfg.sae_latents])]
    sae = {k: record.get(k) for k in ("sae_sha1", "data_sha1", "source")}
    sae |= {"latents_kept": len(kept), "latents_active": len(columns),
            "rule": "all active latents" if kept is columns else
                    f"the {len(kept)} of {len(columns)} latents whose pair activations vary most"}
    return latents[["id", *kept]], sae


def _read_table(out: Path) -> pd.DataFrame:
    """The audit's memorization table."""
    path = out / "memorization.parquet"
    if not path.is_file():
        raise InputError(f"{path}: not found; run `rmlens memorize --out {out}` first")
    return ExperimentDir(out).read_table(path.name)


def _read_record(out: Path) -> dict:
    """The audit's ``config.json`` (empty when there is none)."""
    return ExperimentDir(out).read_record() or {}


def _resolve_tokenizer(spec: str | None, record: dict):
    """The tokenizer for ``len_tokens`` (``spec``: a model, "auto" or None), and a note."""
    if spec is None or str(spec).lower() == "none":
        return None, "len_tokens off (no tokenizer)"
    model = record.get("audit", {}).get("model") if spec == "auto" else spec
    if not model:
        return None, "len_tokens off: config.json names no model"
    from transformers import AutoTokenizer


    try:
        source, _ = resolve_model(model)
        tok = AutoTokenizer.from_pretrained(source, local_files_only=True)
    except Exception as err:  # noqa: BLE001 - a missing tokenizer only drops len_tokens
        if spec != "auto":
            raise InputError(f"`tokenizer` {spec}: cannot load a tokenizer ({err})") from err
        return None, f"len_tokens off: tokenizer of '{model}' not loadable offline ({err})"
    return tok, f"len_tokens with the tokenizer of '{model}'"


def _run_halves(
    out: Path, record: dict, cfg: AttributeConfig
) -> tuple[Halves | None, str | None]:
    """TM, TG, CM from each half of the audit's runs, or None and why there are none."""
    halves, why = None, None
    if cfg.stability:
        try:
            halves = run_halves(out, record)
        except InputError as err:  # no runs here (a copied table): the figures stay NaN
            why = str(err)
    return halves, why


def _write_plots(attributor: Attributor, cfg: AttributeConfig, out: Path) -> list[Path]:
    """The importance, beeswarm and TM-vs-TG plots (none with ``cfg.plots`` off)."""
    plots = []
    if cfg.plots and len(attributor.importance_):
        # lazy: matplotlib loads only when plots are drawn
        from rmlens.attribution._plots import plot_beeswarm, plot_diff, plot_importance

        fit = attributor.fit_
        plots.append(plot_importance(attributor.importance_, out / "attribution_importance.png",
                                     fit=fit))
        for reg in cfg.regressors:
            if any(r == reg for _, r in attributor.explanations_):
                plots.append(plot_beeswarm(attributor.explanations_, reg,
                                           out / f"attribution_beeswarm_{reg}.png", fit=fit))
        if len(attributor.diff_):
            plots.append(plot_diff(attributor.diff_, out / "attribution_diff.png"))
    return plots


def _attribution_record(attributor: Attributor, cfg: AttributeConfig, record: dict,
                        table: pd.DataFrame, tok_note: str, plots: list[Path]) -> dict:
    """``attribution.json``: config, features, what was left out and why, notes, stability."""
    return {
        "version": rmlens.__version__,
        "attribute": cfg.to_dict(),
        "group_by": record.get("group_by"),
        "n_pairs": len(table),
        "tokenizer": tok_note,
        "features": attributor.design_.names,
        "left_out": attributor.left_out_,
        "skipped": {**attributor.features_.attrs.get("skipped", {}),
                    **attributor.design_.dropped},
        "notes": attributor.notes_,
        "r2_floor": R2_FLOOR,
        "fit": fit_record(attributor.fit_),
        "warnings": attribution_warnings(attributor.fit_),
        "stability": stability_record(attributor),
        "plots": [p.name for p in plots],
    }


def stability_record(attributor: Attributor) -> dict:
    """``attribution.json``'s ``stability``: the halves of the runs (None when not
    computed), per target and regressor the two figures and top-10 lists (NaN as null), and
    the plain warnings.

    Parameters
    ----------
    attributor : Attributor
        Fitted; its ``fit_`` has the stability columns, its ``halves_`` the halves (or
        None).

    Returns
    -------
    dict
        ``halves``: the repeats, run counts, ``same_partition`` and note of each half
        (``Halves.to_dict``), or None; ``by_target``: one record per target and regressor,
        ``target, regressor`` and the stability columns (``rank_spearman``,
        ``top10_overlap``, ``top10_half1``, ``top10_half2``, ``rank_spearman_noise``,
        ``top10_overlap_noise``, ``stability_note``); ``warnings``: one sentence per target
        whose ranking is not stable between the halves.
    """
    fit = attributor.fit_
    cols = ["target", "regressor", *STABILITY_COLUMNS]
    entries = jsonable(fit[cols].to_dict("records"))
    halves = attributor.halves_
    return {"halves": halves.to_dict() if halves is not None else None, "by_target": entries,
            "warnings": stability_warnings(fit)}


FIT_FIELDS = ["target", "regressor", "r2", "r2_std", "informative", "n_pairs", "n_dropped_nan",
              "n_folds"]


def fit_record(fit: pd.DataFrame) -> list[dict]:
    """Per target and regressor: held-out R^2 and whether the fit is informative (NaN as
    null), as in ``attribution.json``'s ``fit`` and ``rmlens attribute --json``.

    Parameters
    ----------
    fit : DataFrame
        A fit table (``Attributor.fit_``, ``attribution_fit.parquet``).

    Returns
    -------
    list of dict
        One record per row of ``fit``, with those of ``target, regressor, r2, r2_std,
        informative, n_pairs, n_dropped_nan, n_folds`` that it has.
    """
    return jsonable(fit[[c for c in FIT_FIELDS if c in fit.columns]].to_dict("records"))


def attribution_warnings(fit: pd.DataFrame) -> list[str]:
    """Every plain warning on a fit table: first the fits that explain nothing (held-out
    R^2 below ``R2_FLOOR``), then the unstable rankings among the others.

    Parameters
    ----------
    fit : DataFrame
        A fit table (``Attributor.fit_``): ``target, regressor, r2`` and, when computed,
        the stability columns.

    Returns
    -------
    list of str
        One sentence per (target, regressor) that explains nothing (none without an ``r2``
        column), then one per target whose ranking is not stable between the halves (none
        without the stability columns); empty when there is nothing to warn about.
    """
    return fit_warnings(fit) + stability_warnings(fit)
