"""What every report section is: a ``<section>`` with its Plotly figures, and the bar layout."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._html import esc


@dataclass
class Section:
    """One ``<section>`` of the page: anchor id, heading, body HTML and its figures."""

    id: str
    title: str
    body: str
    figures: list[dict[str, Any]] = field(default_factory=list)

    def html(self) -> str:
        return f'<section id="{esc(self.id)}"><h2>{esc(self.title)}</h2>{self.body}</section>'


def bar_layout(height: int, **extra: Any) -> dict[str, Any]:
    return {
        "height": height,
        "margin": {"l": 60, "r": 20, "t": 60, "b": 40},
        "plot_bgcolor": "white",
        "legend": {"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0},
        **extra,
    }
