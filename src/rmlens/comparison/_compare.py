"""``compare``: audits side by side, with bootstrap intervals over runs.

Reads each audit's experiment directory (``_audit``), computes per audit the held-out
figures (``_heldout``), memorization by margin (``_margin``), shortcut reliance
(``_shortcuts``) and, across audits, the agreement of their TM, TG, CM rankings beside its
ceiling (``_agreement``); writes ``compare.parquet``, ``compare.json`` and the PNGs into the
comparison directory. The page (``compare.html``) is written by
``rmlens.report.write_compare_report`` from those files (report sits above comparison).
"""

from __future__ import annotations

import itertools
import warnings as _warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

import rmlens
from rmlens._errors import InputError, RmlensWarning
from rmlens._io import write_json, write_parquet
from rmlens.comparison import _metrics as M
from rmlens.comparison._agreement import SCORES, agreement, ceiling, common_rows, reliability
from rmlens.comparison._audit import Audit, default_labels, find_audits, is_audit, load_audit
from rmlens.comparison._bootstrap import draw_weights, interval, run_draws, run_mean
from rmlens.comparison._calibration import SUFFIX, calibrator, length_calibrated
from rmlens.comparison._config import CompareConfig
from rmlens.comparison._heldout import (
    counter_bias_slices,
    heldout_accuracy,
    reward_length,
    word_counts,
    worst_group,
)
from rmlens.comparison._margin import (
    METRICS as MARGIN_METRICS,
)
from rmlens.comparison._margin import (
    margin_counts,
    margin_figures,
    margin_terciles,
    pair_score_draws,
    pair_scores,
    tercile_bounds,
)
from rmlens.progress import progress_bar

COLUMNS = ["audit", "family", "metric", "value", "lo", "hi", "n", "detail", "near_chance",
           "few_pairs"]  # fmt: skip
AGREEMENT_COLUMNS = ["audit_a", "audit_b", "score", "spearman", "n", "reliability_a",
                     "reliability_b", "ceiling", "above_ceiling", "same_plan"]  # fmt: skip


@dataclass
class Comparison:
    """What :func:`compare` found (and wrote).

    Attributes
    ----------
    figures : DataFrame
        ``audit, family, metric, value, lo, hi, n, detail, near_chance``: one row per audit
        and metric (``compare.parquet``); ``lo``/``hi`` the percentile bootstrap interval
        over runs (NaN where the figure is no mean over runs: correlations across pairs,
        SHAP shares), ``n`` the pairs behind the figure, ``detail`` what it is in words,
        ``near_chance`` an accuracy within 0.05 of chance or below (slices only from
        ``min_group_pairs`` pairs on), ``few_pairs`` a slice of fewer pairs than that.
    agreement : DataFrame
        ``audit_a, audit_b, score, spearman, n, reliability_a, reliability_b, ceiling,
        above_ceiling``: per pair of audits and score (tm, tg, cm), over the common pairs
        with both scores finite (``n``).
    audits : list of dict
        What each row's audit is (label, path, model, mode, head, objective, runs, ...).
    notes, warnings : list of str
    details : dict
        Margin terciles, worst groups, slices and SHAP fits per audit (``compare.json``).
    out : Path
    files : list of str
        The files written into ``out``.
    """

    figures: pd.DataFrame
    agreement: pd.DataFrame
    audits: list[dict]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    out: Path | None = None
    files: list[str] = field(default_factory=list)

    def wide(self) -> pd.DataFrame:
        """One row per metric, one column per audit: ``value [lo, hi]`` strings."""
        f = self.figures.assign(cell=[M.figure_text(r.value, r.lo, r.hi, r.n, r.few_pairs)
                                      for r in self.figures.itertuples()])  # fmt: skip
        table = f.pivot(index="metric", columns="audit", values="cell")
        order = sorted(table.index, key=lambda m: (M.order(m), m))
        labels = [a["label"] for a in self.audits]
        return table.reindex(index=order, columns=labels).fillna("–")


