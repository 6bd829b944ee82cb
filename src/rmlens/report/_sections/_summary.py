"""The dataset summary: cards, breakdowns and the audit outcome of summary.json."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rmlens.memorization import AuditSentences, audit_sentences

from .._html import card, esc, fmt, note, readable_rows, table, warning_box
from ._base import Section


def summary_section(
    mem: pd.DataFrame,
    config: dict[str, Any] | None,
    plan: pd.DataFrame | None,
    summary: dict[str, Any] | None,
) -> Section:
    """Dataset and audit summary: pairs, groups, users, models, margin, runs, outcomes."""
    cards = _cards(mem, config, plan)
    cm = pd.to_numeric(mem["cm"], errors="coerce")
    n_missing = int(cm.isna().sum())
    body = f'<div class="cards">{"".join(cards)}</div>'
    if n_missing:
        verb = "pair has" if n_missing == 1 else "pairs have"
        body += warning_box(
            f"{n_missing:,} {verb} no estimate (never in or never out of a training set: "
            "n_in = 0 or n_out = 0); not on the map, but listed in memorization.csv."
        )
    blocks = []
    for column in ("mechanism", "chosen_model", "user_id"):
        if column in mem.columns and 1 < mem[column].nunique() <= 20:
            blocks.append(f"<div><h3>By {esc(column)}</h3>{_breakdown(mem, column)}</div>")
    if summary:
        blocks.append(f"<div><h3>Audit outcome</h3>{_summary_block(summary)}</div>")
    if blocks:
        body += f'<div class="grid">{"".join(blocks)}</div>'
    return Section("summary", "Dataset summary", body)


def _cards(
    mem: pd.DataFrame, config: dict[str, Any] | None, plan: pd.DataFrame | None
) -> list[str]:
    """The summary's cards: pairs, groups, users, models, margin, runs, mean CM."""
    n = len(mem)
    cards = [card("pairs", f"{n:,}")]
    if "group" in mem.columns:
        group_by = (config or {}).get("group_by")
        note = f"grouped by {group_by}" if group_by else ""
        cards.append(card("groups", f"{mem['group'].nunique():,}", note))
    if "user_id" in mem.columns:
        cards.append(card("users", f"{mem['user_id'].nunique():,}"))
    models = sorted(
        {
            str(v)
            for c in ("chosen_model", "rejected_model")
            if c in mem.columns
            for v in mem[c].dropna().unique()
        }
    )
    if models:
        shown = ", ".join(models[:8]) + (f" and {len(models) - 8} more" if len(models) > 8 else "")
        cards.append(card("models", f"{len(models):,}", shown))
    if "margin" in mem.columns:
        margin = pd.to_numeric(mem["margin"], errors="coerce").dropna()
        if len(margin):
            cards.append(
                card(
                    "margin (mean)",
                    fmt(float(margin.mean())),
                    f"median {fmt(float(margin.median()))}, range "
                    f"{fmt(float(margin.min()))} to {fmt(float(margin.max()))}",
                )
            )
    if plan is not None and {"run", "in_train"} <= set(plan.columns):
        share = float(pd.to_numeric(plan["in_train"], errors="coerce").mean())
        cards.append(card("runs", f"{plan['run'].nunique():,}", f"{share:.0%} of groups in train"))
    if {"n_in", "n_out"} <= set(mem.columns):
        cards.append(
            card(
                "runs per pair (in / out)",
                f"{fmt(float(mem['n_in'].median()), 0)} / {fmt(float(mem['n_out'].median()), 0)}",
                "median",
            )
        )
    cm = pd.to_numeric(mem["cm"], errors="coerce")
    cards.append(card("mean CM", fmt(float(cm.mean())) if cm.notna().any() else "\u2013"))
    return cards


# summary.json entries shown elsewhere (the quality section, the pair tables), as the counts
# table, or as a row of the outcome table
_SHOWN_APART = (
    "counts", "most_memorized", "rm_quality", "warnings", "validation", "intervals",
    "category_rules", "category_order", "cm_significant", "reliability",
    "most_memorized_rule", "most_memorized_note", "largest_cm_not_memorized", "duplicates",
    "links", "memorized_conflicts", "estimator_note", "exactness", "damping", "thresholds",
    "n_runs_finished", "n_runs_planned", "complete", "failed_runs", "n_pairs",
    "pairs_lacking_runs", "dropped_truncation", "mean", "objective", "estimator",
    "target_reliability", "dedupe", "shortcut", "format", "truncation", "checkpoint",
    "mode_note",
)  # fmt: skip


