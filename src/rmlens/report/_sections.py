"""Report sections other than the map: each returns escaped HTML plus Plotly specs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rmlens.memorization._damping import damping_sentence

from ._html import (
    card,
    clean,
    esc,
    figure_div,
    fmt,
    key_value_table,
    num_list,
    plotly_text,
    snippet,
    table,
    warning_box,
)


@dataclass
class Section:
    """One ``<section>`` of the page: anchor id, heading, body HTML and its figures."""

    id: str
    title: str
    body: str
    figures: list[dict[str, Any]] = field(default_factory=list)

    def html(self) -> str:
        return f'<section id="{esc(self.id)}"><h2>{esc(self.title)}</h2>{self.body}</section>'


_TARGET_ORDER = {"tm": 0, "tg": 1, "cm": 2}
_TARGET_COLORS = {"tm": "#3b6fb6", "tg": "#2e9e5b", "cm": "#c8433a"}


def _bar_layout(height: int, **extra: Any) -> dict[str, Any]:
    return {
        "height": height,
        "margin": {"l": 60, "r": 20, "t": 60, "b": 40},
        "plot_bgcolor": "white",
        "legend": {"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0},
        **extra,
    }


def summary_section(
    mem: pd.DataFrame,
    config: dict[str, Any] | None,
    plan: pd.DataFrame | None,
    summary: dict[str, Any] | None,
) -> Section:
    """Dataset and audit summary: pairs, groups, users, models, margin, runs, outcomes."""
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
        blocks.append(f"<div><h3>Audit outcome (summary.json)</h3>{_summary_block(summary)}</div>")
    if blocks:
        body += f'<div class="grid">{"".join(blocks)}</div>'
    return Section("summary", "Dataset summary", body)


# summary.json entries shown elsewhere (the quality section) or as the counts table
_SHOWN_APART = (
    "counts", "most_memorized", "rm_quality", "warnings", "validation", "intervals",
    "category_rules", "category_order", "cm_significant", "reliability",
)  # fmt: skip


def _summary_block(summary: dict[str, Any]) -> str:
    """Category counts as a table (with the thresholds), the other scalar entries below."""
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
        html += (
            f'<p class="note">CM significantly above 0 (95% interval above 0): '
            f"{esc(fmt(significant['count']))} pairs."
            + (f" {esc(significant['note'][0].upper() + significant['note'][1:])}."
               if significant.get("note") else "")
            + "</p>"
        )  # fmt: skip
    if rest:
        html += key_value_table(rest)
    return html


_SPLIT_NAMES = {
    "in_train": "trained on (in)",
    "validation": "validation (neither in nor out)",
    "held_out": "held out (out)",
}


def quality_line(summary: dict[str, Any] | None) -> str:
    """One sentence on the RMs' accuracy, for beside the map ('' without rm_quality)."""
    quality = (summary or {}).get("rm_quality")
    if not isinstance(quality, dict):
        return ""
    try:
        fit = quality["in_train"]["accuracy"]["mean"]
        held = quality["held_out"]["accuracy"]["mean"]
    except (KeyError, TypeError):
        return ""
    return (
        f" The reward models reach accuracy {fmt(fit)} on the pairs they trained on and "
        f"{fmt(held)} on the pairs they held out (chance 0.5)."
    )