def compare(
    dirs: list[str | Path],
    out: str | Path,
    config: CompareConfig | None = None,
    *,
    quiet: bool = False,
) -> Comparison:
    """Compare audits side by side and write the comparison directory.

    Parameters
    ----------
    dirs : list of path
        Experiment directories of ``rmlens memorize``; a folder holding audits one level
        down (a comparison directory) stands for them. Audits may differ in objective,
        backbone, head, mode or plan; their pair sets must overlap.
    out : path
        Comparison directory (created; may be the audits' parent): ``compare.parquet``,
        ``compare.json``, ``compare_*.png``. Nothing else in it is touched.
    config : CompareConfig, optional
    quiet : bool, default=False
        No progress bars; the warnings are issued all the same (:class:`~rmlens.RmlensWarning`).

    Returns
    -------
    Comparison

    Raises
    ------
    InputError
        A directory that is no audit and holds none, audits without common pairs, labels
        that do not match the audits, a ``groups`` column that is absent.

    Examples
    --------
    >>> from rmlens.comparison import CompareConfig, compare
    >>> result = compare(["cmp/bt", "cmp/poe"], "cmp",
    ...                  CompareConfig(probes=False))  # doctest: +SKIP
    >>> result.wide()  # doctest: +SKIP
    """
    config = (config or CompareConfig()).check()
    if is_audit(Path(out)):
        raise InputError(f"`out` {out}: an audit's experiment directory (it holds what its runs "
                         "produced and nothing else); choose its parent or another folder")
    if Path(out).exists() and not Path(out).is_dir():
        raise InputError(f"`out` {out}: is a file, not a directory")
    paths = find_audits(dirs)
    labels = list(config.labels) or default_labels(paths)
    if len(labels) != len(paths):
        raise InputError(f"`labels`: {len(labels)} name(s) for {len(paths)} audit(s) "
                         f"({', '.join(map(str, paths))})")
    audits = [load_audit(p, name) for p, name in zip(paths, labels)]
    notes: list[str] = []
    warnings = _check_inputs(audits, config)
    rows = _with_references(audits, config, notes)
    # run indices of each bootstrap draw, per row; a reference row shares its audit's draws
    # (a paired comparison: the same resampled runs, calibrated or not)
    index = {a.path: i for i, a in enumerate(audits)}
    draws = {r.label: run_draws(len(r.runs), config.n_boot, [config.seed, index[r.path]])
             for r in rows}  # fmt: skip
    figures: list[dict] = []
    details: dict = {"worst_group": {}, "slices": {}, "margin_terciles": {}, "shap": {}}
    for row in rows:
        figures += _heldout_figures(row, draws[row.label], config, details)
    figures += _margin_figures(rows, draws, config, details, quiet)
    agree = _agreement(audits)
    if config.shap:
        figures += _shap_figures(audits, config, details, quiet)
    else:
        notes.append("SHAP shortcut shares not computed (--no-shap)")
    if config.probes:
        figures += _probe_figures(audits, draws, config, notes, quiet)
    else:
        notes.append("shortcut probes not run (--no-probes)")
    table = pd.DataFrame(figures, columns=COLUMNS[:-2])
    table["n"] = table["n"].astype(int)
    few = table.metric.str.startswith("slice_") & (table.n < config.min_group_pairs)
    table["near_chance"] = [M.near_chance(m, v) for m, v in zip(table.metric, table.value)]
    table["near_chance"] &= ~few
    table["few_pairs"] = few
    warnings += _figure_warnings(table, agree, {a.label: a.summary for a in audits})
    result = Comparison(table, agree, [r.describe() for r in rows], notes, warnings, details)
    _write(result, Path(out), config)
    for warning in warnings:
        _warnings.warn(warning, RmlensWarning, stacklevel=2)
    return result


def _check_inputs(audits: list[Audit], config: CompareConfig) -> list[str]:
    """Refuse audits without common pairs or without the groups column; warn when the data
    fingerprints differ."""
    for a, b in itertools.combinations(audits, 2):
        rows, _ = common_rows(a.ids, b.ids)
        if not len(rows):
            raise InputError(f"{a.path} and {b.path} share no pair ids: audits can be compared "
                             "only on common pairs (audit the same data)")
    if config.groups is not None:
        for a in audits:
            if config.groups not in a.table:
                raise InputError(f"`groups`: no column '{config.groups}' in "
                                 f"{a.path / 'memorization.parquet'} (columns: "
                                 f"{', '.join(map(str, a.table.columns))})")
    warnings = []
    prints = {a.label: a.fingerprint for a in audits}
    if len(set(prints.values())) > 1:
        shown = ", ".join(f"{k} {v}" for k, v in prints.items())
        warnings.append(f"the audits' data fingerprints differ ({shown}): other pairs, margins "
                        "or groups; figures compare the audits on their own pairs, agreement "
                        "on the common ones")
    for a in audits:
        if a.summary and not a.summary.get("complete", True):
            warnings.append(f"{a.label}: an incomplete audit ({len(a.runs)} finished runs); "
                            "its figures use the finished runs only")
    return warnings


