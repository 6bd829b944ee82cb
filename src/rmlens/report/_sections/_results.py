"""Results of the other commands: token sweeps, evaluation, EX vs IM generalization."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from .._html import clean, esc, figure_div, key_value_table, num_list, plotly_text, table
from ._base import Section, bar_layout


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
                            "layout": bar_layout(
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
            layout = bar_layout(
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
