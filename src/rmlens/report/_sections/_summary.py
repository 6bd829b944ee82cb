"""The dataset summary: cards, breakdowns and the audit outcome of summary.json."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rmlens.rewards.objectives import REGISTRY, Objective

from .._html import card, esc, fmt, prose, readable_rows, snippet, table, warning_box
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
    "memorized_conflicts", "estimator_note", "exactness", "damping", "thresholds",
    "n_runs_finished", "n_runs_planned", "complete", "failed_runs", "n_pairs",
    "pairs_lacking_runs", "dropped_truncation", "mean", "objective", "estimator",
    "target_reliability", "dedupe", "shortcut",
)  # fmt: skip
_ESTIMATORS = {
    "paired": "paired (each run scores every pair with its group in and out)",
    "brute": "brute force (in-runs against out-runs)",
}


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
    significant = summary.get("cm_significant")
    if isinstance(significant, dict) and "count" in significant:
        level = (summary.get("intervals") or {}).get("level", 0.95)
        level = f"{level:.0%}" if isinstance(level, (int, float)) else "95%"
        html += (
            f'<p class="note">CM significantly above 0 ({level} interval above 0): '
            f"{esc(_count(significant['count']))}"
            + (f" of {esc(_count(summary['n_pairs']))}" if "n_pairs" in summary else "")
            + " pairs."
            + (f" {prose(significant['note'][0].upper() + significant['note'][1:])}."
               if significant.get("note") else "")
            + "</p>"
        )  # fmt: skip
    rows = _outcome_rows(summary) + readable_rows(rest, "summary.json")
    if rows:
        html += table(pd.DataFrame(rows, columns=["outcome", "value"]), classes="kv")
    html += _duplicates_block(summary.get("duplicates"), summary.get("memorized_conflicts"))
    return html


def _count(value: Any) -> str:
    """A count as an integer with thousands separators (an en dash when missing)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return "\u2013"
    return f"{int(value):,}" if float(value).is_integer() else fmt(value)


def _outcome_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The audit's outcome in labelled rows: runs, pairs, pairs without runs, pairs dropped,
    mean scores, objective, estimator, target reliability."""
    rows: list[tuple[str, str]] = []
    done, planned = summary.get("n_runs_finished"), summary.get("n_runs_planned")
    if done is not None or planned is not None:
        text = f"{_count(done)} of {_count(planned)}"
        failed = [f for f in summary.get("failed_runs") or [] if isinstance(f, dict)]
        if failed:
            listed = "; ".join(f"run {f.get('run')}: {snippet(f.get('error', ''), 120)}"
                               for f in failed[:10])  # fmt: skip
            more = f"; and {len(failed) - 10} more" if len(failed) > 10 else ""
            text += f" ({len(failed)} failed: {listed}{more})"
        rows.append(("runs finished", text))
    if "n_pairs" in summary:
        rows.append(("pairs", _count(summary["n_pairs"])))
    lacking = summary.get("pairs_lacking_runs")
    if isinstance(lacking, dict) and "count" in lacking:
        text = _count(lacking["count"])
        if lacking["count"]:
            text += (
                f" ({_count(lacking.get('no_in_run'))} with no in-run, "
                f"{_count(lacking.get('no_out_run'))} with no out-run: no TM, TG or CM)"
            )
        rows.append(("pairs lacking an in- or out-run", text))  # fmt: skip
    dropped = summary.get("dropped_truncation")
    if isinstance(dropped, dict) and "count" in dropped:
        text = _count(dropped["count"])
        if dropped["count"]:
            text += (" (chosen and rejected the same tokens as the model reads them: cut "
                     "to the length, or different only where the tokenizer does not look; "
                     "not audited)")  # fmt: skip
        rows.append(("pairs dropped as the same tokens", text))
    mean = summary.get("mean")
    if isinstance(mean, dict) and mean:
        rows.append(("mean TM / TG / CM",
                     " / ".join(fmt(mean.get(k)) for k in ("tm", "tg", "cm"))))  # fmt: skip
    objective = summary.get("objective")
    if isinstance(objective, dict) and objective.get("objective") is not None:
        name = objective["objective"]
        name = ", ".join(map(str, name)) if isinstance(name, list) else str(name)
        idle = objective.get("runs_inactive") or []
        n_runs = objective.get("n_runs")
        if idle:
            name += f" (its mechanism inactive in {len(idle)} of {_count(n_runs)} runs)"
        elif not REGISTRY.get(name, Objective).plain:
            name += " (its mechanism acted in every run)"
        rows.append(("objective", name))
    dedupe = summary.get("dedupe")
    if isinstance(dedupe, dict) and dedupe.get("how", "none") != "none":
        rows.append((f"dedupe ({dedupe['how']})", str(dedupe.get("note", ""))))
    if summary.get("estimator"):
        estimator = str(summary["estimator"])
        rows.append(("estimator", _ESTIMATORS.get(estimator, estimator)))
    target = summary.get("target_reliability")
    if isinstance(target, dict) and target.get("message"):
        rows.append(("target reliability", str(target["message"])))
    if not isinstance(summary.get("category_rules"), dict):
        limits = summary.get("thresholds")
        if isinstance(limits, dict):
            rows.extend(readable_rows({"thresholds": limits}, "summary.json"))
    return rows


def _duplicates_block(dup: Any, conflicts: Any) -> str:
    """Repeated texts and pairs, and conflicting pairs, across the audit's groups, as a
    readable table; how many memorized pairs are conflicts."""
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
    if dup["pairs_repeated_across_groups"]:
        html += (
            '<p class="note">A held-out pair may have been seen through another group\'s copy: '
            "TG is optimistic for the repeated pairs.</p>"
        )
    if isinstance(conflicts, dict) and conflicts.get("count"):
        html += (
            f'<p class="note">{esc(fmt(conflicts["count"]))} of '
            f"{esc(fmt(conflicts['memorized']))} memorized pairs ({conflicts['share']:.0%}) "
            "were judged the other way by another group: memorized because the groups "
            "disagree.</p>"
        )
    return html


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
