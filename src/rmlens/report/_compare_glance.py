"""The first screen of ``compare.html``: which audit wins where and at what cost, the flagged
figures as one table, and the best-of-n section (``overoptimization.json`` beside
``compare.json``)."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from rmlens.comparison import CompareConfig
from rmlens.comparison.metrics import DIFFERENCES, few_pairs, figure_text

from ._html import esc, fmt, interval_text, table
from ._sections import Section

NO_VALUE = "\u2013"
# a figure on too few pairs: greyed in every table, its n in its tooltip
FEW_CSS = "td.few { color: #9aa1ad; background: #f3f4f6; font-style: italic; }"
COST = "heldout_accuracy_vs_baseline"
LOW_MARGIN = "slice_low_margin"
# the opening table's figures, in order: (header, metric); "{base}" names the baseline
COLUMNS = (
    ("held-out accuracy", "heldout_accuracy"),
    ("vs {base}", COST),
    ("worst group", "worst_group_accuracy"),
    ("low-margin accuracy", LOW_MARGIN),
    ("CM low \u2212 high margin", "cm_margin_low_minus_high"),
    ("TG, low margin", "tg_low_margin"),
    ("Spearman(reward, words)", "reward_length_spearman"),
)


def _value(row: dict | None) -> float:
    value = (row or {}).get("value")
    return float(value) if isinstance(value, (int, float)) else float("nan")


def _by(figures: list[dict]) -> dict[tuple[str, str], dict]:
    return {(r["audit"], r["metric"]): r for r in figures}


def min_pairs(record: dict[str, Any]) -> int:
    """The pairs a figure needs to be judged: the comparison's ``min_group_pairs``."""
    least = (record.get("config") or {}).get("min_group_pairs")
    return int(least) if isinstance(least, (int, float)) else CompareConfig().min_group_pairs


def marked(record: dict[str, Any]) -> list[dict]:
    """``compare.json``'s figures, each with ``few_pairs`` true where it rests on fewer pairs
    than ``min_pairs`` (also in a record written before every counted figure had the flag)."""
    least = min_pairs(record)
    return [{**r, "few_pairs": bool(r.get("few_pairs"))
             or few_pairs(str(r.get("metric")), r.get("n"), least)}
            for r in record.get("figures") or []]  # fmt: skip


@dataclass(frozen=True)
class Cell:
    """A table cell's text; ``few``: the tooltip of a figure on too few pairs (greyed)."""

    text: str
    few: str = ""


def few_title(n: Any, least: int) -> str:
    """Why a figure is greyed: ``only 1 pair (fewer than 20, min_group_pairs): not judged``."""
    count = int(n) if isinstance(n, (int, float)) and math.isfinite(n) else 0
    return (f"only {count} pair{'' if count == 1 else 's'} (fewer than {least}, "
            "min_group_pairs): not judged, no interval")


def figure_td(row: dict | None, least: int) -> Cell:
    """A figure as a table cell, greyed with its n when it rests on too few pairs."""
    few = bool(row and row.get("few_pairs"))
    return Cell(figure_cell(row), few_title(row.get("n"), least) if few else "")


