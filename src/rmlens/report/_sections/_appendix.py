"""The page's last sections: the directory's PNG plots and the configuration."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from .._html import clean, esc, table, warning_box
from ._base import Section


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
