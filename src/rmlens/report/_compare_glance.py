"""The first screen of ``compare.html``: which audit wins where and at what cost, the flagged
figures as one table, and the best-of-n section (``overoptimization.json`` beside
``compare.json``)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rmlens.comparison._metrics import figure_text

from ._html import esc, interval_text, table
from ._sections import Section

BASELINE = "bt"
NO_VALUE = "\u2013"


def _value(row: dict | None) -> float:
    value = (row or {}).get("value")
    return float(value) if isinstance(value, (int, float)) else float("nan")


def _by(figures: list[dict]) -> dict[tuple[str, str], dict]:
    return {(r["audit"], r["metric"]): r for r in figures}


def _baseline(audits: list[dict]) -> str | None:
    """The Bradley-Terry audit that is no reference row (the cost is measured from it)."""
    plain = [a for a in audits if not a.get("reference")]
    for a in plain:
        if a.get("objective") == BASELINE:
            return str(a["label"])
    return str(plain[0]["label"]) if plain else None


def _gold(oo: dict | None) -> dict[str, dict]:
    """Each audit's single-run and best-ensemble rows of the best-of-n summary."""
    out: dict[str, dict] = {}
    for row in (oo or {}).get("summary") or []:
        audit = row.get("audit")
        if not audit:
            continue
        entry = out.setdefault(audit, {})
        if row.get("kind") == "runs":
            entry["runs"] = row
        elif (row.get("gold_at_max_n") or float("-inf")) > (
            (entry.get("ensemble") or {}).get("gold_at_max_n") or float("-inf")
        ):
            entry["ensemble"] = row
    return out


def glance_section(record: dict[str, Any], oo: dict | None) -> Section | None:
    """One row per audit: held-out accuracy and its cost against Bradley-Terry, the slices it
    wins, and (with best-of-n curves) its gold at the largest n; then each slice's winner."""
    audits = record.get("audits") or []
    figures = record.get("figures") or []
    by = _by(figures)
    base = _baseline(audits)
    if not audits or base is None:
        return None
    labels = [str(a["label"]) for a in audits]
    plain = [str(a["label"]) for a in audits if not a.get("reference")]
    slices = list(dict.fromkeys(r["metric"] for r in figures if r.get("family") == "slices"
                                and not r.get("few_pairs")))  # fmt: skip
    winners = {}
    for metric in slices:
        values = {a: _value(by.get((a, metric))) for a in plain}
        values = {a: v for a, v in values.items() if v == v}
        if values:
            winners[metric] = max(values, key=values.get)
    gold = _gold(oo)
    n_max = max((oo or {}).get("ns") or [0])
    rows = []
    for label in labels:
        held = by.get((label, "heldout_accuracy"))
        cost = _value(held) - _value(by.get((base, "heldout_accuracy")))
        row = {"audit": label,
               "held-out accuracy": figure_cell(held),
               f"vs {base}": NO_VALUE if label == base or cost != cost else f"{cost:+.3f}",
               "worst group": figure_cell(by.get((label, "worst_group_accuracy"))),
               "slices won": f"{sum(w == label for w in winners.values())} of {len(winners)}"
               if label in plain else NO_VALUE}  # fmt: skip
        if gold:
            g = gold.get(label, {})
            row[f"gold at best-of-{n_max}"] = interval_text(g.get("runs"), "gold_at_max_n")
            best = g.get("ensemble")
            row["best ensemble"] = (f"{best['rm'][len(label) + 1:]}: "
                                    f"{interval_text(best, 'gold_at_max_n')}" if best else NO_VALUE)
        rows.append(row)
    metrics = record.get("metrics") or {}
    won = [{"figure": (metrics.get(m) or {}).get("label", m), "best": w,
            "value": figure_cell(by.get((w, m))), base: figure_cell(by.get((base, m)))}
           for m, w in winners.items()]  # fmt: skip
    body = (f'<p class="note">Accuracies are held-out (mean over runs, with the bootstrap '
            f"interval over runs); \u201cvs {esc(base)}\u201d is the held-out accuracy gained "
            "or lost against it (its cost); a slice is won by the highest held-out accuracy "
            "on pairs where a shortcut points the wrong way.")
    if gold:
        body += (f" Gold at best-of-{n_max}: the true quality of the answer the audit's RMs "
                 "pick among that many candidates (single runs, mean; its ensembles below: "
                 "the best of mean, min and uncertainty-weighted).")
    body += "</p>" + table(pd.DataFrame(rows))
    if won:
        body += "<h3>Where each slice is won</h3>" + table(pd.DataFrame(won))
    return Section("glance", "At a glance", body)