def cells_table(rows: list[dict]) -> str:
    """An escaped HTML table of ``rows`` (columns: their keys in order) like ``_html.table``,
    in which a :class:`Cell` with ``few`` is greyed (class ``few``) and titled."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for value in (row.get(c, NO_VALUE) for c in columns):
            if isinstance(value, Cell) and value.few:
                cells.append(f'<td class="few" title="{esc(value.few)}">{esc(value.text)}</td>')
            else:
                cells.append(f"<td>{esc(value.text if isinstance(value, Cell) else fmt(value))}"
                             "</td>")  # fmt: skip
        body.append(f"<tr>{''.join(cells)}</tr>")
    return (f'<div class="table-wrap"><table class=""><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>")


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


def _top(by: dict, metric: str, labels: list[str]) -> list[str]:
    """The rows among ``labels`` with the highest value of ``metric`` as shown (3 decimals),
    all of them when they tie; empty when none has a value."""
    values = {a: round(_value(by.get((a, metric))), 3) for a in labels}
    values = {a: v for a, v in values.items() if not math.isnan(v)}
    best = max(values.values(), default=None)
    return [a for a, v in values.items() if v == best]


def _contested(figures: list[dict]) -> dict[str, bool]:
    """The figures a row can win (the counter-bias slices and the low-margin accuracy), each
    with whether some row has it on too few pairs (``few_pairs``: then it is not judged)."""
    out: dict[str, bool] = {}
    for r in figures:
        if r.get("family") == "slices" or r["metric"] == LOW_MARGIN:
            out[r["metric"]] = out.get(r["metric"], False) or bool(r.get("few_pairs"))
    return out


def _winners(figures: list[dict], by: dict, labels: list[str]) -> dict[str, list[str]]:
    """Per contested figure (``_contested``), the rows with its highest value among all rows
    shown, reference rows included; empty when every row with a value ties (no one wins).
    A figure that some row has on too few pairs is not judged (left out)."""
    out = {}
    for metric in (m for m, few in _contested(figures).items() if not few):
        valued = [a for a in labels if not math.isnan(_value(by.get((a, metric))))]
        top = _top(by, metric, valued)
        if top:
            out[metric] = top if len(top) < len(valued) else []
    return out


def glance_section(record: dict[str, Any], oo: dict | None) -> Section | None:
    """One row per audit: held-out accuracy and its cost against the baseline (Bradley-Terry),
    the worst group, the low-margin figures, the reward-length correlation, (with best-of-n
    curves) its gold at the largest n, and the slices it wins; then each slice's winner.

    A column whose figure no row has (data without a ``margin`` column: the low-margin ones)
    is left out."""
    audits = record.get("audits") or []
    figures = marked(record)
    if not audits:
        return None
    by = _by(figures)
    least = min_pairs(record)
    base = (record.get("details") or {}).get("baseline")
    labels = [str(a["label"]) for a in audits]
    plain = [str(a["label"]) for a in audits if not a.get("reference")]
    present = {r["metric"] for r in figures}
    columns = [(h.format(base=base), m) for h, m in COLUMNS if m in present]
    winners = _winners(figures, by, labels)
    gold = _gold(oo)
    n_max = max((oo or {}).get("ns") or [0])
    rows = []
    for label in labels:
        row = {"audit": label, **{h: figure_td(by.get((label, m)), least) for h, m in columns}}
        if gold:
            g = gold.get(label, {})
            row[f"gold at best-of-{n_max}"] = interval_text(g.get("runs"), "gold_at_max_n")
            best = g.get("ensemble")
            row["best ensemble"] = (f"{best['rm'][len(label) + 1:]}: "
                                    f"{interval_text(best, 'gold_at_max_n')}" if best else NO_VALUE)
        if any(winners.values()):
            row["slices won"] = f"{sum(label in t for t in winners.values())} of {len(winners)}"
        rows.append(row)
    body = _answer(by, plain, base, gold, n_max)
    few = least if any(r["few_pairs"] for r in figures) else None
    body += _glance_note(base, bool(gold), n_max, {m for _, m in columns}, few)
    body += cells_table(rows)
    unjudged = [m for m, few in _contested(figures).items() if few]
    if any(winners.values()) or unjudged:
        won = _won_rows(winners, by, record.get("metrics") or {}, plain, base)
        won += _unjudged_rows(unjudged, by, labels, record.get("metrics") or {}, least)
        body += "<h3>Where each slice is won</h3>" + cells_table(won)
    return Section("glance", "At a glance", body)


# the headline figures of the answer: (words, metric, the key the best maximizes)
HEADLINES = (
    ("the highest held-out accuracy", "heldout_accuracy", float),
    ("the least length-following rewards (|Spearman(reward, words)| lowest)",
     "reward_length_spearman", lambda v: -abs(v)),
    ("the highest accuracy on the weakest preferences", LOW_MARGIN, float),
    ("the most memory moved to the weakest preferences (CM low − high margin)",
     "cm_margin_low_minus_high", float),
)  # fmt: skip


Answer = list[list[tuple[str, bool]]]
"""The answer of a comparison: one item per headline figure, each a list of (plain text,
named audit) segments; the page renders it as HTML, the console as text
(:func:`comparison_answer`)."""


def answer_items(by: dict, plain: list[str], base: str | None, gold: dict,
                 n_max: int) -> Answer:  # fmt: skip
    """Which audit (no reference row) is best on each headline figure, and what it costs in
    held-out accuracy against the baseline: the page's answer in a few items."""
    items: Answer = []
    candidates = list(HEADLINES)
    if gold:
        candidates.append((f"the most gold at best-of-{n_max}", "gold", float))
    for words, metric, key in candidates:
        if metric == "gold":
            values = {a: (gold.get(a, {}).get("runs") or {}).get("gold_at_max_n") for a in plain}
            values = {a: float(v) for a, v in values.items() if isinstance(v, (int, float))}
        else:  # a figure on too few pairs is no answer
            values = {a: _value(by.get((a, metric))) for a in plain
                      if not (by.get((a, metric)) or {}).get("few_pairs")}  # fmt: skip
            values = {a: v for a, v in values.items() if not math.isnan(v)}
        if len(values) < 2:
            continue
        top = max(round(key(v), 3) for v in values.values())
        tied = [a for a, v in values.items() if round(key(v), 3) == top]  # as shown: 3 places
        best = tied[0]
        shown = (interval_text(gold[best]["runs"], "gold_at_max_n") if metric == "gold"
                 else figure_cell(by.get((best, metric))))  # fmt: skip
        item: list[tuple[str, bool]] = []
        for i, audit in enumerate(tied):
            item += [(" and ", False)] if i else []
            item.append((audit, True))
        text = f" {'has' if len(tied) == 1 else 'tie for'} {words}: {shown}"
        if len(tied) > 1:
            text += f" ({best}'s)"
        if base is not None and base not in tied:
            if metric == "gold":
                ref = interval_text(gold.get(base, {}).get("runs"), "gold_at_max_n")
            else:
                ref = figure_cell(by.get((base, metric)))
            text += f" against {base}'s {ref}"
            row = gold[best]["runs"] if metric == "gold" else by.get((best, metric)) or {}
            if _within(_base_value(by, gold, base, metric), row, metric == "gold"):
                text += f", which lies within {best}'s interval: not told apart from {base}"
            cost = by.get((best, COST))
            if cost:
                text += (f"; {best + chr(39) + 's' if len(tied) > 1 else 'its'} held-out "
                         f"accuracy against {base}: {figure_cell(cost)}")
        elif base in tied:
            text += " (no objective beats it)"
        items.append(item + [(text, False)])
    return items


