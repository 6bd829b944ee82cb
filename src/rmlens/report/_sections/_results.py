"""Results of the other commands: token sweeps and EX vs IM generalization (the evaluation
is in ``_evaluation``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._html import esc, figure_div, num_list, readable_rows, table
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
            rows = readable_rows(stats, "the sweep's JSON files")
            frame = pd.DataFrame(rows, columns=["statistic", "value"])
            body += "<h4>Statistics</h4>" + table(frame, classes="kv")
    return Section("sweeps", "Optimal and pessimal tokens", body, figures)


def generalization_section(frame: pd.DataFrame | None) -> Section | None:
    if frame is None:
        return None
    body = (
        '<p class="note">Explicit vs implicit reward models in distribution and under token '
        "and domain shifts (accuracy counts ties as 1/2).</p>" + table(frame.head(500))
    )
    return Section("generalization", "Explicit vs implicit generalization", body)
