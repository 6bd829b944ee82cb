"""``write_compare_report``: the comparison directory as one self-contained HTML page.

Reads what ``rmlens.comparison.compare`` wrote (``compare.json`` and the ``compare_*.png``
plots) and writes ``compare.html`` in the style of ``report.html``: the same style sheet
and content security policy (no request leaves the page), every value from the data
escaped, plots embedded as base64 PNGs. The page needs no script.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pandas as pd

from rmlens import __version__
from rmlens._errors import InputError
from rmlens._io import write_text
from rmlens.comparison.metrics import FAMILIES, NO_DIRECTION, cm_margin_direction, direction_floor

from ._assets import CSP, CSS
from ._compare_glance import (
    FEW_CSS,
    Cell,
    cells_table,
    few_title,
    figure_td,
    flags_section,
    glance_section,
    marked,
    min_pairs,
    overoptimization_section,
)
from ._html import esc, fmt, key_value_table, table, warning_box
from ._sections import Section

_MAX_PNG_BYTES = 4_000_000
FAMILY_NOTES = {
    "accuracy": "Each run's accuracy on the pairs it held out (a tie counts 1/2), mean over "
    "runs; the worst group pools each group's held-out predictions over runs. Chance is 0.5. "
    "Minus the baseline's: the accuracy gained or lost against the baseline audit (bt), "
    "paired by run when both share a plan, with the interval of the difference.",
    "slices": "Held-out accuracy on pairs where a shortcut points the wrong way. An RM that "
    "judges quality does about as well here as overall; one that follows the shortcut "
    "drops toward or below chance.",
    "margin": "Held-out accuracy on the lowest tercile of the preference margin (the "
    "weakest preferences), mean CM = TM - TG per tercile and the low tercile's minus the "
    "high one's (interval from the same draws), the Spearman correlation of CM with margin, "
    "and TG on the weakest preferences. CM rising with margin (Spearman above 0, low minus "
    "high below 0) means the strongest preferences are memorized most; CM falling with "
    "margin (Spearman below 0, low minus high above 0) means the weakest are. Which way "
    "each row goes is stated below, beside the paper's finding.",
    "shortcuts": "Spearman of reward with response length in words over held-out responses "
    "(per run, mean over runs), and the share of SHAP importance that shortcut features "
    "(lengths, compliance, refusal, model identity) take in regressions of TG and CM.",
    "probes": "Share of edits that flip a run's preference on pairs it held out, when a probe "
    "edits the chosen or the rejected response in a way that should not matter.",
}


def write_compare_report(out_dir: str | Path) -> Path:
    """Write ``out_dir/compare.html`` from ``compare.json`` and the plots it lists.

    Parameters
    ----------
    out_dir : str or Path
        Comparison directory written by :func:`rmlens.comparison.compare`.

    Returns
    -------
    Path
        Path of ``compare.html``.

    Raises
    ------
    InputError
        When ``compare.json`` is missing or not valid JSON.
    """
    root = Path(out_dir)
    path = root / "compare.json"
    if not path.is_file():
        raise InputError(f"{path}: not found; run `rmlens compare DIR ... --out {root}` first")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: not valid JSON ({err})") from None
    oo = read_overoptimization(root, record)
    images = {}
    listed = [f for f in record.get("files") or [] if isinstance(f, str)
              and f.startswith("compare_") and f.endswith(".png") and "/" not in f]  # fmt: skip
    if oo is not None:
        listed += [f"overoptimization{s}.png" for s in ("", "_ensembles", "_hacking")]
    for png in (root / name for name in listed):
        if not png.is_file():
            continue
        data = png.read_bytes()
        if len(data) <= _MAX_PNG_BYTES:
            images[png.name] = base64.b64encode(data).decode("ascii")
    return write_text(render_compare_page(record, images, oo), root / "compare.html")


def read_overoptimization(root: Path, record: dict) -> dict | None:
    """The best-of-n curves beside a comparison, when they are of the same audits.

    Parameters
    ----------
    root : Path
        The comparison directory.
    record : dict
        Its ``compare.json``.

    Returns
    -------
    dict or None
        ``overoptimization.json``; None when absent, unreadable or of other audits.
    """
    path = root / "overoptimization.json"
    if not path.is_file():
        return None
    try:
        oo = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: not valid JSON ({err})") from None
    compared = {str(a.get("label")) for a in record.get("audits") or []}
    ours = {str(a.get("label")) for a in oo.get("audits") or []}
    return oo if ours and ours <= compared else None


def _image(name: str, images: dict[str, str], caption: str = "") -> str:
    if name not in images:
        return ""
    return (f'<figure><img alt="{esc(name)}" src="data:image/png;base64,{images[name]}">'
            f"<figcaption>{esc(caption or name)}</figcaption></figure>")  # fmt: skip


def _family_section(fam: str, title: str, rows: list[dict], labels: list[str],
                    metrics: dict, images: dict[str, str], level: Any,
                    least: int) -> Section:  # fmt: skip
    names = list(dict.fromkeys(r["metric"] for r in rows))
    wide = []
    for name in names:
        cells = {r["audit"]: figure_td(r, least) for r in rows if r["metric"] == name}
        wide.append({"metric": (metrics.get(name) or {}).get("label", name),
                     **{label: cells.get(label, "\u2013") for label in labels}})  # fmt: skip
    share = f"{float(level):.0%} " if isinstance(level, (int, float)) else ""
    body = (f'<p class="note">{esc(FAMILY_NOTES.get(fam, ""))} Values with their '
            f"{esc(share)}bootstrap interval over runs where the figure is a mean over runs; "
            "\u26a0: an accuracy near or below chance.")  # fmt: skip
    if any(r.get("few_pairs") for r in rows):
        body += (f" Greyed: a figure on fewer than {least} pairs (min_group_pairs), shown as "
                 "its value and n without an interval, neither flagged nor judged.")
    body += "</p>"
    if fam == "margin":
        body += margin_direction(_by_row(rows), labels)
    body += cells_table(wide)
    details = [{"audit": r["audit"], "metric": (metrics.get(r["metric"]) or {}).get("label",
                r["metric"]), "pairs": Cell(fmt(r.get("n")), few_title(r.get("n"), least)
                                            if r.get("few_pairs") else ""),
                "detail": r.get("detail") or ""} for r in rows]  # fmt: skip
    body += ("<details><summary>What each figure rests on</summary>"
             f"{cells_table(details)}</details>")  # fmt: skip
    extra = _image("compare_cm_by_margin.png", images, "mean CM by margin tercile") if (
        fam == "margin") else ""  # fmt: skip
    body += f'<div class="images">{_image(f"compare_{fam}.png", images)}{extra}</div>'
    return Section(f"family-{fam}", title, body)


def _by_row(rows: list[dict]) -> dict[tuple[str, str], dict]:
    return {(r["audit"], r["metric"]): r for r in rows}


PAPER = "the paper's finding that high-margin pairs are memorized most"


def _span(values: list[float], form: str = ".3f") -> str:
    """``-0.150`` or ``-0.150 to -0.124``: one value, or the range of several."""
    lo, hi = min(values), max(values)
    return f"{lo:{form}}" if f"{lo:{form}}" == f"{hi:{form}}" else f"{lo:{form}} to {hi:{form}}"


def margin_direction(by: dict, labels: list[str]) -> str:
    """Which way CM goes with margin in each row, beside the paper's finding, from
    Spearman(CM, margin) and CM's low- minus high-margin tercile difference
    (``cm_margin_direction``): rows that go the same way share a sentence."""
    groups: dict[str, list[tuple[str, dict, dict]]] = {}
    for label in labels:
        s, d = by.get((label, "cm_margin_spearman")), by.get((label, "cm_margin_low_minus_high"))
        if not s or not isinstance(s.get("value"), (int, float)):
            continue
        d = d or {}
        way = "few" if s.get("few_pairs") else cm_margin_direction(
            s["value"], s.get("n"), d.get("lo"), d.get("hi"))  # fmt: skip
        if way == "unclear" and abs(s["value"]) >= direction_floor(s.get("n")):
            way = "disagree"  # a clear correlation that the terciles contradict
        groups.setdefault(way, []).append((label, s, d))
    total = sum(map(len, groups.values()))
    if not total:
        return ""
    lines = []
    for way in ("falls", "rises", "unclear", "disagree", "few"):
        rows = groups.get(way) or []
        if not rows:
            continue
        where = ("here" if len(rows) == total == 1 else "in every row here" if len(rows) == total
                 else "in " + ", ".join(label for label, _, _ in rows))  # fmt: skip
        rho = _span([s["value"] for _, s, _ in rows])
        diffs = [d["value"] for _, _, d in rows if isinstance(d.get("value"), (int, float))]
        shown = f"Spearman {rho}" + (f"; CM low \u2212 high margin {_span(diffs, '+.3f')}"
                                     if diffs else "")  # fmt: skip
        if way == "falls":
            text = (f"CM <b>falls</b> with margin {esc(where)} ({esc(shown)}): the opposite "
                    f"of {esc(PAPER)}; here the weakest preferences are.")
        elif way == "rises":
            text = (f"CM <b>rises</b> with margin {esc(where)} ({esc(shown)}), as the paper "
                    "finds: high-margin pairs are memorized most.")
        elif way == "unclear":
            floor = max(direction_floor(s.get("n")) for _, s, _ in rows)
            text = (f"<b>No clear direction</b> of CM with margin {esc(where)} ({esc(shown)}; "
                    f"|Spearman| under {floor:.2f}): neither confirms nor contradicts "
                    f"{esc(PAPER)} (CM rising with margin).")
        elif way == "disagree":
            text = (f"<b>No clear direction</b> of CM with margin {esc(where)}: the Spearman "
                    "correlation and CM's low \u2212 high margin difference point opposite "
                    f"ways ({esc(shown)}).")
        else:
            text = (f"Too few pairs to tell which way CM goes with margin {esc(where)} "
                    f"({esc(shown)}).")
        lines.append(f"<li>{text}</li>")
    return (f'<p class="note">Which way CM goes with margin (a direction needs |Spearman(CM, '
            f"margin)| of at least {NO_DIRECTION:g}, or 2/\u221a(n\u22121) over n pairs, "
            "and CM's low \u2212 high margin interval not wholly on the other side of 0):</p>"
            f"<ul>{''.join(lines)}</ul>")  # fmt: skip


def _agreement_section(rows: list[dict], images: dict[str, str]) -> Section | None:
    if not rows:
        return None
    frame = pd.DataFrame(rows)
    frame["audits"] = frame.audit_a.astype(str) + " vs " + frame.audit_b.astype(str)
    frame["score"] = frame.score.str.upper()
    frame["above_ceiling"] = frame.above_ceiling.map(lambda x: "\u26a0 above" if x else "")
    shown = frame[["audits", "score", "spearman", "ceiling", "reliability_a", "reliability_b",
                   "n", "above_ceiling"]]  # fmt: skip
    body = (
        '<p class="note">Spearman correlation of each score across the pairs two audits share, '
        "beside each audit's split-half reliability (Spearman-Brown) and the ceiling "
        "sqrt(reliability_a \u00d7 reliability_b): two audits cannot agree more than their "
        "own run-to-run noise allows. Far below the ceiling: the audits differ; near it: they "
        "agree as much as the noise permits; above it: shared noise (same plan and seed) or "
        "underestimated reliabilities.</p>"
    )
    body += table(shown, headers={"reliability_a": "reliability a", "reliability_b":
                                  "reliability b", "above_ceiling": ""})  # fmt: skip
    body += f'<div class="images">{_image("compare_agreement.png", images)}</div>'
    return Section("agreement", "Agreement between audits", body)


def _details_section(details: dict) -> Section | None:
    rows = []
    for label, worst in (details.get("worst_group") or {}).items():
        rows.append({"audit": label, "what": "worst group",
                     "detail": f"{worst.get('group')} ({worst.get('qualified')} of "
                               f"{worst.get('groups')} groups of '{worst.get('column')}' with "
                               f">= {worst.get('min_group_pairs')} held-out pairs)"})
    for label, slices in (details.get("slices") or {}).items():
        for name, text in slices.items():
            rows.append({"audit": label, "what": f"slice {name}", "detail": text})
    for label, bounds in (details.get("margin_terciles") or {}).items():
        text = "; ".join(f"{k}: {fmt(b[0])} to {fmt(b[1])}" for k, b in zip(("low", "mid",
                                                                             "high"), bounds))
        rows.append({"audit": label, "what": "margin terciles", "detail": text})
    for label, fits in (details.get("shap") or {}).items():
        for fit in fits:
            rows.append({"audit": label, "what": f"SHAP fit of {str(fit.get('target')).upper()}",
                         "detail": f"held-out R^2 {fmt(fit.get('r2'))}; shortcut features "
                                   f"{', '.join(map(str, fit.get('top') or [])) or 'none'}"})
    if not rows:
        return None
    return Section("details", "Details", table(pd.DataFrame(rows)))


def render_compare_page(record: dict[str, Any], images: dict[str, str],
                        oo: dict | None = None) -> str:  # fmt: skip
    """The whole page as a string, from ``compare.json``'s content, base64 PNGs and
    ``overoptimization.json``'s content (None: no best-of-n section).

    The first screen answers: which audit wins where, at what cost in held-out accuracy (and
    gold under best-of-n), then the flagged figures as one table of audits by figure."""
    audits = record.get("audits") or []
    labels = [str(a.get("label")) for a in audits]
    figures = marked(record)
    metrics = record.get("metrics") or {}
    least = min_pairs(record)
    sections = [s for s in (glance_section(record, oo), flags_section(record)) if s]
    flags = set(record.get("flags") or [])
    if "flags" not in record:  # a compare.json of rmlens 0.1 before flags had their own key
        flags = {str(w) for w in record.get("warnings") or [] if "near or below chance" in str(w)
                 or "of chance:" in str(w)}  # fmt: skip
    warnings = "".join(warning_box(str(w)) for w in record.get("warnings") or []
                       if str(w) not in flags)  # fmt: skip
    if warnings:
        sections.append(Section("warnings", "Warnings", warnings))
    if audits:
        cols = ["label", "model", "mode", "head", "objective", "plan", "seed", "runs",
                "n_pairs", "group_by", "data_sha1", "reference", "path"]  # fmt: skip
        frame = pd.DataFrame(audits).reindex(columns=cols)
        sections.append(Section("audits", "Audits", table(frame)))
    for fam, title in FAMILIES.items():
        rows = [r for r in figures if r.get("family") == fam]
        if rows:
            level = (record.get("config") or {}).get("level")
            sections.append(_family_section(fam, title, rows, labels, metrics, images, level,
                                            least))  # fmt: skip
    if oo is not None:
        sections.append(overoptimization_section(oo, lambda n, c: _image(n, images, c)))
    for extra in (_agreement_section(record.get("agreement") or [], images),
                  _details_section(record.get("details") or {})):  # fmt: skip
        if extra is not None:
            sections.append(extra)
    notes = "".join(f"<li>{esc(n)}</li>" for n in record.get("notes") or [])
    if notes:
        sections.append(Section("notes", "Notes", f"<ul>{notes}</ul>"))
    sections.append(Section("config", "Configuration", key_value_table(
        {"rmlens": record.get("version"), **(record.get("config") or {})})))  # fmt: skip
    nav = "".join(f'<a href="#{esc(s.id)}">{esc(s.title)}</a>' for s in sections)
    title = " vs ".join(labels) if len(labels) <= 4 else f"{len(labels)} audits"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>rmlens comparison: {esc(title)}</title><style>{CSS}{FEW_CSS}</style></head><body>"
        f'<header><h1>rmlens comparison</h1><div class="sub">{esc(title)} \u00b7 '
        f"{len(audits)} rows \u00b7 rmlens {esc(__version__)}</div><nav>{nav}</nav></header>"
        f"<main>{''.join(s.html() for s in sections)}</main>"
        "<footer>Written by rmlens. Tables beside this page: "
        '<a href="compare.parquet">compare.parquet</a> \u00b7 '
        '<a href="compare.json">compare.json</a></footer></body></html>\n'
    )
