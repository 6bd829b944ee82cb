"""The page's last sections: the directory's PNG plots and the configuration."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from .._html import clean, esc, fmt, table, warning_box
from ._base import Section
from ._settings import setting_text, settings_html

# the runs table's columns: header, and how many decimals (None: a count)
_RUN_HEADERS = {
    "run": ("run", None),
    "n_train": ("pairs trained on", None),
    "n_val": ("validation pairs", None),
    "in_train_accuracy": ("in-train accuracy", 3),
    "in_train_log_loss": ("in-train log-loss", 3),
    "held_out_accuracy": ("held-out accuracy", 3),
    "held_out_log_loss": ("held-out log-loss", 3),
    "l2": ("lambda kept", None),
    "epochs": ("epochs trained", None),
    "best_epoch": ("best epoch", None),
}


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
    config: dict[str, Any] | None,
    version: str,
    runs: pd.DataFrame | None,
    summary: dict[str, Any] | None = None,
) -> Section:
    """The settings as labelled tables (the values that ran: config.json's resolved fields
    and ``summary``), config.json itself collapsed, and one readable row per training run."""
    made_with = (config or {}).get("version")
    body = (
        f"<p>Report written by rmlens {esc(version)}"
        + (f"; audit run with rmlens {esc(made_with)}" if made_with else "")
        + ".</p>"
    )
    if config is not None:
        body += (
            '<h3>Settings</h3><p class="note">The settings the audit ran with, from '
            "config.json: an option left unset shows the value the audit chose and why; the "
            "option that sets each is beside it. Settings of the training mode that did not "
            "run are only in config.json.</p>" + settings_html(config, summary)
        )
        text = json.dumps(clean(config), indent=2, sort_keys=True, ensure_ascii=False, default=str)
        body += (
            "<details><summary>config.json as written</summary>"
            f'<pre class="config">{esc(text)}</pre></details>'
        )
    else:
        body += warning_box("config.json is missing from the experiment directory.")
    if runs is not None and len(runs):
        body += "<h3>Training runs</h3>" + runs_table(runs)
    return Section("config", "Configuration", body)


def runs_table(runs: pd.DataFrame) -> str:
    """The runs (``Experiment.runs``) as a table of the columns a reader needs, counts as
    integers (a mean to one decimal), accuracy and log-loss to three decimals, lambda as
    written; a note says where the rest of each run's figures are."""
    columns = [c for c in _RUN_HEADERS if c in runs.columns]
    shown = pd.DataFrame({c: [_run_cell(c, v) for v in runs[c]] for c in columns})
    note = (
        '<p class="note">Accuracy (a tie counts 1/2) and log-loss of each run\'s RM on the '
        "pairs it trained on and on the pairs it held out; the first row is the mean over "
        "runs. Each run's other figures (the validation loss of every lambda tried, its "
        "rewards and margins, the exactness check) are in its file "
        "runs/&lt;run&gt;/manifest.json.</p>"
    )
    headers = {c: h for c, (h, _) in _RUN_HEADERS.items()}
    return note + table(shown, headers=headers)


def _run_cell(column: str, value: Any) -> str:
    """One cell of the runs table as text."""
    if isinstance(value, str):
        return value  # the "mean" row's label
    if value is None or pd.isna(value):
        return "\u2013"
    digits = _RUN_HEADERS[column][1]
    if digits is not None:
        return fmt(float(value), digits)
    if column == "l2":
        return setting_text(float(value))
    value = float(value)
    return f"{int(value):,}" if value.is_integer() else f"{value:,.1f}"
