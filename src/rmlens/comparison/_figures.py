"""The figures of a comparison, one family at a time, each with its bootstrap interval.

Per row (an audit or its length-calibrated reference): held-out figures (``_heldout``), the
held-out accuracy gained or lost against the baseline (bt) and memorization by margin
(``_margin``); per audit: SHAP shortcut shares and probe flip rates
(``_shortcuts``); across audits: the agreement of their TM, TG, CM rankings beside its
ceiling (``_agreement``). Each figure is one row of ``compare.parquet``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from rmlens._errors import InputError
from rmlens.comparison import metrics as M
from rmlens.comparison._agreement import SCORES, agreement, ceiling, common_rows, reliability
from rmlens.comparison._audit import Audit
from rmlens.comparison._config import CompareConfig
from rmlens.comparison._heldout import (
    counter_bias_slices,
    heldout_accuracy,
    low_margin_accuracy,
    per_run_accuracy,
    reward_length,
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
    table_margin,
    tercile_bounds,
)
from rmlens.comparison._shortcuts import probe_flips, probe_sample, shap_shares
from rmlens.data import word_counts
from rmlens.progress import progress_bar
from rmlens.stats import percentile_interval, run_mean, run_weights

AGREEMENT_COLUMNS = ["audit_a", "audit_b", "score", "spearman", "n", "reliability_a",
                     "reliability_b", "ceiling", "above_ceiling", "same_plan"]  # fmt: skip


def _figure(audit, metric, value, boot, n, level, detail="") -> dict:
    lo, hi = percentile_interval(boot, level) if boot is not None else (np.nan, np.nan)
    return {"audit": audit, "family": M.family(metric), "metric": metric, "value": float(value),
            "lo": lo, "hi": hi, "n": int(n), "detail": detail}  # fmt: skip


def heldout_figures(audit: Audit, draws, config: CompareConfig, details: dict) -> list[dict]:
    d, held, level = audit.margins, audit.held_out, config.level
    out = []
    value, boot, n = heldout_accuracy(d, held, draws)
    out.append(_figure(audit.label, "heldout_accuracy", value, boot, n, level,
                       f"mean over {len(audit.runs)} runs of each run's accuracy on the pairs "
                       "it held out"))  # fmt: skip
    column = config.groups or "group"
    groups = audit.table[column] if column in audit.table else pd.Series([np.nan] * len(d))
    worst = worst_group(d, held, groups, run_weights(draws, len(audit.runs)),
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
            text += f"; only {n} held-out pairs (under `min_group_pairs`): not warned about"
        out.append(_figure(audit.label, f"slice_{name}", value, boot, n, level, text))
    margin = table_margin(audit.table)
    if margin is not None:
        value, boot, n = low_margin_accuracy(d, held, margin, draws)
        low, high = tercile_bounds(margin, margin_terciles(margin))[0]
        text = f"the lowest-margin tercile (margin {low:g} to {high:g})"
        if n < config.min_group_pairs:
            text += f"; only {n} held-out pairs (under `min_group_pairs`): not warned about"
        out.append(_figure(audit.label, "slice_low_margin", value, boot, n, level, text))
    per_run = reward_length(audit.r_chosen, audit.r_rejected, held,
                            word_counts(audit.table["chosen"]),
                            word_counts(audit.table["rejected"]))  # fmt: skip
    value, boot = run_mean(per_run, draws)
    out.append(_figure(audit.label, "reward_length_spearman", value, boot,
                       int(held.any(1).sum()), level,
                       "per run over its held-out responses (chosen and rejected), mean "
                       "over runs"))  # fmt: skip
    return out


def baseline(rows: list[Audit]) -> Audit | None:
    """The row the others' cost is measured from: the first Bradley-Terry audit that is no
    reference row, else the first audit that is none (None without such a row)."""
    plain = [r for r in rows if r.reference is None]
    return next((r for r in plain if r.objective == M.BASELINE), plain[0] if plain else None)


def cost_figures(rows: list[Audit], draws, config: CompareConfig, details: dict) -> list[dict]:
    """Each row's held-out accuracy minus the baseline's (``baseline``), with the interval of
    the difference itself.

    A row of the baseline's plan (each run holds out the same groups: ``mitigate``'s audits,
    a reference row) is paired by run over the baseline's draws of runs,

        cost = mean over runs r of (acc_r - acc_base_r)

    where the plans differ, the runs are independent: draw k of the row's accuracy minus
    draw k of the baseline's, each over its own runs.
    """
    base = baseline(rows)
    if base is None:
        return []
    details["baseline"] = base.label
    acc_base = per_run_accuracy(base.margins, base.held_out)  # (n_runs,)
    value_base, boot_base = run_mean(acc_base, draws[base.label])
    out = []
    for row in rows:
        if row is base:
            continue
        acc = per_run_accuracy(row.margins, row.held_out)
        if row.ids.equals(base.ids) and np.array_equal(row.member, base.member):
            value, boot = run_mean(acc - acc_base, draws[base.label])
            how = "paired by run (the same plan)"
        else:
            value, boot = run_mean(acc, draws[row.label])
            value, boot = value - value_base, boot - boot_base
            how = "independent draws of each one's runs (other plans)"
        out.append(_figure(row.label, "heldout_accuracy_vs_baseline", value, boot,
                           int(row.held_out.any(1).sum()), config.level,
                           f"minus '{base.label}'; {how}"))  # fmt: skip
    return out


def by_margin_figures(rows, draws, config, details, quiet) -> list[dict]:
    """Memorization by margin per row (``_margin``); the tercile means and TG on the low
    tercile get intervals from TM/TG/CM recomputed per bootstrap draw of runs.

    The Spearman of CM with margin gets none: a draw of runs repeats some runs, so each
    pair's CM is noisier in it than in the audit, which pulls a correlation across pairs
    toward 0; its percentile interval would sit beside the figure, not around it.
    """
    out = []
    margins = {row.label: table_margin(row.table) for row in rows}
    total = config.n_boot * sum(m is not None for m in margins.values())
    with progress_bar("bootstrap", total=total, quiet=quiet) as advance:  # one bar, all audits
        for row in rows:
            m = margins[row.label]
            if m is None:
                continue
            out += _margin_rows(row, m, draws, config, details, advance)
    return out


def _margin_rows(row, m, draws, config, details, advance) -> list[dict]:
    """One audit's figures by margin with their intervals (:func:`by_margin_figures`)."""
    out = []
    terc = margin_terciles(m)
    p, p_cf = row.probabilities()
    point = pair_scores(p, row.member, row.val, p_cf)
    boot = np.full((config.n_boot, len(MARGIN_METRICS)), np.nan)
    block = 50  # draws at a time: memory about n_pairs x block x 3 floats
    for start in range(0, config.n_boot, block):
        chunk = draws[row.label][start:start + block]
        scores = pair_score_draws(p, row.member, row.val,
                                  run_weights(chunk, len(row.runs)), p_cf)  # fmt: skip
        for k in range(len(chunk)):
            boot[start + k] = margin_figures(scores[k], m, terc, correlation=False)
        advance(len(chunk))
    values = margin_figures(point, m, terc)
    counts = margin_counts(point, m, terc)
    bounds = tercile_bounds(m, terc)
    details["margin_terciles"][row.label] = [list(b) for b in bounds]
    shown = [f"margin {lo:g} to {hi:g}" for lo, hi in bounds]
    detail = {"cm_margin_low_minus_high": f"low ({shown[0]}) minus high ({shown[2]}), "
              "per draw", "tg_low_margin": shown[0],
              "cm_margin_spearman": "across pairs; no interval (see notes)",
              **dict(zip(MARGIN_METRICS[:3], shown))}  # fmt: skip
    for k, metric in enumerate(MARGIN_METRICS):
        draws_k = None if metric == "cm_margin_spearman" else boot[:, k]
        out.append(_figure(row.label, metric, values[k], draws_k, counts[k], config.level,
                           detail[metric]))  # fmt: skip
    return out


def agreement_table(audits: list[Audit]) -> pd.DataFrame:
    """Per pair of audits and score, Spearman over their common pairs beside the ceiling
    sqrt(rel_a rel_b) (``_agreement``). No bootstrap interval: resampling runs makes each
    pair's score noisier and pulls the correlation toward 0 (see ``by_margin_figures``); the
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


def shap_figures(audits, config, details, quiet) -> list[dict]:
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


def probe_figures(audits, draws, config, notes, quiet) -> list[dict]:
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
