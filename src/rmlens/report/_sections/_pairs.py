"""The tables of the most memorized and least generalized pairs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rmlens.memorization import WITHHELD, categorize, memorized_note

from .._html import fmt, prose, snippet, table
from ._base import Section

OTHERS_SHOWN = 10  # rows of the "largest CM among the other pairs" table, at most


def _est(value: Any) -> str:
    value = float(value) if value is not None else float("nan")
    return f"{value:.3f}" if np.isfinite(value) else "n/a"


def pair_table_section(
    mem: pd.DataFrame,
    positions: dict[int, int],
    *,
    section_id: str,
    title: str,
    by: str,
    ascending: bool,
    top_k: int,
    note: str,
) -> Section:
    """Top pairs by one estimate; rows that are on the map open their details on click.

    A table of the highest CM lists the pairs categorized ``memorized`` only (``category``,
    or the default rules when the table has none: the category rules come first, so a
    high-CM pair with TM < 0.5 is ``not_learned``, never listed as memorized); a second
    table, labelled as such, gives the largest CM among the other pairs. Where some pairs have
    ``conflict`` (another group judged them the other way), that column is shown.
    """
    values = pd.to_numeric(mem[by], errors="coerce").dropna()
    if by != "cm" or ascending:
        order = values.sort_values(ascending=ascending, kind="stable").index[:top_k]
        body = f'<p class="note">{prose(note)}</p>' + _pairs_table(mem, positions, order)
        return Section(section_id, title, body)
    category = mem["category"] if "category" in mem.columns else categorize(mem)
    ranked = values.sort_values(ascending=False, kind="stable")
    memorized = (category == "memorized").loc[ranked.index].to_numpy(bool)
    order = ranked.index[memorized]
    shown = order[:top_k]
    lead = (
        "Pairs categorized memorized (the category rules apply first: a pair with TM < 0.5 "
        "is not learned, whatever its CM), highest CM first."
    )
    withheld = bool((category == WITHHELD).any())
    if withheld:  # the RM did not learn, or CM's size is not calibrated: the warnings say
        lead = ("No pair has a category: they are withheld, for the reason the warnings "
                "above give; the pairs of largest CM are listed below without a verdict.")
    elif len(order) < top_k:
        lead += f" {memorized_note(len(order)).capitalize()}."
    lead += f" {note}"
    conflicts = "conflict" in mem.columns and any(_yes_no(v) == "yes" for v in mem["conflict"])
    if conflicts:
        n_conflict = sum(_yes_no(v) == "yes" for v in mem.loc[order, "conflict"])
        lead += (
            f" Conflict: another group judged the pair's prompt and responses the other way; "
            f"{n_conflict} of {len(order)} memorized pairs are such conflicts (memorized "
            "because the groups disagree)."
        )
    body = f'<p class="note">{prose(lead)}</p>'
    if len(shown):
        body += _pairs_table(mem, positions, shown, conflict=conflicts)
    rest = ranked.index[~memorized][: min(top_k, OTHERS_SHOWN)]
    if len(rest):
        heading = ("Largest CM (categories withheld)" if withheld
                   else "Largest CM among pairs not categorized memorized")  # fmt: skip
        body += (
            f"<h3>{heading}</h3>"
            '<p class="note">Listed for comparison, with the category each pair has.</p>'
            + _pairs_table(mem, positions, rest, category=category, conflict=conflicts)
        )
    return Section(section_id, title, body)


def _runs(value: Any) -> str:
    """A run count as an integer, also when the table stored it as a float."""
    number = pd.to_numeric(value, errors="coerce")
    if pd.isna(number) or not float(number).is_integer():
        return fmt(value)
    return f"{int(number):,}"


def _yes_no(value: Any) -> str:
    if value is None or pd.isna(value):
        return "\u2013"
    return "yes" if bool(value) else "no"


def _pairs_table(
    mem: pd.DataFrame,
    positions: dict[int, int],
    order: pd.Index,
    *,
    category: pd.Series | None = None,
    conflict: bool = False,
) -> str:
    """The pairs of ``order`` (index labels of ``mem``): estimates with intervals, runs,
    group, category (when given), conflict (when asked) and text."""
    rows = [mem.index.get_loc(i) for i in order]
    part = mem.iloc[rows]
    frame = pd.DataFrame({"#": np.arange(1, len(rows) + 1), "id": part["id"].astype(str)})
    for name in ("cm", "tm", "tg"):
        lo, hi = f"{name}_lo", f"{name}_hi"
        if lo in part.columns and hi in part.columns:
            frame[name.upper()] = [
                f"{_est(v)}\n[{_est(a)}, {_est(b)}]"
                for v, a, b in zip(part[name], part[lo], part[hi])
            ]
        else:
            frame[name.upper()] = [_est(v) for v in part[name]]
    if category is not None:
        frame["category"] = [str(c).replace("_", " ") for c in category.loc[order]]
    if conflict:
        frame["conflict"] = [_yes_no(v) for v in part["conflict"]]
    if {"n_in", "n_out"} <= set(part.columns):
        frame["in / out"] = [f"{_runs(a)} / {_runs(b)}" for a, b in zip(part.n_in, part.n_out)]
    if "group" in part.columns:
        frame["group"] = [snippet(v, 30) for v in part["group"]]
    for column in ("prompt", "chosen", "rejected"):
        if column in part.columns:
            frame[column] = [snippet(v, 160) for v in part[column]]
    attrs = [
        {"data-point": str(positions[r]), "tabindex": "0", "title": "show details"}
        if r in positions
        else {}
        for r in rows
    ]
    classes = {
        "#": "nowrap",
        "id": "id",
        "CM": "est",
        "TM": "est",
        "TG": "est",
        "category": "category",
        "conflict": "nowrap",
        "in / out": "nowrap",
        "group": "nowrap",
        "prompt": "text",
        "chosen": "text",
        "rejected": "text",
    }
    return table(frame, row_attrs=attrs, classes="pairs", cell_classes=classes)
