"""The page's last sections: the directory's PNG plots and the configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from .._html import esc, fmt, table, warning_box
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
    folder: Path | None = None,
) -> Section:
    """The settings as labelled tables (the values that ran: config.json's resolved fields
    and ``summary``), where the rest of config.json is, and one readable row per training
    run. ``folder``, the audit directory, is named as text: the page may be written
    elsewhere (``out``), where a relative link would break."""
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
            "option that sets each is beside it.</p>" + settings_html(config, summary)
            + f'<p class="note">{esc(record_sentence(folder))}</p>'
        )
    else:
        body += warning_box("config.json is missing from the experiment directory.")
    if runs is not None and len(runs):
        body += "<h3>Training runs</h3>" + runs_table(runs)
    return Section("config", "Configuration", body)


def record_sentence(folder: Path | None) -> str:
    """Where every field of the audit's record is, the settings of the mode that did not run
    included."""
    where = f"the audit folder {folder}" if folder is not None else "the audit folder"
    return (
        "Every field the audit recorded, including the settings of the training mode that "
        f"did not run, is in config.json in {where}."
    )


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
