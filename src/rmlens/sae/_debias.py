"""Training-free debiasing through the SAE lens (DESIGN.md section 3, "The SAE lens"; after
SteerRM): project shortcut latents' decoder directions out of h before each run's head.

The rule (``suppress`` auto) picks latent j of the audit's SAE when all three hold:

1. tied to a shortcut: |Spearman| between its activation and a shortcut feature over the
   audit's responses (``DIR/sae/correlations.parquet``: every correlate of the name cards,
   not only the five a card lists) reaches ``min_correlation`` (0.5). Shortcut features are
   ``shortcut_features``: length (``len_*``), model identity (``model=<name>``, where a
   signature phrase shows) and ``refusal``;
2. weighted by the heads: with a_rj = (w_r / s_r) . u_j, run r's reward change per unit step
   along latent j's unit decoder direction u_j in the raw features (the cards'
   ``head_weight``), |mean_r a_rj| reaches the ``weight_quantile`` (0.9) quantile of
   |mean_r a_rk| over the active latents k, and at least ``sign_agreement`` (0.8) of the
   runs give a_rj the sign of its mean;
3. stable across split halves: in each half of the runs (alternating whole repeats of the
   plan, as the audit's reliability splits them; alternating runs when there is one repeat)
   the mean of a_rj has the sign of the overall mean and reaches the same threshold.

The projection, per run, with Q (d, m) an orthonormal basis of the chosen u_j (raw feature
space, the space the head reads: the SAE's standardization is folded into its decoder):

    r(h)  = w . (h - mu) / s + b        the run's head; mu, s: its training features' mean
                                        and std, so mu is the mean training response
    w'    = (I - Q Q^T) (w / s)         (d,): no weight left along any chosen u_j
    r'(h) = w' . (h - mu) + b           = w' . h + b' with b' = b - w' . mu

so r'(mu) = r(mu) = b (the mean training response's reward is unchanged), and a response
whose difference from mu is orthogonal to every u_j keeps its reward. Nothing is retrained.
Caveat: a suppressed direction can carry real quality too, so held-out accuracy is measured
beside the shortcut figures, never assumed.
"""

from __future__ import annotations

import copy
import fnmatch
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from rmlens._base import needed_out, resolve_config
from rmlens._errors import InputError
from rmlens._io import jsonable
from rmlens.experiment import ExperimentDir
from rmlens.rewards import HeadRM
from rmlens.sae._cards import head_weights
from rmlens.sae._debias_config import DebiasConfig
from rmlens.sae._debias_dir import CAVEAT, write_debiased
from rmlens.sae._lens import FOLDER, audit_sae
from rmlens.sae._responses import audit_responses, frozen_audit

RANK_TOL = 1e-8  # singular values below this share of the largest: a direction already spanned


@dataclass
class Debiased:
    """What :func:`debias` wrote.

    Parameters
    ----------
    out : Path
        The debiased experiment directory.
    latents : list of int
        The suppressed latents.
    rule : DataFrame
        One row per latent the rule looked at (every active latent for ``auto``, the named
        ones otherwise): ``latent, feature, spearman, weight_mean, weight_std,
        weight_threshold, sign_agreement, half_0, half_1, tied, weighted, stable, picked``.
    record : dict
        ``config.json``'s ``debias``: settings, the latents and why, the halves.
    figures : dict
        ``summary.json``'s ``debias.figures``: held-out accuracy and the absolute
        correlation of the reward margin with the length difference in words, before and
        after, mean and std over runs.
    table : DataFrame
        The debiased memorization table (brute-force estimator).
    """

    out: Path
    latents: list[int]
    rule: pd.DataFrame
    record: dict
    figures: dict
    table: pd.DataFrame


# -- the projection -------------------------------------------------------------------------


def orthonormal_basis(directions) -> np.ndarray:
    """Q (d, m'): orthonormal columns spanning the rows of ``directions`` (m, d); m' < m when
    some direction lies in the span of the others."""
    a = np.asarray(directions, dtype=float)
    a = a.reshape(-1, a.shape[-1]).T  # (d, m)
    if a.shape[1] == 0:
        return np.zeros((a.shape[0], 0))
    u, sv, _ = np.linalg.svd(a, full_matrices=False)
    return u[:, sv > sv[0] * RANK_TOL]