def _answer(by: dict, plain: list[str], base: str | None, gold: dict, n_max: int) -> str:
    """:func:`answer_items` as the page shows them (named audits in bold)."""
    items = answer_items(by, plain, base, gold, n_max)
    if not items:
        return ""
    def text(t: str) -> str:  # element text: quotes stay as they are
        return html.escape(t, quote=False)

    lines = ["<li>" + "".join(f"<b>{text(t)}</b>" if named else text(t) for t, named in item)
             + "</li>" for item in items]  # fmt: skip
    return f'<p class="note">{ANSWER}:</p><ul>' + "".join(lines) + "</ul>"


ANSWER = "Which objective, at what cost"


def comparison_answer(record: dict[str, Any], oo: dict | None = None) -> Answer:
    """The answer that opens a comparison's page (``compare.html``), as a structure.

    Parameters
    ----------
    record : dict
        The comparison's ``compare.json``.
    oo : dict, optional
        Its ``overoptimization.json`` (the best-of-n curves), when of the same audits.

    Returns
    -------
    list of list of (str, bool)
        One item per headline figure (held-out accuracy, shortcut figures, gold at the
        largest n): plain-text segments, ``True`` where the segment names an audit.
        Empty where fewer than two audits have a figure.
    """
    figures = marked(record)
    plain = [str(a["label"]) for a in record.get("audits") or [] if not a.get("reference")]
    base = (record.get("details") or {}).get("baseline")
    n_max = max((oo or {}).get("ns") or [0])
    return answer_items(_by(figures), plain, base, _gold(oo), n_max)


def _base_value(by: dict, gold: dict, base: str, metric: str) -> float:
    if metric == "gold":
        return float((gold.get(base, {}).get("runs") or {}).get("gold_at_max_n", math.nan))
    return _value(by.get((base, metric)))


def _within(value: float, row: dict, gold: bool) -> bool:
    """Whether ``value`` lies inside the figure's interval (``lo``/``hi``, or a best-of-n
    row's ``gold_at_max_n_lo``/``_hi``)."""
    lo, hi = (row.get("gold_at_max_n_lo"), row.get("gold_at_max_n_hi")) if gold else (
        row.get("lo"), row.get("hi"))  # fmt: skip
    finite = all(isinstance(x, (int, float)) and math.isfinite(x) for x in (value, lo, hi))
    return finite and lo <= value <= hi