def _with_references(audits: list[Audit], config: CompareConfig, notes: list[str]) -> list:
    """The audits, each Bradley-Terry audit followed by its length-calibrated reference."""
    if not config.length_calibration:
        return list(audits)
    calibrate = calibrator()
    bt = [a for a in audits if a.objective == "bt"]
    if calibrate is None:
        notes.append(f"no '+ {SUFFIX}' reference row: this rmlens has no "
                     "rmlens.evaluation.calibrate_length")
        return list(audits)
    if not bt:
        notes.append(f"no '+ {SUFFIX}' reference row: no audit trains with objective bt")
    rows = []
    for audit in audits:
        rows.append(audit)
        if audit.objective == "bt":
            rows.append(length_calibrated(audit, calibrate))
    if bt:
        notes.append(f"'+ {SUFFIX}': each run's rewards minus a LOWESS fit of reward on "
                     "response length in characters, fitted per run on all the pairs it "
                     "scored (Huang et al. 2024); figures from run scores only (no SHAP, "
                     "probes or agreement)")
    return rows


def _figure(audit, metric, value, boot, n, level, detail="") -> dict:
    lo, hi = interval(boot, level) if boot is not None else (np.nan, np.nan)
    return {"audit": audit, "family": M.family(metric), "metric": metric, "value": float(value),
            "lo": lo, "hi": hi, "n": int(n), "detail": detail}  # fmt: skip


def _heldout_figures(audit: Audit, draws, config: CompareConfig, details: dict) -> list[dict]:
    d, held, level = audit.margins, audit.held_out, config.level
    out = []
    value, boot, n = heldout_accuracy(d, held, draws)
    out.append(_figure(audit.label, "heldout_accuracy", value, boot, n, level,
                       f"mean over {len(audit.runs)} runs of each run's accuracy on the pairs "
                       "it held out"))  # fmt: skip
    column = config.groups or "group"
    groups = audit.table[column] if column in audit.table else pd.Series([np.nan] * len(d))
    worst = worst_group(d, held, groups, draw_weights(draws, len(audit.runs)),
                        config.min_group_pairs)  # fmt: skip
    shown = config.groups or audit.group_by or "group"
    if worst["group"] is None:
        detail = (f"no group of '{shown}' has >= {config.min_group_pairs} held-out pairs "
                  f"({worst['groups']} groups)")
    else:
        detail = (f"'{worst['group']}', the worst of {worst['qualified']} of {worst['groups']} "
                  f"groups of '{shown}' with >= {config.min_group_pairs} held-out pairs")
    out.append(_figure(audit.label, "worst_group_accuracy", worst["value"], worst["draws"],
                       worst["n"], level, detail))  # fmt: skip
    details["worst_group"][audit.label] = {
        "column": shown, "group": worst["group"], "qualified": worst["qualified"],
        "groups": worst["groups"], "min_group_pairs": config.min_group_pairs,
        "by_group": worst["by_group"],
    }  # fmt: skip
    slices = counter_bias_slices(audit.table, config.min_group_pairs)
    details["slices"][audit.label] = {k: v[1] for k, v in slices.items()}
    for name, (mask, text) in slices.items():
        value, boot, n = heldout_accuracy(d, held, draws, rows=np.asarray(mask, dtype=bool))
        if n < config.min_group_pairs:
            text += f"; only {n} held-out pairs (under --min-group-pairs): not warned about"
        out.append(_figure(audit.label, f"slice_{name}", value, boot, n, level, text))
    per_run = reward_length(audit.r_chosen, audit.r_rejected, held,
                            word_counts(audit.table["chosen"]),
                            word_counts(audit.table["rejected"]))  # fmt: skip
    value, boot = run_mean(per_run, draws)
    out.append(_figure(audit.label, "reward_length_spearman", value, boot,
                       int(held.any(1).sum()), level,
                       "per run over its held-out responses (chosen and rejected), mean "
                       "over runs"))  # fmt: skip
    return out