def figure_cell(row: dict | None) -> str:
    """A figure of ``compare.json`` as its value [interval], marked when near chance."""
    if not row:
        return NO_VALUE
    text = figure_text(row.get("value"), row.get("lo"), row.get("hi"), row.get("n"),
                       bool(row.get("few_pairs")))  # fmt: skip
    return text + (" \u26a0" if row.get("near_chance") else "")


def flags_section(record: dict[str, Any]) -> Section | None:
    """The figures flagged near or below chance, as one table: audits by figure."""
    figures = [r for r in record.get("figures") or [] if r.get("family") in ("accuracy",
               "slices")]  # fmt: skip
    flagged = [r for r in figures if r.get("near_chance")]
    if not flagged:
        return None
    metrics = record.get("metrics") or {}
    names = list(dict.fromkeys(r["metric"] for r in flagged))
    labels = [str(a["label"]) for a in record.get("audits") or []]
    by = _by(figures)
    rows = [{"audit": label, **{(metrics.get(m) or {}).get("label", m):
             figure_cell(by.get((label, m))) for m in names}} for label in labels]  # fmt: skip
    body = (f'<p class="note">{len(flagged)} figures of {len(labels)} audits are near or below '
            "chance (\u26a0: within 0.05 of 0.5, or below): on those pairs the RMs follow the "
            "shortcut rather than the better response. Every audit's value is shown, so a "
            "flag reads against the others.</p>")  # fmt: skip
    return Section("flags", "Flagged figures", body + table(pd.DataFrame(rows)))


def overoptimization_section(oo: dict, image) -> Section:
    """The best-of-n summary per RM and the curves (``image(name, caption)`` embeds a PNG)."""
    n_max = max(oo.get("ns") or [0])
    rows = []
    for row in oo.get("summary") or []:
        rows.append({"RM": row.get("rm"), f"gold at n={n_max}": interval_text(row, "gold_at_max_n"),
                     "peak n": row.get("peak_n"), "drop from peak": interval_text(row, "gold_drop"),
                     "area to oracle": interval_text(row, "oracle_gap_area"),
                     "Spearman(proxy, gold)": interval_text(row, "spearman"),
                     "words": row.get("words_at_max_n"),
                     "signature": row.get("signature_at_max_n")})  # fmt: skip
    frame = pd.DataFrame(rows).dropna(axis=1, how="all")
    n, prompts, pool = (esc(oo.get(k)) for k in ("candidates_per_prompt", "prompts", "candidates"))
    body = (f'<p class="note">Each RM picks the best of n of the {n} candidates of each of '
            f"{prompts} prompts of <code>{pool}</code>; "
            "the expected gold reward of the pick is exact (Coste et al.'s order-statistic "
            "estimator), plotted against KL_bon = log n - (n-1)/n, an upper bound on the KL of "
            "best-of-n from the base policy. Intervals: bootstrap over runs and prompts "
            "together. The oracle picks by gold. Gold rising then falling while the proxy "
            "keeps rising is overoptimization (Gao et al. 2023).</p>")  # fmt: skip
    body += table(frame)
    hacking = oo.get("hacking") or {}
    names = {"audit_figure": "audit figure", "hacking_figure": "hacking figure"}
    across = [r for r in hacking.get("across_runs") or []
              if r.get("hacking_figure") in ("gold_at_max_n", "oracle_gap_area")]  # fmt: skip
    audits = [r for r in hacking.get("across_audits") or []
              if r.get("hacking_figure") == "gold_at_max_n"]  # fmt: skip
    if across or audits:
        body += ("<h3>Does the audit predict the hacking?</h3><p class=\"note\">Spearman "
                 "correlation of each audit figure with the best-of-n figures: across runs "
                 "(all audits' runs pooled; each run's figure on its held-out pairs), then "
                 "across audits (their means; few points, read n).</p>")
    if across:
        body += table(pd.DataFrame(across).rename(columns=names))
    if audits:
        body += table(pd.DataFrame(audits).rename(columns=names))
    body += '<div class="images">'
    body += image("overoptimization.png", "gold, proxy and what the picks are, against KL")
    body += image("overoptimization_ensembles.png", "ensembles of each audit's runs")
    body += image("overoptimization_hacking.png", "audit figures against hacking, per run")
    body += "</div>"
    return Section("overoptimization", "Best-of-n overoptimization", body)
