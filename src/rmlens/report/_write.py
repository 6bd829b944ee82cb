"""``write_report``: read an experiment directory and write one self-contained HTML page."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rmlens import __version__
from rmlens._base import resolve_config
from rmlens._errors import RmlensWarning
from rmlens._io import write_atomic, write_text

from . import _sections as sec
from ._assets import CSP, CSS, page_script, plotly_script
from ._config import ReportConfig
from ._html import clean, esc, figure_div, json_for_script
from ._map import (
    POINT_TRACE,
    SELECTED_TRACE,
    color_options,
    map_figure,
    pair_records,
    sample_points,
    text_cap_for_budget,
)
from ._read import Experiment, load_experiment

_WEBGL_ABOVE = 1500
_MIN_TEXT_CAP = 20
_MIN_POINTS = 1000
# the notes of the most memorized and least generalized pairs: of an audit of R runs, and
# (True) of a one-checkpoint audit, whose one run held no group out
_PAIR_NOTES = {
    False: ("Highest CM = TM - TG: the reward models prefer the chosen response when they "
            "trained on the pair, much less when they did not. Click a row for details.",
            "Lowest TG: reward models that never saw the pair are the least likely to prefer "
            "its chosen response. Click a row for details."),
    True: ("Highest CM = TM - TG: the reward model prefers the chosen response, much less "
           "once the pair's group is removed from its training. Click a row for details.",
           "Lowest TG: with the pair's group removed from its training, the reward model is "
           "the least likely to prefer its chosen response. Click a row for details."),
}  # fmt: skip
# what the map's axes are: of an audit of R runs, and of a one-checkpoint audit
_MAP_AXES = {
    False: "x: TM, the mean probability that reward models trained on the pair prefer its "
           "chosen response; y: TG, the same for models that never saw it.",
    True: "x: TM, the probability that the reward model, which trained on the pair, prefers "
          "its chosen response; y: TG, the same with the pair's group removed from its "
          "training by a Gauss-Newton step (its one training run held no group out).",
}  # fmt: skip
# what the details panel gives of a pair beside its text
_DETAILS = {
    False: "TM, TG and CM with their bootstrap intervals, the number of runs it was in and out of",
    True: "TM, TG and CM (one run: no intervals)",
}


def write_report(
    directory: str | Path,
    config: ReportConfig | None = None,
    *,
    out: str | Path | None = None,
    quiet: bool = True,
    **overrides,
) -> Path:
    """Write ``report.html`` (and ``memorization.csv``) for an experiment directory.

    The page opens offline: Plotly, the style sheet and the data are inline and a content
    security policy blocks every request that would leave the page. It shows whatever the
    directory holds: the dataset summary, the interactive memorization map, the most
    memorized and least generalized pairs, attribution, token sweeps, evaluation,
    generalization, PNG plots and the configuration. Dataset text is always shown as text.

    Parameters
    ----------
    directory : str or Path
        The experiment directory of an audit; must hold ``memorization.parquet``.
    config : ReportConfig, optional
        The settings (default ``ReportConfig()``): points on the map, rows of the tables,
        text and page size limits, seed (see :class:`ReportConfig` for each).
    out : str or Path, optional
        The folder the page is written to (default ``directory``).
    quiet : bool, default=True
        When False, unreadable optional files and an oversized page are warned about
        (:class:`~rmlens.RmlensWarning`).
    **overrides
        Fields of ``ReportConfig``, applied to ``config`` (``write_report(dir, top_k=50)``).

    Returns
    -------
    Path
        Path of the written ``report.html``.

    Raises
    ------
    InputError
        When the directory or ``memorization.parquet`` is missing or lacks the columns
        ``id, tm, tg, cm``; ``ParamError`` (an ``InputError``) when an option is out of range.

    Examples
    --------
    >>> from rmlens.report import write_report
    >>> write_report("runs/squality", top_k=50)  # doctest: +SKIP
    PosixPath('runs/squality/report.html')
    """
    config = resolve_config("write_report", ReportConfig, config, overrides).check()
    exp = load_experiment(directory)
    dest = exp.root if out is None else Path(out)
    if not quiet:
        for message in exp.warnings:
            warnings.warn(message, RmlensWarning, stacklevel=2)
    write_atomic(dest / "memorization.csv", lambda tmp: exp.mem.to_csv(tmp, index=False))
    limit = int(config.max_page_mb * 1_000_000)
    budget = max(200_000, int((limit - 5_500_000) * 0.6))
    n_points = min(config.max_points, len(exp.mem))
    while True:
        rows = sample_points(exp.mem, max_points=n_points, top_k=config.top_k, seed=config.seed)
        cap = text_cap_for_budget(exp.mem, rows, config.max_text_chars, budget)
        page = render_page(exp, config, rows, cap)
        size = len(page.encode("utf-8"))
        if size <= limit:
            break
        if cap > _MIN_TEXT_CAP:
            budget = int(min(budget * 0.9, budget - (size - limit) * 1.2))
        elif n_points > _MIN_POINTS:
            n_points = max(_MIN_POINTS, n_points // 2)
        else:
            if not quiet:
                warnings.warn(
                    f"report.html is {size / 1e6:.1f} MB, over the "
                    f"{config.max_page_mb} MB limit, even with {n_points} points",
                    RmlensWarning,
                    stacklevel=2,
                )
            break
    return write_text(page, dest / "report.html")


def render_page(exp: Experiment, config: ReportConfig, rows: np.ndarray, text_cap: int) -> str:
    """The whole HTML page as a string."""
    mem = exp.mem
    positions = {int(r): k for k, r in enumerate(rows)}
    map_data = {
        "figure": map_figure(mem, rows, webgl=len(rows) > _WEBGL_ABOVE,
                             one_checkpoint=exp.one_checkpoint),
        "point_trace": POINT_TRACE,
        "selected_trace": SELECTED_TRACE,
        "points": pair_records(mem, rows, text_cap=text_cap, meta_cap=min(200, text_cap)),
        "text_cap": text_cap,
        "colors": color_options(mem, rows),
    }
    sections = [
        sec.quality_section(exp.summary, exp.plan),
        sec.summary_section(mem, exp.config, exp.plan, exp.summary),
        _map_section(exp, rows, map_data),
        sec.pair_table_section(
            mem,
            positions,
            section_id="memorized",
            title="Most memorized pairs",
            by="cm",
            ascending=False,
            top_k=config.top_k,
            note=_PAIR_NOTES[exp.one_checkpoint][0],
        ),
        sec.pair_table_section(
            mem,
            positions,
            section_id="generalized",
            title="Least generalized pairs",
            by="tg",
            ascending=True,
            top_k=config.top_k,
            note=_PAIR_NOTES[exp.one_checkpoint][1],
        ),
        sec.attribution_section(exp.attribution, exp.attribution_fit),
        sec.sae_section(exp.sae, exp.sae_cards),
        sec.sweep_section(exp.sweeps),
        sec.evaluation_section(exp.metrics, exp.probes),
        sec.generalization_section(exp.generalization),
        sec.overoptimization_section(*exp.overoptimization) if exp.overoptimization else None,
        sec.plots_section(exp.images),
        sec.config_section(exp.config, __version__, exp.runs, exp.summary,
                           exp.root.resolve()),
    ]
    shown = [s for s in sections if s is not None]
    payload = {
        "map": map_data,
        "figures": [f for s in shown for f in s.figures],
    }
    name = exp.root.resolve().name
    nav = "".join(f'<a href="#{esc(s.id)}">{esc(s.title)}</a>' for s in shown)
    warnings = "".join(f'<p class="warning">{esc(w)}</p>' for w in exp.warnings)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>rmlens report: {esc(name)}</title><style>{CSS}</style></head><body>"
        f'<header><h1>rmlens audit report</h1><div class="sub">{esc(name)} \u00b7 '
        f"{len(mem):,} pairs \u00b7 rmlens {esc(__version__)}</div><nav>{nav}</nav></header>"
        f"<main>{warnings}{''.join(s.html() for s in shown)}</main>"
        "<footer>Written by rmlens. Full tables beside this page: "
        '<a href="memorization.csv">memorization.csv</a> \u00b7 '
        '<a href="memorization.parquet">memorization.parquet</a></footer>'
        '<div id="rmlens-status" hidden data-ready="0"></div>'
        f'<script type="application/json" id="rmlens-data">{json_for_script(clean(payload))}'
        f"</script><script>{plotly_script()}</script><script>{page_script()}</script>"
        "</body></html>\n"
    )


def _map_section(exp: Experiment, rows: np.ndarray, map_data: dict[str, Any]) -> sec.Section:
    n_mapped = int(
        np.isfinite(pd.to_numeric(exp.mem["tm"], errors="coerce"))
        .mul(np.isfinite(pd.to_numeric(exp.mem["tg"], errors="coerce")))
        .sum()
    )
    sampled = (
        f" Showing {len(rows):,} of {n_mapped:,} pairs as points (the most and least "
        "memorized and generalized pairs are always among them); the shaded density layer "
        "and the histograms count every pair."
        if len(rows) < n_mapped
        else ""
    )
    text_cap = map_data["text_cap"]
    n_cut = sum(len(v) for v in map_data["points"]["cut"].values())
    cut = (
        f" Texts longer than {text_cap:,} characters are cut here; the full text is in "
        "memorization.csv."
        if n_cut
        else ""
    )
    body = (
        f'<p class="note">Each point is a preference pair. {_MAP_AXES[exp.one_checkpoint]} '
        "CM = TM - TG is the distance below the dashed diagonal. "
        "Hover for a summary, click for the whole pair; drag to zoom, double-click to reset."
        f"{esc(sec.quality_line(exp.summary))}{esc(sampled)}{esc(cut)}</p>"
        '<div class="controls"><label>Colour by <select id="map-color"></select></label>'
        '<span class="downloads">Full table: <a href="memorization.csv">memorization.csv</a>'
        ' \u00b7 <a href="memorization.parquet">memorization.parquet</a></span></div>'
        f'<div class="map-wrap"><div class="map-main">{figure_div("map-plot", 720)}</div>'
        '<aside id="details" class="empty" aria-live="polite">'
        '<p class="hint">Click a point on the map, or a row of the tables below, to see the '
        f"pair: its prompt, both responses, {_DETAILS[exp.one_checkpoint]}, and its metadata.</p>"
        '<div class="filled"><h3 id="details-id"></h3><div class="estimates">'
        '<span>TM</span><span id="details-tm"></span><span>TG</span>'
        '<span id="details-tg"></span><span>CM</span><span id="details-cm"></span>'
        '<span>runs</span><span id="details-runs"></span></div>'
        '<div class="label">Prompt</div><div class="pair-text" id="details-prompt"></div>'
        '<div class="label chosen">Chosen</div><div class="pair-text" id="details-chosen">'
        '</div><div class="label rejected">Rejected</div>'
        '<div class="pair-text" id="details-rejected"></div>'
        '<div class="label">Metadata</div><dl class="meta" id="details-meta"></dl></div>'
        "</aside></div>"
    )
    return sec.Section("map", "Memorization map", body)
