"""``compare``: audits side by side, with bootstrap intervals over runs.

Reads each audit's experiment directory (``_audit``), computes per audit the held-out
figures (``_heldout``), memorization by margin (``_margin``), shortcut reliance
(``_shortcuts``) and, across audits, the agreement of their TM, TG, CM rankings beside its
ceiling (``_agreement``), one family at a time (``_figures``); writes ``compare.parquet``,
``compare.json`` and the PNGs into the comparison directory (``_record``). The page
(``compare.html``) is written by ``rmlens.report.write_compare_report`` from those files
(report sits above comparison).
"""

from __future__ import annotations

import itertools
import warnings as _warnings
from pathlib import Path

import pandas as pd

from rmlens._base import needed_out, resolve_config
from rmlens._errors import InputError, RmlensWarning
from rmlens.comparison import metrics as M
from rmlens.comparison._agreement import common_rows
from rmlens.comparison._audit import Audit, default_labels, find_audits, is_audit, load_audit
from rmlens.comparison._calibration import SUFFIX, calibrator, length_calibrated
from rmlens.comparison._config import CompareConfig
from rmlens.comparison._figures import (
    agreement_table,
    by_margin_figures,
    cost_figures,
    heldout_figures,
    probe_figures,
    shap_figures,
)
from rmlens.comparison._record import write_comparison
from rmlens.comparison._result import Comparison
from rmlens.stats import bootstrap_runs

COLUMNS = ["audit", "family", "metric", "value", "lo", "hi", "n", "detail", "near_chance",
           "few_pairs"]  # fmt: skip


def compare(
    dirs: list[str | Path],
    config: CompareConfig | None = None,
    *,
    out: str | Path | None = None,
    quiet: bool = False,
    **overrides,
) -> Comparison:
    """Compare audits side by side and write the comparison directory.

    Parameters
    ----------
    dirs : list of path
        Experiment directories of ``rmlens memorize``; a folder holding audits one level
        down (a comparison directory) stands for them. Audits may differ in objective,
        backbone, head, mode or plan; their pair sets must overlap.
    config : CompareConfig, optional
        The settings (default ``CompareConfig()``).
    out : str or Path
        The comparison directory (created; may be the audits' parent): ``compare.parquet``,
        ``compare.json``, ``compare_*.png``. Nothing else in it is touched. Needed.
    quiet : bool, default=False
        No progress bars or status lines; the warnings are issued all the same
        (:class:`~rmlens.RmlensWarning`).
    **overrides
        Fields of ``CompareConfig``, applied to ``config`` (``compare(dirs, out="cmp",
        probes=False)``).

    Returns
    -------
    Comparison

    Raises
    ------
    InputError
        A directory that is no audit and holds none, audits without common pairs, labels
        that do not match the audits, a ``groups`` column that is absent, no ``out``.

    Examples
    --------
    >>> from rmlens.comparison import compare
    >>> result = compare(["cmp/bt", "cmp/poe"], out="cmp", probes=False)  # doctest: +SKIP
    >>> result.wide()  # doctest: +SKIP
    """
    config = resolve_config("compare", CompareConfig, config, overrides).check()
    out = needed_out("compare", out)
    _check_out(out)
    audits = _load_audits(dirs, config)
    notes: list[str] = []
    warnings = _check_inputs(audits, config)
    rows = _with_references(audits, config, notes)
    draws = _draws(audits, rows, config)
    details: dict = {"worst_group": {}, "slices": {}, "margin_terciles": {}, "shap": {}}
    figures: list[dict] = []
    for row in rows:
        figures += heldout_figures(row, draws[row.label], config, details)
    figures += cost_figures(rows, draws, config, details)
    if len(rows) > 1 and "baseline" in details:
        notes.append(f"'{M.label('heldout_accuracy_vs_baseline')}': each row against "
                     f"'{details['baseline']}' (the first audit with objective "
                     f"{M.BASELINE}, else the first audit)")
    figures += by_margin_figures(rows, draws, config, details, quiet)
    agree = agreement_table(audits)
    if config.shap:
        figures += shap_figures(audits, config, details, quiet)
    else:
        notes.append("SHAP shortcut shares not computed (`shap` off)")
    if config.probes:
        figures += probe_figures(audits, draws, config, notes, quiet)
    else:
        notes.append("shortcut probes not run (`probes` off)")
    table = _figure_table(figures, config)
    flags, others = _figure_warnings(table, agree, {a.label: a.summary for a in audits})
    warnings += flags + others
    result = Comparison(table, agree, [r.describe() for r in rows], notes, warnings, details,
                        flags=flags)  # fmt: skip
    write_comparison(result, Path(out), config)
    for warning in warnings:
        _warnings.warn(warning, RmlensWarning, stacklevel=2)
    return result