def project_head(weight, bias: float, mean, scale, directions) -> tuple[np.ndarray, float]:
    """A linear head r = w . (h - mean) / scale + b with ``directions`` projected out.

    Parameters
    ----------
    weight, mean, scale : array-like of shape (d,)
        The head's weights on standardized features and its standardization.
    bias : float
    directions : array-like of shape (m, d)
        Directions in the raw features (need not be unit or independent).

    Returns
    -------
    w : ndarray of shape (d,)
        (I - Q Q^T) (weight / scale): the head's weights on raw features, none left along
        the directions.
    b : float
        bias - w . mean: the reward of ``mean`` (the mean training response) is unchanged.

    Examples
    --------
    >>> w, b = project_head([1.0, 2.0], 0.5, [0.0, 1.0], [1.0, 1.0], [[0.0, 3.0]])
    >>> w.tolist(), b
    ([1.0, 0.0], 0.5)
    """
    q = orthonormal_basis(directions)  # (d, m)
    v = np.asarray(weight, dtype=float) / np.asarray(scale, dtype=float)  # (d,) raw weights
    w = v - q @ (q.T @ v)
    return w, float(bias - w @ np.asarray(mean, dtype=float))


def projected(head: HeadRM, directions) -> HeadRM:
    """A copy of a fitted linear ``HeadRM`` with ``directions`` (m, d) projected out, in the
    head's own form: weights s * w' on (h - mu) / s, bias b (== b' + w' . mu)."""
    module = head.head_
    mu, s = (module.mean.double().numpy(), module.scale.double().numpy())
    w = module.net.weight.detach().double().numpy()[0]
    b = float(module.net.bias.detach().double().numpy()[0])
    w_new, b_new = project_head(w, b, mu, s, directions)
    out = HeadRM(head.config)
    out.head_ = copy.deepcopy(module).eval()
    with torch.no_grad():
        out.head_.net.weight.copy_(torch.as_tensor(s * w_new).reshape(1, -1))
        out.head_.net.bias.fill_(b_new + float(w_new @ mu))
    out.format_ = getattr(head, "format_", None)
    return out


# -- the rule ---------------------------------------------------------------------------------


def split_halves(runs, folds: int) -> tuple[np.ndarray, str]:
    """Half (0 or 1) of each run, and how: alternating whole repeats of the plan (run //
    ``folds``) when there are two or more, else alternating runs."""
    runs = np.asarray(runs, dtype=int)
    repeat = runs // max(int(folds), 1)
    if len(np.unique(repeat)) >= 2:
        order = np.searchsorted(np.unique(repeat), repeat)
        return order % 2, "alternating whole repeats of the plan"
    return np.arange(len(runs)) % 2, "alternating runs (the audit has one repeat of the plan)"


def shortcut_columns(columns, patterns) -> list[str]:
    """The correlation columns that match a shortcut pattern (shell style), in order."""
    return [c for c in columns if c != "latent" and any(fnmatch.fnmatchcase(c, p)
                                                        for p in patterns)]  # fmt: skip


def shortcut_latents(correlations: pd.DataFrame, weights, half,
                     config: DebiasConfig | None = None) -> pd.DataFrame:  # fmt: skip
    """The rule of the module docstring, latent by latent.

    Parameters
    ----------
    correlations : DataFrame
        ``latent`` and one Spearman column per hand-built feature, one row per active latent
        (``DIR/sae/correlations.parquet``).
    weights : array-like of shape (n_runs, n_latents)
        a_rj, run r's head weight along latent j's unit decoder direction; columns in the
        rows' order of ``correlations``.
    half : array-like of shape (n_runs,)
        0 or 1: each run's split half (:func:`split_halves`).
    config : DebiasConfig, optional
        The thresholds (default ``DebiasConfig()``).

    Returns
    -------
    DataFrame
        One row per latent: ``latent``, ``feature`` and ``spearman`` (its strongest shortcut
        correlate), ``weight_mean``, ``weight_std``, ``weight_threshold``,
        ``sign_agreement``, ``half_0``, ``half_1`` (mean weight in each half), ``tied``,
        ``weighted``, ``stable`` and ``picked`` (all three), strongest weight first.

    Raises
    ------
    InputError
        No correlation column matches ``shortcut_features``; fewer than two runs.
    """
    cfg = (config or DebiasConfig()).check()
    a = np.asarray(weights, dtype=float)  # (n_runs, n_latents)
    half = np.asarray(half, dtype=int)
    if a.shape != (len(half), len(correlations)):
        raise ValueError(f"weights {a.shape} must be (n_runs, n_latents) = ({len(half)}, "
                         f"{len(correlations)})")  # fmt: skip
    if len(half) < 2 or len(np.unique(half)) < 2:
        raise InputError("`suppress` auto: the rule checks stability across two halves of the "
                         f"runs, and the audit has {len(half)} run(s); name the latents "
                         "instead (`suppress` 12,40)")
    columns = shortcut_columns(correlations.columns, cfg.shortcut_features)
    if not columns:
        raise InputError(f"`shortcut_features` {','.join(cfg.shortcut_features)}: no card "
                         "correlate matches (features: "
                         f"{', '.join(c for c in correlations.columns if c != 'latent')})")
    rho = correlations[columns].to_numpy(dtype=float)  # (n_latents, n_shortcuts)
    strongest = np.nanargmax(np.where(np.isnan(rho), -1.0, np.abs(rho)), axis=1)
    rho_best = rho[np.arange(len(rho)), strongest]
    mean = a.mean(0)
    threshold = float(np.quantile(np.abs(mean), cfg.weight_quantile))
    agree = (np.sign(a) == np.sign(mean)).mean(0)
    halves = np.stack([a[half == h].mean(0) for h in (0, 1)])  # (2, n_latents)
    tied = np.abs(np.nan_to_num(rho_best)) >= cfg.min_correlation
    weighted = (np.abs(mean) >= threshold) & (agree >= cfg.sign_agreement)
    stable = ((np.sign(halves) == np.sign(mean)) & (np.abs(halves) >= threshold)).all(0)
    table = pd.DataFrame({
        "latent": correlations["latent"].to_numpy(dtype=int),
        "feature": [columns[i] for i in strongest], "spearman": rho_best,
        "weight_mean": mean, "weight_std": a.std(0, ddof=1), "weight_threshold": threshold,
        "sign_agreement": agree, "half_0": halves[0], "half_1": halves[1],
        "tied": tied, "weighted": weighted, "stable": stable, "picked": tied & weighted & stable,
    })  # fmt: skip
    order = np.argsort(-np.abs(mean), kind="stable")
    return table.iloc[order].reset_index(drop=True)