def quality_section(summary: dict[str, Any] | None) -> Section | None:
    """The RMs' quality (summary.json ``rm_quality``), training regime and warnings."""
    if not isinstance(summary, dict):
        return None
    quality = summary.get("rm_quality")
    warnings = summary.get("warnings") or []
    if not isinstance(quality, dict) and not warnings:
        return None
    body = "".join(
        warning_box(str(w.get("message", w)) if isinstance(w, dict) else str(w))
        for w in warnings
    )
    body += (
        '<p class="note">How well the audited reward models fit the pairs they trained on '
        "and how well they do on pairs they never saw: accuracy (a tie counts 1/2) and "
        "log-loss, mean ± std over runs. TM averages the first kind of run, TG the "
        "second; with held-out accuracy near chance (0.5), CM mostly measures fitting.</p>"
    )
    if isinstance(quality, dict):
        rows = []
        for split, name in _SPLIT_NAMES.items():
            part = quality.get(split)
            if not isinstance(part, dict):
                continue
            cells = {}
            for metric, label in (("accuracy", "accuracy"), ("log_loss", "log-loss")):
                value = part.get(metric) or {}
                cells[label] = f"{fmt(value.get('mean'))} ± {fmt(value.get('std'))}"
            rows.append({"pairs": name, **cells})
        if rows:
            body += table(pd.DataFrame(rows), caption="chance: accuracy 0.5, log-loss 0.693")
    body += _estimator_block(summary)
    body += _reliability_block(summary.get("reliability"))
    validation = summary.get("validation")
    if isinstance(validation, dict):
        lam = validation.get("l2")
        if isinstance(lam, dict):
            body += (
                '<p class="note">Training regime: the logistic head (linear Bradley-Terry '
                "with an L2 penalty) solved to its optimum per run; lambda chosen per run on "
                f"validation pairs, {esc(_number(validation.get('fraction')))} of each run's "
                f"training groups: from {esc(_number(lam.get('min')))} to "
                f"{esc(_number(lam.get('max')))} (median {esc(_number(lam.get('median')))})."
                "</p>"
            )
        elif validation.get("used"):
            best = validation.get("best_epoch") or {}
            epochs = (
                f" Best epochs ranged from {fmt(best.get('min'))} to {fmt(best.get('max'))} "
                f"(median {fmt(best.get('median'), 0)})."
                if best
                else ""
            )
            share = validation.get("fraction")
            body += (
                f'<p class="note">Training regime: early stopping with patience '
                f"{esc(fmt(validation.get('patience')))} on validation pairs, "
                f"{esc(f'{share:g}' if share is not None else '?')} of each run's training "
                "groups; the "
                f"best epoch's weights are kept.{esc(epochs)}</p>"
            )
        if validation.get("membership"):
            body += f'<p class="note">{esc(validation["membership"])}</p>'
    intervals = summary.get("intervals")
    if isinstance(intervals, dict) and isinstance(intervals.get("nan"), dict):
        nan = intervals["nan"]
        body += (
            f'<p class="note">Intervals: {esc(str(intervals.get("method", "bootstrap")))}; '
            f"NaN for {esc(fmt(nan.get('cm')))} pairs' CM ({esc(fmt(nan.get('tm')))} TM, "
            f"{esc(fmt(nan.get('tg')))} TG): {esc(str(intervals.get('why_nan', '')))}.</p>"
        )
    return Section("quality", "Reward models", body)


def _number(value: Any) -> str:
    """A penalty such as 300 or 0.3 as written, without padded decimals."""
    return f"{value:g}" if isinstance(value, (int, float)) else fmt(value)


def _estimator_block(summary: dict[str, Any]) -> str:
    """Which estimator made TM, TG and CM, why, and how exact its counterfactuals are."""
    name = summary.get("estimator")
    if not name:
        return ""
    html = f'<p class="note">Estimator: {esc(str(summary.get("estimator_note") or name))}.</p>'
    exact = summary.get("exactness")
    if isinstance(exact, dict):
        html += (
            '<p class="note">Exactness of the paired counterfactuals against exact refits of '
            f"{esc(fmt(exact.get('groups')))} groups ({esc(fmt(exact.get('pairs')))} pairs): "
            f"|p_cf − p_refit| median {esc(fmt(exact.get('median_abs_error'), 5))}, 90th "
            f"percentile {esc(fmt(exact.get('p90_abs_error'), 5))}, max "
            f"{esc(fmt(exact.get('max_abs_error'), 5))}, against true effects of median "
            f"{esc(fmt(exact.get('median_abs_effect'), 4))}; Spearman of the effects "
            f"{esc(fmt(exact.get('effect_spearman'), 4))}.</p>"
        )
    damping = summary.get("damping")
    if isinstance(damping, dict) and "damping" in damping:
        html += f'<p class="note">{esc(damping_sentence(damping))}.</p>'
    return html