def _check_out(out: str | Path) -> None:
    """Refuse an ``out`` that is an audit or a file."""
    if is_audit(Path(out)):
        raise InputError(f"`out` {out}: an audit's experiment directory (it holds what its runs "
                         "produced and nothing else); choose its parent or another folder")
    if Path(out).exists() and not Path(out).is_dir():
        raise InputError(f"`out` {out}: is a file, not a directory")


def _load_audits(dirs: list[str | Path], config: CompareConfig) -> list[Audit]:
    """The audits in ``dirs``, each under its label."""
    paths = find_audits(dirs)
    labels = list(config.labels) or default_labels(paths)
    if len(labels) != len(paths):
        raise InputError(f"`labels`: {len(labels)} name(s) for {len(paths)} audit(s) "
                         f"({', '.join(map(str, paths))})")
    return [load_audit(p, name) for p, name in zip(paths, labels)]


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
    prints = {a.label: a.data_sha1 for a in audits}
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
    bt = [a for a in audits if a.objective == M.BASELINE]
    if calibrate is None:
        notes.append(f"no '+ {SUFFIX}' reference row: this rmlens has no "
                     "rmlens.evaluation.calibrate_length")
        return list(audits)
    if not bt:
        notes.append(f"no '+ {SUFFIX}' reference row: no audit trains with objective bt")
    rows = []
    for audit in audits:
        rows.append(audit)
        if audit.objective == M.BASELINE:
            rows.append(length_calibrated(audit, calibrate))
    if bt:
        notes.append(f"'+ {SUFFIX}': each run's rewards minus a LOWESS fit of reward on "
                     "response length in characters, fitted per run on all the pairs it "
                     "scored (Huang et al. 2024); figures from run scores only (no SHAP, "
                     "probes or agreement)")
    return rows


def _draws(audits: list[Audit], rows: list, config: CompareConfig) -> dict:
    """Run indices of each bootstrap draw, per row; a reference row shares its audit's draws
    (a paired comparison: the same resampled runs, calibrated or not)."""
    index = {a.path: i for i, a in enumerate(audits)}
    return {r.label: bootstrap_runs(len(r.runs), config.n_boot, [config.seed, index[r.path]])
            for r in rows}  # fmt: skip


def _figure_table(figures: list[dict], config: CompareConfig) -> pd.DataFrame:
    """The figures as ``compare.parquet``'s table, with ``near_chance`` and ``few_pairs``."""
    table = pd.DataFrame(figures, columns=COLUMNS[:-2])
    table["n"] = table["n"].astype(int)
    few = pd.Series([M.few_pairs(m, n, config.min_group_pairs)
                     for m, n in zip(table.metric, table.n)], index=table.index, dtype=bool)
    table["near_chance"] = [M.near_chance(m, v) for m, v in zip(table.metric, table.value)]
    table["near_chance"] &= ~few
    table["few_pairs"] = few
    return table


def _figure_warnings(table: pd.DataFrame, agree: pd.DataFrame,
                     summaries: dict) -> tuple[list[str], list[str]]:  # fmt: skip
    """Accuracies near or below chance (``near_chance``: one per flagged figure), then
    agreements above their ceiling (saying so when an audit's reliability measures seed noise
    only)."""
    flags = []
    slices: dict[str, list] = {}  # a slice flagged in several audits: one line for it
    for r in table[table.near_chance].itertuples():
        if r.metric == "heldout_accuracy":
            where = (f"is within {M.NEAR_CHANCE} of chance" if r.value >= 0.5 - M.NEAR_CHANCE
                     else "is below chance")  # fmt: skip
            flags.append(f"{r.audit}: held-out accuracy {r.value:.3f} {where}: its RMs barely "
                         "generalize, so its CM mostly measures fitting and its other figures "
                         "say little")  # fmt: skip
        elif r.metric == "worst_group_accuracy":
            flags.append(f"{r.audit}: worst-group held-out accuracy {r.value:.3f} is near "
                            f"or below chance ({r.detail})")
        else:
            slices.setdefault(r.metric, []).append(r)
    for metric, rows in slices.items():
        why = ("the RMs barely rank the weakest preferences (some may be near ties in the data "
               "itself)" if metric == "slice_low_margin"
               else "on these pairs the RMs follow the shortcut")  # fmt: skip
        if len(rows) == 1:
            r = rows[0]
            flags.append(f"{r.audit}: {M.label(metric)} is {r.value:.3f} ({r.n} pairs), near "
                         f"or below chance: {why}")
            continue
        each = ", ".join(f"{r.audit} {r.value:.3f}" for r in rows)
        sizes = sorted({int(r.n) for r in rows})
        pairs = (f"{sizes[0]} pairs" if len(sizes) == 1
                 else f"{sizes[0]} to {sizes[-1]} pairs")  # fmt: skip
        flags.append(f"{M.label(metric)} is near or below chance in {len(rows)} audits ({each}; "
                     f"{pairs}): {why}")
    warnings = []
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
    return flags, warnings