def why(row) -> str:
    """One line: why the rule picked (or would look at) a latent."""
    return (f"{row.feature} rho {row.spearman:+.2f}; head weight {row.weight_mean:+.3g} "
            f"(threshold {row.weight_threshold:.3g}), sign of the mean in "
            f"{row.sign_agreement:.0%} of runs; halves {row.half_0:+.3g} and {row.half_1:+.3g}")


# -- the verb -------------------------------------------------------------------------------


def check_debiasable(directory: str | Path) -> dict:
    """The record of a frozen audit with linear heads; an :class:`InputError` otherwise (one
    line: the projection has no meaning for an MLP head's hidden layer).

    Parameters
    ----------
    directory : str or Path
        The experiment directory of a frozen audit (``rmlens memorize --mode frozen``).

    Returns
    -------
    dict
        The audit's record (its ``config.json``).

    Raises
    ------
    InputError
        Not a frozen audit (no ``config.json``, ``runs/`` or ``memorization.parquet``, or
        an audit of fine-tuned RMs), a memorization table without ``id, prompt, chosen,
        rejected``, or MLP heads.
    """
    directory = Path(directory)
    _, record = frozen_audit(directory)
    head = ((record.get("audit") or {}).get("head") or {}).get("head")
    if head == "mlp":
        raise InputError(f"{directory}: its heads are MLPs (`head` mlp); debiasing projects "
                         "directions out of a linear head's weights, so it needs an audit with "
                         "`head` logistic or linear")
    return record