def _reliability_block(reliability: Any) -> str:
    """Split-half reliability of TM, TG, CM (summary.json ``reliability``) as a table."""
    if not isinstance(reliability, dict):
        return ""
    html = (
        '<p class="note">Reliability of the ranking of pairs: the whole repeats of the plan '
        "split into two halves, each score estimated from each half, Spearman correlation "
        "across pairs (mean ± std over splits), Spearman-Brown corrected to the "
        f"{esc(fmt(reliability.get('n_runs')))} runs used; the runs that 0.8 would need "
        "come from the Spearman-Brown prophecy formula.</p>"
    )
    rows = []
    for score in ("tm", "tg", "cm"):
        part = reliability.get(score)
        if not isinstance(part, dict):
            continue
        rows.append(
            {
                "score": score.upper(),
                "split-half": (
                    f"{fmt(part.get('split_half'), 2)} ± {fmt(part.get('split_half_std'), 2)}"
                ),
                "Spearman-Brown": (
                    f"{fmt(part.get('spearman_brown'), 2)} ± "
                    f"{fmt(part.get('spearman_brown_std'), 2)}"
                ),
                "runs for 0.8": fmt(part.get("runs_for_0_8")),
            }
        )
    if rows:
        html += table(pd.DataFrame(rows), caption="below 0.7: the ranking is not yet reliable")
    for key in ("reason", "note"):
        if reliability.get(key):
            html += f'<p class="note">{esc(str(reliability[key]))}</p>'
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
    """Top pairs by one estimate; rows that are on the map open their details on click."""
    values = pd.to_numeric(mem[by], errors="coerce")
    order = values.dropna().sort_values(ascending=ascending, kind="stable").index[:top_k]
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
    if {"n_in", "n_out"} <= set(part.columns):
        frame["in / out"] = [f"{fmt(a)} / {fmt(b)}" for a, b in zip(part.n_in, part.n_out)]
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
        "in / out": "nowrap",
        "group": "nowrap",
        "prompt": "text",
        "chosen": "text",
        "rejected": "text",
    }
    body = f'<p class="note">{esc(note)}</p>' + table(
        frame, row_attrs=attrs, classes="pairs", cell_classes=classes
    )
    return Section(section_id, title, body)


def attribution_section(imp: pd.DataFrame | None, fit: pd.DataFrame | None) -> Section | None:
    """Feature importance bars per regressor and target, with held-out R^2."""
    if imp is None and fit is None:
        return None
    body = (
        '<p class="note">Which pair features explain TM, TG and CM. A feature much more '
        "important for TM than for TG is one the reward models use to memorize rather than "
        "to generalize.</p>"
    )
    figures: list[dict[str, Any]] = []
    if fit is not None:
        shown = [c for c in fit.columns if c not in _STABILITY_COLUMNS]
        body += "<h3>Held-out R\u00b2</h3>" + table(fit[shown])
        body += _stability_block(fit)
    if imp is not None:
        r2 = {}
        if fit is not None and {"target", "regressor", "r2"} <= set(fit.columns):
            r2 = {(str(t), str(g)): v for t, g, v in zip(fit.target, fit.regressor, fit.r2)}
        for k, (regressor, part) in enumerate(imp.groupby("regressor", sort=True)):
            pivot = part.pivot_table(
                index="feature", columns="target", values="importance", aggfunc="mean"
            )
            top = pivot.abs().max(axis=1).sort_values(ascending=False).index[:20]
            pivot = pivot.loc[top[::-1]]
            targets = sorted(pivot.columns, key=lambda t: _TARGET_ORDER.get(str(t).lower(), 9))
            data = []
            for target in targets[::-1]:
                score = r2.get((str(target), str(regressor)))
                name = str(target).upper()
                if score is not None:
                    name += f" (R\u00b2 {fmt(score)})"
                data.append(
                    {
                        "type": "bar",
                        "orientation": "h",
                        "name": plotly_text(name),
                        "marker": {"color": _TARGET_COLORS.get(str(target).lower(), "#7b8db3")},
                        "y": [plotly_text(f) for f in pivot.index],
                        "x": num_list(pivot[target]),
                        "hovertemplate": "%{y}: %{x:.4f}<extra>" + plotly_text(name) + "</extra>",
                    }
                )
            height = 120 + 22 * len(pivot) * max(1, len(pivot.columns)) // 2
            layout = _bar_layout(
                height,
                barmode="group",
                title={"text": f"regressor: {plotly_text(regressor)}", "x": 0.01, "y": 0.98},
                legend={
                    "orientation": "h",
                    "y": 1.0,
                    "yanchor": "bottom",
                    "x": 0,
                    "traceorder": "reversed",
                },
                xaxis={"title": {"text": "importance"}, "gridcolor": "#eee"},
                yaxis={"automargin": True},
            )
            div = f"attribution-{k}"
            body += figure_div(div, height)
            figures.append({"id": div, "figure": {"data": data, "layout": layout}})
    return Section("attribution", "Attribution", body, figures)