def _margin_figures(rows, draws, config, details, quiet) -> list[dict]:
    """Memorization by margin per row (``_margin``); the tercile means and TG on the low
    tercile get intervals from TM/TG/CM recomputed per bootstrap draw of runs.

    The Spearman of CM with margin gets none: a draw of runs repeats some runs, so each
    pair's CM is noisier in it than in the audit, which pulls a correlation across pairs
    toward 0; its percentile interval would sit beside the figure, not around it.
    """
    out = []
    for row in rows:
        if "margin" not in row.table:
            continue
        m = pd.to_numeric(row.table["margin"], errors="coerce").to_numpy(float)
        if not np.isfinite(m).any():
            continue
        terc = margin_terciles(m)
        p, p_cf = row.probabilities()
        point = pair_scores(p, row.member, row.val, p_cf)
        boot = np.full((config.n_boot, len(MARGIN_METRICS)), np.nan)
        block = 50  # draws at a time: memory about n_pairs x block x 3 floats
        with progress_bar(f"bootstrap {row.label}", total=config.n_boot, quiet=quiet) as advance:
            for start in range(0, config.n_boot, block):
                chunk = draws[row.label][start:start + block]
                scores = pair_score_draws(p, row.member, row.val,
                                          draw_weights(chunk, len(row.runs)), p_cf)  # fmt: skip
                for k in range(len(chunk)):
                    boot[start + k] = margin_figures(scores[k], m, terc, correlation=False)
                advance(len(chunk))
        values = margin_figures(point, m, terc)
        counts = margin_counts(point, m, terc)
        bounds = tercile_bounds(m, terc)
        details["margin_terciles"][row.label] = [list(b) for b in bounds]
        for k, metric in enumerate(MARGIN_METRICS):
            if metric == "cm_margin_spearman":
                draws_k, detail = None, "across pairs; no interval (see notes)"
            else:
                low = 0 if metric == "tg_low_margin" else k
                draws_k, detail = boot[:, k], f"margin {bounds[low][0]:g} to {bounds[low][1]:g}"
            out.append(_figure(row.label, metric, values[k], draws_k, counts[k], config.level,
                               detail))  # fmt: skip
    return out


def _agreement(audits: list[Audit]) -> pd.DataFrame:
    """Per pair of audits and score, Spearman over their common pairs beside the ceiling
    sqrt(rel_a rel_b) (``_agreement``). No bootstrap interval: resampling runs makes each
    pair's score noisier and pulls the correlation toward 0 (see ``_margin_figures``); the
    ceiling is what says how much agreement the noise allows."""
    records = []
    point = {}
    for a in audits:
        p, p_cf = a.probabilities()
        point[a.label] = pair_scores(p, a.member, a.val, p_cf)
    for a, b in itertools.combinations(audits, 2):
        ra, rb = common_rows(a.ids, b.ids)
        sa, sb = point[a.label][ra], point[b.label][rb]
        values = agreement(sa, sb)
        # same plan (mitigate: one plan and seed): each run holds out the same groups in both
        same = a.member.shape == b.member.shape and np.array_equal(a.member[ra], b.member[rb])
        for k, score in enumerate(SCORES):
            rel_a, rel_b = reliability(a.summary, score), reliability(b.summary, score)
            top = ceiling(rel_a, rel_b)
            n = int((np.isfinite(sa[:, k]) & np.isfinite(sb[:, k])).sum())
            records.append({"audit_a": a.label, "audit_b": b.label, "score": score,
                            "spearman": values[k], "n": n,
                            "reliability_a": rel_a, "reliability_b": rel_b, "ceiling": top,
                            "above_ceiling": bool(np.isfinite(top) and values[k] > top),
                            "same_plan": bool(same)})
    return pd.DataFrame(records, columns=AGREEMENT_COLUMNS)


def _shap_figures(audits, config, details, quiet) -> list[dict]:
    from rmlens.comparison._shortcuts import shap_shares

    out = []
    with progress_bar("SHAP", total=len(audits), quiet=quiet) as advance:
        for audit in audits:
            fits = shap_shares(audit.table, audit.group_by, config.seed)
            details["shap"][audit.label] = fits
            for fit in fits:
                top = ", ".join(fit["top"]) or "none"
                out.append(_figure(audit.label, f"shap_shortcut_share_{fit['target']}",
                                   fit["share"], None, fit["n"], config.level,
                                   f"LightGBM held-out R^2 {fit['r2']:.2f}; shortcut features "
                                   f"by importance: {top}"))  # fmt: skip
            advance(1)
    return out


def _probe_figures(audits, draws, config, notes, quiet) -> list[dict]:
    from rmlens.comparison._shortcuts import probe_flips, probe_sample

    common = audits[0].ids
    for a in audits[1:]:
        common = common.intersection(a.ids)
    sample = probe_sample(common.sort_values(), config.probe_pairs, config.seed)
    notes.append(f"shortcut probes on {len(sample)} pairs all audits share (seeded sample), "
                 "each run scoring the ones it held out")
    out = []
    with progress_bar("probes", total=len(audits), quiet=quiet) as advance:
        for audit in audits:
            try:
                flips = probe_flips(audit, sample, draws[audit.label], device=config.device,
                                    quiet=True)  # fmt: skip
            except InputError as err:  # no saved RMs (a copied audit): say so, go on
                notes.append(f"{audit.label}: probes not run ({err})")
                advance(1)
                continue
            for name, (value, boot, n) in flips.items():
                out.append(_figure(audit.label, f"{M.PROBE_PREFIX}{name}", value, boot, n,
                                   config.level, "share of held-out edits (chosen and "
                                   "rejected side) that flip the preference"))  # fmt: skip
            advance(1)
    return out