def debias(
    directory: str | Path,
    config: DebiasConfig | None = None,
    *,
    out: str | Path | None = None,
    quiet: bool = False,
    **overrides,
) -> Debiased:
    """Suppress shortcut latents in every run of a frozen audit, without retraining.

    Picks the latents (``suppress``: ``auto``, the rule of the module docstring, or latent
    numbers), projects their unit decoder directions out of each run's head, re-scores
    every run's pairs on the audit's cached features and writes a complete experiment
    directory ``out`` (config, plan, runs with scores, RMs and manifests, memorization table,
    summary) that ``rmlens compare`` reads beside the audit. Its objective is recorded as
    ``sae_debias``. Its estimator is brute force over the plan's in- and out-runs: a paired
    audit stores its counterfactuals as probabilities, not as heads, so they cannot be
    projected.

    Parameters
    ----------
    directory : str or Path
        A frozen audit with linear heads on which ``rmlens sae`` ran.
    config : DebiasConfig, optional
        Which latents and the rule's thresholds (default ``DebiasConfig()``: ``auto``).
    out : str or Path
        The debiased experiment directory. Needed.
    quiet : bool, default=False
        No progress bars or status lines.
    **overrides
        Fields of ``DebiasConfig`` (``debias(dir, out="d", suppress="12,40")``).

    Returns
    -------
    Debiased

    Raises
    ------
    InputError
        Not a frozen audit, MLP heads, no SAE lens (or one fitted on other features), a
        latent number out of range, no latent meeting the rule, an ``out`` holding another
        experiment.

    Examples
    --------
    >>> found = debias("audit", out="audit-debiased")  # doctest: +SKIP
    >>> found.latents, found.figures["heldout_accuracy"]  # doctest: +SKIP
    """
    cfg = resolve_config("debias", DebiasConfig, config, overrides).check()
    directory, out = Path(directory), Path(needed_out("debias", out))
    record = check_debiasable(directory)
    if out.resolve() == directory.resolve() or directory.resolve() in out.resolve().parents:
        raise InputError(f"`out` {out}: inside the audit {directory}, which holds what its runs "
                         "produced and nothing else; choose another folder")
    lens = ExperimentDir(directory / FOLDER)
    lens_record = lens.read_record()
    if lens_record is None or not (lens.path / "correlations.parquet").is_file():
        raise InputError(f"{lens.path}: no SAE lens; run `rmlens sae {directory}` first")
    sae = audit_sae(directory)
    resp = audit_responses(directory, quiet=quiet)
    if lens_record.get("data_sha1") != resp.fingerprint:
        raise InputError(f"{lens.path}: its SAE was fitted on other features than the audit's "
                         f"now; run `rmlens sae {directory}` again")
    _linear_heads(resp.heads, directory)
    runs = [int(name) for name in resp.names]
    weights = head_weights(resp.heads, sae)  # (n_runs, n_latents)
    correlations = lens.read_table("correlations.parquet")
    folds = int(record.get("folds_used") or (record.get("audit") or {}).get("folds") or 1)
    half, halves = split_halves(runs, 2 if (record.get("audit") or {}).get("plan") == "halves"
                                else folds)  # fmt: skip
    rule, latents = _choose(cfg, correlations, weights, half, sae.n_latents)
    settings = {"source": str(directory.resolve()), "sae_sha1": lens_record.get("sae_sha1"),
                **cfg.to_dict()}  # fmt: skip
    debias_record = {
        "settings": settings, "latents": latents, "halves": halves,
        "rule": None if cfg.latents is not None else __doc__.split("\n\n")[1],
        "why": {str(r.latent): (why(r) if cfg.latents is None else f"named; {why(r)}")
                for r in rule.itertuples() if r.latent in latents and hasattr(r, "feature")},
        "cards": _cards(lens.read_json("cards.json", required=False) or [], latents),
        "projection": "w' = (I - Q Q^T)(w / s), b' = b - w' . mu (module rmlens.sae._debias)",
        "caveat": CAVEAT,
    }  # fmt: skip
    heads = [projected(h, sae.directions[latents]) for h in resp.heads]
    table, figures = write_debiased(directory, out, record, debias_record, resp, heads, runs,
                                    quiet=quiet)  # fmt: skip
    return Debiased(out, latents, rule, jsonable(debias_record), figures, table)


def _linear_heads(heads: list, directory: Path) -> None:
    for head in heads:
        if not isinstance(getattr(getattr(head, "head_", None), "net", None), nn.Linear):
            raise InputError(f"{directory}: its heads are not linear (an MLP head); debiasing "
                             "projects directions out of a linear head's weights")


def _choose(cfg: DebiasConfig, correlations: pd.DataFrame, weights: np.ndarray, half,
            n_latents: int) -> tuple[pd.DataFrame, list[int]]:  # fmt: skip
    """The rule's table and the latents to suppress (``auto``: those it picks)."""
    active = correlations["latent"].to_numpy(dtype=int)
    named = cfg.latents
    if named is not None:
        bad = [j for j in named if not 0 <= j < n_latents]
        if bad:
            raise InputError(f"`suppress` {cfg.suppress}: latent(s) {bad} outside the SAE's "
                             f"0..{n_latents - 1}")
        try:  # the rule's figures of the named latents, against all active ones
            rule = shortcut_latents(correlations, weights[:, active], half, DebiasConfig())
        except InputError:  # one run, or no shortcut correlate: no figures to give
            rule = pd.DataFrame({"latent": active})
        return rule[rule.latent.isin(named)].reset_index(drop=True), list(named)
    rule = shortcut_latents(correlations, weights[:, active], half, cfg)
    picked = rule.latent[rule.picked].astype(int).tolist()
    if not picked:
        near = rule.iloc[0] if len(rule) else None
        hint = f" (the most weighted, sae_{near.latent}: {why(near)})" if near is not None else ""
        raise InputError("`suppress` auto: no latent meets the rule (tied to a shortcut, "
                         "weighted by the heads, stable across halves)" + hint + "; lower "
                         "`min_correlation` or `weight_quantile`, or name the latents")
    return rule, picked


def _cards(cards: list[dict], latents: list[int]) -> dict:
    """The suppressed latents' cards, short: correlates, head weight, first top response."""
    out = {}
    for card in cards:
        if card.get("latent") in latents:
            top = (card.get("top_responses") or [{}])[0]
            out[card["name"]] = {"correlates": card.get("correlates"),
                                 "head_weight": card.get("head_weight"),
                                 "top_response": (top.get("text") or "")[:200]}  # fmt: skip
    return out
