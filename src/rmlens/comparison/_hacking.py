"""Does the audit predict the hacking? The audits' own figures beside the best-of-n figures.

Per run of each audit, from its held-out pairs:

    length_spearman     Spearman(reward, words) over its held-out responses (the
                        comparison's ``reward_length_spearman`` of one run)
    shortcut_accuracy   accuracy on held-out pairs decided by a shortcut (mechanism
                        ``length`` or ``model_identity``): how often it sides with it

Per audit: their means over runs, ``cm_shortcut`` (mean CM of the shortcut-mechanism
pairs) and, when a ``compare.parquet`` beside the audit (its comparison directory) holds
them, the SHAP shortcut shares and the padding and signature probe flip rates. Hacking
figures (``_bon_curves.summarize``): gold at N, the drop from peak to N, the area between
the oracle's and the RM's gold curves, and the within-prompt proxy-gold Spearman.

Correlations are Spearman's: across runs, all audits' runs pooled, and within each audit;
across audits, over the audits' means (few points: read ``n``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rmlens._errors import InputError
from rmlens.comparison._audit import Audit
from rmlens.comparison._heldout import per_run_accuracy, reward_length
from rmlens.data import word_counts
from rmlens.stats import spearman

SHORTCUT_MECHANISMS = ("length", "model_identity")
COMPARE_METRICS = ("shap_shortcut_share_tg", "shap_shortcut_share_cm", "probe_flip_pad_filler",
                   "probe_flip_signature_synth")  # fmt: skip
HACKING = ("gold_at_max_n", "gold_drop", "oracle_gap_area", "spearman")
RUN_FIGURES = ("length_spearman", "shortcut_accuracy")


def check_same_world(audit: Audit, pool) -> list[str]:
    """Refuse an audit whose pairs are other data than the pool; notes on what is odd.

    A pool of the synthetic world (its candidates have a ``topic``) needs an audit of
    synthetic pairs (a ``topic`` column) that covers most of the pool's topics. Any other
    pool gets a note when none of its prompts is among the audit's pairs.
    """
    prompts = pool.frame.drop_duplicates("prompt_id")
    if "topic" in prompts:
        if "topic" not in audit.table:
            raise InputError(
                f"{audit.path}: an audit of other data than the pool {pool.path}: the pool is "
                "of the synthetic world (its candidates have a 'topic') and the audit's pairs "
                "have no 'topic' column; audit pairs of `rmlens data synth`"
            )
        seen = set(audit.table["topic"].dropna().astype(str))
        share = float(prompts["topic"].astype(str).isin(seen).mean())
        if share < 0.5:
            raise InputError(
                f"{audit.path}: an audit of other data than the pool {pool.path}: only "
                f"{share:.0%} of the pool's prompts are on topics of the audit's pairs"
            )
        return []
    shared = prompts["prompt"].astype(str).isin(set(audit.table["prompt"].astype(str)))
    if not shared.any():
        return [f"{audit.label}: none of the pool's {len(prompts)} prompts is among the "
                "audit's pairs; its RMs score prompts they never saw"]
    return []


def _compare_rows(audit: Audit) -> dict:
    path = audit.path.parent / "compare.parquet"
    if not path.is_file():
        return {}
    table = pd.read_parquet(path)
    rows = table[(table["audit"] == audit.label) & table["metric"].isin(COMPARE_METRICS)]
    return {m: float(v) for m, v in zip(rows["metric"], rows["value"])}


def audit_figures(audits: list[Audit]) -> dict:
    """``{"audits": {label: figures}, "runs": {label: {run: figures}}}`` (module docstring)."""
    per_audit, per_run = {}, {}
    for audit in audits:
        held = audit.held_out
        length = reward_length(audit.r_chosen, audit.r_rejected, held,
                               word_counts(audit.table["chosen"]),
                               word_counts(audit.table["rejected"]))  # fmt: skip
        figures = {"length_spearman": length}
        row = {"length_spearman": float(np.nanmean(length))}
        if "mechanism" in audit.table:
            shortcut = audit.table["mechanism"].isin(SHORTCUT_MECHANISMS).to_numpy(bool)
            accuracy = per_run_accuracy(audit.margins, held, shortcut)
            figures["shortcut_accuracy"] = accuracy
            row["shortcut_accuracy"] = float(np.nanmean(accuracy))
            row["cm_shortcut"] = float(np.nanmean(audit.table["cm"].to_numpy(float)[shortcut]))
        row.update(_compare_rows(audit))
        per_audit[audit.label] = row
        per_run[audit.label] = {
            run: {name: float(v[j]) for name, v in figures.items()}
            for j, run in enumerate(audit.runs)
        }
    return {"audits": per_audit, "runs": per_run}


def _pairs(x: list[float], y: list[float]) -> dict:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    rho = spearman(x[ok], y[ok]) if ok.sum() >= 3 else float("nan")
    return {"spearman": rho, "n": int(ok.sum())}


def correlations(figures: dict, hacking_runs: dict, hacking_audits: dict) -> dict:
    """Spearman correlations of audit figures with hacking figures (module docstring).

    ``hacking_runs``: ``{label: {run: hacking figures}}``; ``hacking_audits``: ``{label:
    hacking figures}`` of each audit's single-run row.
    """
    across_runs, within = [], []
    present = {n for runs in figures["runs"].values() for run in runs.values() for n in run}
    for name in (n for n in RUN_FIGURES if n in present):
        for target in HACKING:
            xs, ys = [], []
            for label, all_runs in figures["runs"].items():
                runs = [r for r in all_runs if r in hacking_runs[label]]
                x = [all_runs[r].get(name, np.nan) for r in runs]
                y = [hacking_runs[label][r][target] for r in runs]
                xs += x
                ys += y
                within.append({"audit": label, "audit_figure": name, "hacking_figure": target,
                               **_pairs(x, y)})  # fmt: skip
            across_runs.append({"audit_figure": name, "hacking_figure": target,
                                **_pairs(xs, ys)})  # fmt: skip
    across_audits = []
    labels = list(figures["audits"])
    names = dict.fromkeys(n for label in labels for n in figures["audits"][label])
    for name in names:
        for target in HACKING:
            x = [figures["audits"][label].get(name, np.nan) for label in labels]
            y = [hacking_audits[label][target] for label in labels]
            across_audits.append({"audit_figure": name, "hacking_figure": target,
                                  **_pairs(x, y)})  # fmt: skip
    runs = {label: {str(r): {**figures["runs"][label].get(r, {}), **hacking_runs[label][r]}
                    for r in hacking_runs[label]} for label in labels}  # fmt: skip
    return {"audits": figures["audits"], "runs": runs, "across_runs": across_runs,
            "within_audits": within, "across_audits": across_audits}  # fmt: skip