def _figure_warnings(table: pd.DataFrame, agree: pd.DataFrame, summaries: dict) -> list[str]:
    """Accuracies near or below chance (``near_chance``), agreements above their ceiling
    (saying so when an audit's reliability measures seed noise only)."""
    warnings = []
    for r in table[table.near_chance].itertuples():
        if r.metric == "heldout_accuracy":
            warnings.append(f"{r.audit}: held-out accuracy {r.value:.3f} is within "
                            f"{M.NEAR_CHANCE} of chance: its RMs barely generalize, so its CM "
                            "mostly measures fitting and its other figures say little")
        elif r.metric == "worst_group_accuracy":
            warnings.append(f"{r.audit}: worst-group held-out accuracy {r.value:.3f} is near "
                            f"or below chance ({r.detail})")
        else:
            warnings.append(f"{r.audit}: {M.label(r.metric)} is {r.value:.3f} ({r.n} pairs), "
                            "near or below chance: on these pairs the RMs follow the shortcut")
    shared = agree[agree.above_ceiling & agree.same_plan]
    if len(shared):
        audits = sorted(set(shared.audit_a) | set(shared.audit_b))
        warnings.append(f"{len(shared)} agreement(s) between audits that share their plan "
                        f"({', '.join(audits)}) are above the ceiling: each of their runs holds "
                        "out the same groups, so they share the plan's noise, which the "
                        "ceiling (from independent halves of the runs) does not allow for; "
                        "read their agreement as an upper bound")
    for r in agree[agree.above_ceiling & ~agree.same_plan].itertuples():
        seeds = [a for a in (r.audit_a, r.audit_b)
                 if ((summaries.get(a) or {}).get("reliability") or {}).get("note")]
        why = (f"; {' and '.join(seeds)}: every repeat of the plan draws the same partition "
               "of groups, so the reliability measures seed noise only") if seeds else ""
        warnings.append(f"{r.audit_a} vs {r.audit_b}: {r.score.upper()} agreement "
                        f"{r.spearman:.3f} is above its ceiling {r.ceiling:.3f} (sqrt of the "
                        "two reliabilities): shared noise (same plan and seed hold out the "
                        f"same groups) or reliabilities underestimated{why}")
    return warnings


def _write(result: Comparison, out: Path, config: CompareConfig) -> None:
    from rmlens.comparison._plots import plot_agreement, plot_cm_by_margin, plot_family

    out.mkdir(parents=True, exist_ok=True)
    result.out = out
    labels = [a["label"] for a in result.audits]
    files = ["compare.parquet", "compare.json"]
    plots = []
    for fam in M.FAMILIES:
        if (result.figures.family == fam).any():
            plots.append(plot_family(result.figures, fam, labels, out / f"compare_{fam}.png"))
    if result.figures.metric.isin(MARGIN_METRICS).any():
        plots.append(plot_cm_by_margin(result.figures, labels, out / "compare_cm_by_margin.png"))
    if len(result.agreement):
        plots.append(plot_agreement(result.agreement, out / "compare_agreement.png"))
    files += [p.name for p in plots]
    for stale in (*(f"compare_{fam}.png" for fam in M.FAMILIES), "compare_cm_by_margin.png",
                  "compare_agreement.png"):  # an earlier comparison's plot, not drawn now
        if stale not in files:
            (out / stale).unlink(missing_ok=True)
    result.files = files
    write_parquet(result.figures, out / "compare.parquet")
    write_json(compare_record(result, config), out / "compare.json")


def compare_record(result: Comparison, config: CompareConfig) -> dict:
    """``compare.json``: the figures, agreement, audits, notes, warnings, config."""
    return plain({
        "version": rmlens.__version__,
        "config": config.to_dict(),
        "audits": result.audits,
        "figures": result.figures.to_dict("records"),
        "agreement": result.agreement.to_dict("records"),
        "details": result.details,
        "notes": result.notes,
        "warnings": result.warnings,
        "files": result.files,
        "metrics": {m: {"family": M.family(m), "label": M.label(m)}
                    for m in dict.fromkeys(result.figures.metric)},  # fmt: skip
    })


def plain(value):
    """JSON-ready Python: numpy scalars as Python numbers, NaN and infinities as None."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [plain(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    return value