_STABILITY_COLUMNS = (
    "rank_spearman",
    "top10_overlap",
    "top10_half1",
    "top10_half2",
    "rank_spearman_noise",
    "top10_overlap_noise",
    "stability_note",
)


def _stability_block(fit: pd.DataFrame) -> str:
    """How stable the feature ranking is between two halves of the runs (the stability
    columns of attribution_fit.parquet), with the plain warnings."""
    if not {"rank_spearman", "top10_overlap"} <= set(fit.columns):
        return ""
    from rmlens.attribution._stability import stability_warnings

    def listed(value: Any) -> str:
        return ", ".join(map(str, value)) if isinstance(value, (list, tuple, np.ndarray)) else ""

    def versus(row: Any, key: str, digits: int) -> str:
        noise = row.get(f"{key}_noise", np.nan)
        return f"{fmt(row[key], digits)} (noise {fmt(noise, 2)})"

    rows = [
        {
            "target": str(row["target"]).upper(),
            "regressor": row["regressor"],
            "rank Spearman": versus(row, "rank_spearman", 2),
            "top-10 overlap": versus(row, "top10_overlap", 1),
            "top 10, half 1": listed(row.get("top10_half1")),
            "top 10, half 2": listed(row.get("top10_half2")),
        }
        for _, row in fit.iterrows()
    ]
    html = (
        "<h3>Stability of the ranking</h3>"
        '<p class="note">The whole repeats of the plan split into two halves (alternating), '
        "TM, TG and CM estimated from each half, the same regressor and SHAP fit to each "
        "half's targets, and the two rankings of the features by mean |SHAP| compared: "
        "Spearman across all features and the share of the top 10 both halves hold. In "
        "brackets, the same figures for fits to pure noise: a ranking no better than those "
        "is set by the features' resolution, not by the target.</p>"
    )
    if pd.to_numeric(fit.rank_spearman, errors="coerce").notna().any():
        html += table(
            pd.DataFrame(rows),
            caption="below 0.5, or near the noise level: treat the top features as tentative",
        )
    for warning in stability_warnings(fit):
        html += warning_box(warning[0].upper() + warning[1:] + ".")
    if "stability_note" in fit:
        for note in dict.fromkeys(fit.stability_note.dropna().astype(str)):
            html += f'<p class="note">{esc(note[0].upper() + note[1:])}.</p>'
    return html


def sweep_section(sweeps: list[tuple[str, pd.DataFrame, dict[str, Any]]]) -> Section | None:
    """Optimal and pessimal tokens: top and bottom tokens and the score distribution."""
    if not sweeps:
        return None
    body = ""
    figures: list[dict[str, Any]] = []
    for k, (name, frame, stats) in enumerate(sweeps):
        body += f"<h3>{esc(name)}</h3>"
        prompts = frame["prompt"].astype(str).unique() if "prompt" in frame.columns else [None]
        for j, prompt in enumerate(prompts):
            part = frame if prompt is None else frame[frame["prompt"].astype(str) == prompt]
            part = part.sort_values("score", ascending=False, kind="stable")
            if prompt is not None:
                body += f'<p class="prompt">Prompt: <q>{esc(prompt)}</q></p>'
            body += f'<p class="note">{len(part):,} tokens scored.</p>'
            cols = [c for c in ("rank", "token_id", "decoded", "score") if c in part.columns]
            best = part[cols].head(15).copy()
            worst = part[cols].tail(15).iloc[::-1].copy()
            for frame_ in (best, worst):
                if "decoded" in frame_.columns:
                    frame_["decoded"] = [repr(str(v)) for v in frame_["decoded"]]
            body += (
                '<div class="two-col"><div><h4>Optimal tokens (highest score)</h4>'
                f"{table(best)}</div><div><h4>Pessimal tokens (lowest score)</h4>"
                f"{table(worst)}</div></div>"
            )
            scores = pd.to_numeric(part["score"], errors="coerce").dropna().to_numpy(float)
            if len(scores):
                counts, edges = np.histogram(scores, bins=60)
                div = f"sweep-{k}-{j}"
                body += figure_div(div, 260)
                figures.append(
                    {
                        "id": div,
                        "figure": {
                            "data": [
                                {
                                    "type": "bar",
                                    "x": num_list((edges[:-1] + edges[1:]) / 2),
                                    "y": counts.tolist(),
                                    "width": float(edges[1] - edges[0]),
                                    "marker": {"color": "#7b8db3"},
                                    "name": "tokens",
                                    "hovertemplate": "score %{x:.3f}: %{y} tokens<extra></extra>",
                                }
                            ],
                            "layout": _bar_layout(
                                260,
                                xaxis={"title": {"text": "reward score"}},
                                yaxis={"title": {"text": "tokens"}, "automargin": True},
                            ),
                        },
                    }
                )
        if stats:
            body += "<h4>Statistics</h4>" + key_value_table(stats)
    return Section("sweeps", "Optimal and pessimal tokens", body, figures)