def _summary_block(summary: dict[str, Any]) -> str:
    """Category counts with their rules, CM's significance, the outcome as labelled rows
    (entries it does not know by their humanised keys) and the duplicates across groups."""
    html = ""
    rest = {k: v for k, v in summary.items() if k not in _SHOWN_APART}
    counts = summary.get("counts")
    order = summary.get("category_order")
    if isinstance(counts, dict) and isinstance(order, list):
        counts = {c: counts.get(c, 0) for c in order}  # in the order the rules apply
    if isinstance(counts, dict) and counts:
        total = sum(v for v in counts.values() if isinstance(v, (int, float))) or 1
        frame = pd.DataFrame(
            {
                "category": [str(k).replace("_", " ") for k in counts],
                "pairs": [v for v in counts.values()],
                "share": [
                    f"{v / total:.1%}" if isinstance(v, (int, float)) else ""
                    for v in counts.values()
                ],
            }
        )
        rules = summary.get("category_rules")
        if isinstance(rules, dict):
            frame["rule (first that holds)"] = [rules.get(str(k), "") for k in counts]
        html += table(frame)
    said = audit_sentences(summary)
    html += "".join(note(s) for s in (said.significant, *said.links) if s)
    rows = [*said.outcome.values(), *_thresholds_rows(summary)]
    rows += readable_rows(rest, "summary.json")
    if rows:
        html += table(pd.DataFrame(rows, columns=["outcome", "value"]), classes="kv")
    html += _duplicates_block(summary.get("duplicates"), said)
    return html


def _thresholds_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The thresholds as rows, for a summary.json older than its category rules."""
    limits = summary.get("thresholds")
    if isinstance(summary.get("category_rules"), dict) or not isinstance(limits, dict):
        return []
    return readable_rows({"thresholds": limits}, "summary.json")


def _duplicates_block(dup: Any, said: AuditSentences) -> str:
    """Repeated texts and pairs, and conflicting pairs, across the audit's groups, as a
    readable table; what repeats do to TG and how many memorized pairs are conflicts."""
    if not isinstance(dup, dict) or "texts" not in dup:
        return ""
    texts, n = dup["texts"], dup["unique_pairs"] + dup["repeated_pairs"]
    shared = dup["pairs_sharing_text_across_groups"]
    rows = [
        ("unique responses (with their prompt)", f"{texts['unique']:,} of {texts['responses']:,}"),
        ("responses under several groups", f"{texts['in_several_groups']:,}"),
        ("pairs sharing a response with another group", f"{shared:,} of {n:,}"),
        ("repeated pairs (prompt, chosen, rejected)",
         f"{dup['repeated_pairs']:,} ({dup['unique_pairs']:,} unique)"),
        ("pairs repeated across groups", f"{dup['pairs_repeated_across_groups']:,}"),
        ("pairs judged the other way elsewhere", f"{dup['conflicting_pairs']:,}"),
        ("of them by another group (conflict)", f"{dup['conflicts_across_groups']:,}"),
    ]  # fmt: skip
    frame = pd.DataFrame(rows, columns=["across groups", "count"])
    html = (
        f"<h3>Duplicates and conflicts across groups ({esc(dup['group_by'])}, "
        f"{esc(fmt(dup['groups']))} groups)</h3>" + table(frame)
    )
    return html + "".join(note(s) for s in (said.duplicates, said.conflicts) if s)


def _breakdown(mem: pd.DataFrame, column: str) -> str:
    keys = mem[column].astype(str).where(mem[column].notna(), "(missing)")
    stats = mem.assign(_key=keys.to_numpy()).groupby("_key", sort=True)
    frame = pd.DataFrame(
        {
            column: list(stats.groups.keys()),
            "pairs": stats.size().to_numpy(),
            "mean TM": stats["tm"].mean().to_numpy(),
            "mean TG": stats["tg"].mean().to_numpy(),
            "mean CM": stats["cm"].mean().to_numpy(),
        }
    )
    return table(frame.sort_values("mean CM", ascending=False))