def _won_rows(winners: dict[str, list[str]], by: dict, metrics: dict, plain: list[str],
              base: str | None) -> list[dict]:  # fmt: skip
    """One row per contested figure: its best rows (of all rows shown), their value, the
    baseline's; and, where a reference row is among the best, the best audit itself."""
    reference_wins = any(set(top) - set(plain) for top in winners.values())
    rows = []
    for metric, top in winners.items():
        row = {"figure": (metrics.get(metric) or {}).get("label", metric),
               "best": ", ".join(top) or "all rows tie",
               "value": figure_cell(by.get((top[0], metric))) if top else NO_VALUE}
        if reference_wins:
            own = _top(by, metric, plain) if set(top) - set(plain) else []
            row["best audit (no reference)"] = (
                f"{', '.join(own)}: {figure_cell(by.get((own[0], metric)))}" if own else NO_VALUE
            )
        if base is not None:
            row[base] = figure_cell(by.get((base, metric)))
        rows.append(row)
    return rows


def _unjudged_rows(unjudged: list[str], by: dict, labels: list[str], metrics: dict,
                   least: int) -> list[dict]:  # fmt: skip
    """One greyed row per contested figure that some row has on too few pairs: not judged
    (its n: the fewest pairs any row has it on)."""
    rows = []
    for metric in unjudged:
        n = int(min((by[(a, metric)].get("n") or 0 for a in labels if (a, metric) in by),
                    default=0))  # fmt: skip
        rows.append({"figure": (metrics.get(metric) or {}).get("label", metric),
                     "best": Cell(f"not judged (n {n})", few_title(n, least))})
    return rows


def _glance_note(base: str | None, gold: bool, n_max: int, shown: set[str],
                 few: int | None) -> str:  # fmt: skip
    """What the opening table's columns mean (those shown); ``few``: the pairs a figure needs,
    where some figure has fewer (greyed)."""
    text = "Accuracies are held-out (mean over runs, with the bootstrap interval over runs)"
    if COST in shown:
        text += (f"; \u201cvs {base}\u201d is the held-out accuracy gained or lost against "
                 "it (its cost), with the interval of the difference")
    if LOW_MARGIN in shown:
        text += ("; the low-margin figures are on the lowest tercile of the data's margin "
                 "(the weakest preferences): accuracy there, TG there, and mean CM there minus "
                 "mean CM on the highest tercile (above 0: memory moved to the hard pairs)")
    if "reward_length_spearman" in shown:
        text += "; Spearman(reward, words) near 0: rewards that do not follow length"
    text += (". A slice (pairs where a shortcut points the wrong way, and the low-margin "
             "tercile) is won by the highest held-out accuracy of all the rows shown, "
             "reference rows included; tied rows are all named.")
    if few is not None:
        text += (f" Greyed: a figure on fewer than {few} pairs (min_group_pairs), shown as its "
                 "value and n without an interval and never flagged; a slice that any row has "
                 "on so few pairs is not judged.")
    if gold:
        text += (f" Gold at best-of-{n_max}: the true quality of the answer the audit's RMs "
                 "pick among that many candidates (single runs, mean; its ensembles: the "
                 "best of mean, min and uncertainty-weighted).")
    return f'<p class="note">{esc(text)}</p>'


def figure_cell(row: dict | None) -> str:
    """A figure of ``compare.json`` as its value [interval] (signed for a difference), marked
    when near chance."""
    if not row:
        return NO_VALUE
    text = figure_text(row.get("value"), row.get("lo"), row.get("hi"), row.get("n"),
                       bool(row.get("few_pairs")), row.get("metric") in DIFFERENCES)  # fmt: skip
    return text + (" \u26a0" if row.get("near_chance") else "")


def flags_section(record: dict[str, Any]) -> Section | None:
    """The figures flagged near or below chance, as one table: audits by figure."""
    figures = marked(record)
    flagged = [r for r in figures if r.get("near_chance")]  # accuracies, whatever the family
    if not flagged:
        return None
    metrics = record.get("metrics") or {}
    names = list(dict.fromkeys(r["metric"] for r in flagged))
    labels = [str(a["label"]) for a in record.get("audits") or []]
    by = _by(figures)
    least = min_pairs(record)
    rows = [{"audit": label, **{(metrics.get(m) or {}).get("label", m):
             figure_td(by.get((label, m)), least) for m in names}} for label in labels]  # fmt: skip
    body = (f'<p class="note">{len(flagged)} figures of {len(labels)} audits are near or below '
            "chance (\u26a0: within 0.05 of 0.5, or below): on those pairs the RMs follow the "
            "shortcut rather than the better response. Every audit's value is shown, so a "
            "flag reads against the others.</p>")  # fmt: skip
    return Section("flags", "Flagged figures", body + cells_table(rows))


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