def evaluation_section(metrics: Any, probes: pd.DataFrame | None) -> Section | None:
    """Evaluation metrics (matrix when metrics.json is split -> metric -> value) and probes."""
    if metrics is None and probes is None:
        return None
    body = ""
    figures: list[dict[str, Any]] = []
    if isinstance(metrics, dict) and metrics:
        nested = all(
            isinstance(v, dict) and all(not isinstance(x, (dict, list)) for x in v.values())
            for v in metrics.values()
        )
        if nested:
            frame = pd.DataFrame.from_dict(metrics, orient="index")
            frame.insert(0, "split", [str(i) for i in frame.index])
            body += "<h3>Metrics</h3>" + table(frame.reset_index(drop=True))
        else:
            body += "<h3>Metrics</h3>" + key_value_table(metrics)
    elif metrics is not None:
        body += "<h3>Metrics</h3><pre>" + esc(json.dumps(clean(metrics), indent=2)) + "</pre>"
    if probes is not None:
        body += (
            "<h3>Shortcut probes</h3>"
            '<p class="note">mean_shift: mean change in reward when the probe edit is applied to '
            "one side; flip_rate: share of pairs whose preferred response flips.</p>"
        )
        body += table(probes)
        if {"probe", "flip_rate"} <= set(probes.columns):
            sides = probes["side"].astype(str) if "side" in probes.columns else None
            data = []
            for side in [None] if sides is None else sorted(sides.unique()):
                part = probes if side is None else probes[sides == side]
                data.append(
                    {
                        "type": "bar",
                        "name": plotly_text(side or "flip rate"),
                        "x": [plotly_text(p) for p in part["probe"].astype(str)],
                        "y": num_list(part["flip_rate"]),
                    }
                )
            body += figure_div("probes-plot", 300)
            layout = _bar_layout(
                300,
                barmode="group",
                yaxis={"title": {"text": "flip rate"}, "gridcolor": "#eee", "automargin": True},
            )
            figures.append({"id": "probes-plot", "figure": {"data": data, "layout": layout}})
    return Section("evaluation", "Evaluation", body, figures)


def generalization_section(frame: pd.DataFrame | None) -> Section | None:
    if frame is None:
        return None
    body = (
        '<p class="note">Explicit vs implicit reward models in distribution and under token '
        "and domain shifts (accuracy counts ties as 1/2).</p>" + table(frame.head(500))
    )
    return Section("generalization", "Explicit vs implicit generalization", body)


def plots_section(images: list[tuple[str, str]]) -> Section | None:
    """PNG plots of the experiment directory, embedded as base64 data URLs."""
    if not images:
        return None
    figures = "".join(
        f'<figure><img alt="{esc(name)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{esc(name)}</figcaption></figure>"
        for name, data in images
    )
    return Section("plots", "Plots", f'<div class="images">{figures}</div>')


def config_section(
    config: dict[str, Any] | None, version: str, runs: pd.DataFrame | None
) -> Section:
    """Resolved configuration, package versions and per-run training metrics."""
    made_with = (config or {}).get("version")
    body = (
        f"<p>Report written by rmlens {esc(version)}"
        + (f"; audit run with rmlens {esc(made_with)}" if made_with else "")
        + ".</p>"
    )
    if config is not None:
        text = json.dumps(clean(config), indent=2, sort_keys=True, ensure_ascii=False, default=str)
        body += f'<h3>config.json</h3><pre class="config">{esc(text)}</pre>'
    else:
        body += warning_box("config.json is missing from the experiment directory.")
    if runs is not None and len(runs):
        body += "<h3>Training runs</h3>" + table(runs)
    return Section("config", "Configuration", body)
