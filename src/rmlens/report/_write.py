"""``write_report``: read an experiment directory and write one self-contained HTML page."""

from __future__ import annotations

import base64
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rmlens import __version__
from rmlens._base import resolve_config
from rmlens._errors import InputError, RmlensWarning
from rmlens._io import write_atomic, write_text

from . import _sections as sec
from ._assets import CSP, CSS, page_script, plotly_script
from ._config import ReportConfig
from ._html import clean, esc, figure_div, flatten, json_for_script
from ._map import (
    POINT_TRACE,
    SELECTED_TRACE,
    color_options,
    map_figure,
    pair_records,
    sample_points,
    text_cap_for_budget,
)

REQUIRED = ("id", "tm", "tg", "cm")
_WEBGL_ABOVE = 1500
_MAX_PNG_BYTES = 4_000_000
_MIN_TEXT_CAP = 20
_MIN_POINTS = 1000


@dataclass
class _Experiment:
    """Everything the report shows, read from one experiment directory."""

    root: Path
    mem: pd.DataFrame
    config: dict[str, Any] | None = None
    plan: pd.DataFrame | None = None
    summary: dict[str, Any] | None = None
    runs: pd.DataFrame | None = None
    attribution: pd.DataFrame | None = None
    attribution_fit: pd.DataFrame | None = None
    sae: Any = None  # sae/config.json
    sae_cards: Any = None  # sae/cards.json
    sweeps: list[tuple[str, pd.DataFrame, dict[str, Any]]] = field(default_factory=list)
    metrics: Any = None
    probes: pd.DataFrame | None = None
    generalization: pd.DataFrame | None = None
    images: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    overoptimization: tuple[list[dict], pd.DataFrame | None, str] | None = None


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


def load_experiment(out_dir: str | Path) -> _Experiment:
    """Read the experiment directory; optional parts that are absent are left out."""
    root = Path(out_dir)
    if not root.is_dir():
        raise InputError(f"{root}: experiment directory not found (expected a folder)")
    mem_path = root / "memorization.parquet"
    if not mem_path.is_file():
        raise InputError(
            f"{mem_path}: not found; a report needs the memorization table "
            f"(run `rmlens memorize --out {root}` first)"
        )
    try:
        mem = pd.read_parquet(mem_path)
    except Exception as err:  # noqa: BLE001 - any reader failure is bad input here
        raise InputError(f"{mem_path}: not a readable Parquet file ({err})") from err
    missing = [c for c in REQUIRED if c not in mem.columns]
    if missing:
        raise InputError(
            f"{mem_path}: missing column(s) {', '.join(missing)}; expected "
            f"{', '.join(REQUIRED)}, found {', '.join(map(str, mem.columns)) or 'none'}"
        )
    for column in ("tm", "tg", "cm"):
        if not pd.api.types.is_numeric_dtype(mem[column]):
            raise InputError(
                f"{mem_path}: column '{column}' must be numeric, found dtype {mem[column].dtype}"
            )
    exp = _Experiment(root=root, mem=mem.reset_index(drop=True))
    exp.config = _read_json(root / "config.json", exp)
    exp.summary = _read_json(root / "summary.json", exp)
    exp.plan = _read_table(root / "plan.parquet", ("run", "group", "in_train"), exp)
    exp.runs = _read_runs(root, exp)
    exp.attribution = _read_table(
        root / "attribution.parquet", ("target", "regressor", "feature", "importance"), exp
    )
    exp.attribution_fit = _read_table(
        root / "attribution_fit.parquet", ("target", "regressor", "r2"), exp
    )
    exp.sae = _read_json(root / "sae" / "config.json", exp)
    exp.sae_cards = _read_json(root / "sae" / "cards.json", exp)
    for path in sorted(root.glob("sweep*/sweep.parquet")):
        frame = _read_table(path, ("token", "score"), exp)
        if frame is not None:
            stats: dict[str, Any] = {}
            for stats_path in sorted(path.parent.glob("*.json")):
                loaded = _read_json(stats_path, exp)
                if loaded is not None:
                    stats[stats_path.stem] = loaded
            exp.sweeps.append((path.parent.name, frame, stats))
    exp.metrics = _read_json(root / "metrics.json", exp)
    exp.probes = _read_table(root / "probes.parquet", ("probe", "flip_rate"), exp)
    exp.generalization = _read_table(root / "generalization.parquet", (), exp)
    exp.overoptimization = _read_overoptimization(root, exp)
    pngs = sorted(root.glob("*.png")) + sorted(root.glob("sweep*/*.png"))
    for path in pngs:
        data = path.read_bytes()
        if len(data) > _MAX_PNG_BYTES:
            exp.warnings.append(f"{path}: {len(data):,} bytes, too large to embed; left out")
            continue
        name = str(path.relative_to(root))
        exp.images.append((name, base64.b64encode(data).decode("ascii")))
    return exp


def _read_overoptimization(root: Path, exp: _Experiment):
    """This audit's rows of ``overoptimization.json`` (and the curves beside it) in the
    audit's folder or its parent (the comparison directory of ``mitigate``): summary rows,
    curves, and the file they came from; None when no overoptimization names this audit."""
    for folder in (root, root.parent):
        record = _read_json(folder / "overoptimization.json", exp)
        if not isinstance(record, dict):
            continue
        labels = {str(a.get("label")) for a in record.get("audits") or []
                  if a.get("path") and Path(a["path"]).resolve() == root.resolve()}  # fmt: skip
        if not labels:
            continue
        rows = [r for r in record.get("summary") or []
                if r.get("audit") in labels or r.get("kind") == "oracle"]  # fmt: skip
        curves = _read_table(folder / "overoptimization.parquet", ("rm", "n", "kl", "gold"), exp)
        if curves is not None:
            curves = curves[curves["rm"].isin({r.get("rm") for r in rows})]
        return rows, curves, str(folder / "overoptimization.json")
    return None


def _read_json(path: Path, exp: _Experiment) -> Any:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        exp.warnings.append(f"{path}: not valid JSON ({err}); section left out")
        return None


def _read_table(path: Path, required: tuple[str, ...], exp: _Experiment) -> pd.DataFrame | None:
    if not path.is_file():
        return None
    try:
        frame = pd.read_parquet(path)
    except Exception as err:  # noqa: BLE001 - report the file and go on
        exp.warnings.append(f"{path}: not a readable Parquet file ({err}); section left out")
        return None
    missing = [c for c in required if c not in frame.columns]
    if missing:
        exp.warnings.append(
            f"{path}: missing column(s) {', '.join(missing)}, found "
            f"{', '.join(map(str, frame.columns))}; section left out"
        )
        return None
    return frame


def _read_runs(root: Path, exp: _Experiment) -> pd.DataFrame | None:
    records = []
    for path in sorted(root.glob("runs/*/manifest.json"))[:500]:
        manifest = _read_json(path, exp)
        if not isinstance(manifest, dict):
            continue
        record: dict[str, Any] = {"run": manifest.get("run", path.parent.name)}
        if "n_train" in manifest:
            record["n_train"] = manifest["n_train"]
        metrics = manifest.get("metrics")
        if isinstance(metrics, dict):
            for key, value in flatten(metrics):
                if not isinstance(value, (list, dict)):
                    record[key] = value
        records.append(record)
    if not records:
        return None
    runs = pd.DataFrame.from_records(records)
    numeric = runs.drop(columns=["run"]).select_dtypes("number")
    whole = [c for c in numeric.columns if _whole(numeric[c])]
    if len(runs) > 1 and not numeric.empty:
        mean = {"run": "mean", **numeric.mean().to_dict()}
        for column in whole:  # a mean count stays an integer only when it is one
            value = mean[column]
            mean[column] = int(value) if np.isfinite(value) and float(value).is_integer() else value
        runs = pd.concat(
            [pd.DataFrame([mean], dtype=object), runs.astype(object)], ignore_index=True
        )
    for column in whole:  # counts stay integers per run (a missing one stays missing)
        values = [v if pd.isna(v) or not float(v).is_integer() else int(v) for v in runs[column]]
        runs[column] = pd.Series(values, index=runs.index, dtype=object)
    return runs


def _whole(column: pd.Series) -> bool:
    """Whether a numeric column of the runs' manifests holds integers: an integer dtype, or
    floats that are all whole (an int entry that some run lacks reads as float; a grid value
    such as lambda 100.0 reads better as 100)."""
    values = column.dropna()
    if values.empty or pd.api.types.is_bool_dtype(column):
        return False
    if pd.api.types.is_integer_dtype(column):
        return True
    return bool(np.all(np.mod(values.to_numpy(float), 1) == 0))


def render_page(exp: _Experiment, config: ReportConfig, rows: np.ndarray, text_cap: int) -> str:
    """The whole HTML page as a string."""
    mem = exp.mem
    positions = {int(r): k for k, r in enumerate(rows)}
    map_data = {
        "figure": map_figure(mem, rows, webgl=len(rows) > _WEBGL_ABOVE),
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
            note="Highest CM = TM - TG: the reward models prefer the chosen response when "
            "they trained on the pair, much less when they did not. Click a row for details.",
        ),
        sec.pair_table_section(
            mem,
            positions,
            section_id="generalized",
            title="Least generalized pairs",
            by="tg",
            ascending=True,
            top_k=config.top_k,
            note="Lowest TG: reward models that never saw the pair are the least likely to "
            "prefer its chosen response. Click a row for details.",
        ),
        sec.attribution_section(exp.attribution, exp.attribution_fit),
        sec.sae_section(exp.sae, exp.sae_cards),
        sec.sweep_section(exp.sweeps),
        sec.evaluation_section(exp.metrics, exp.probes),
        sec.generalization_section(exp.generalization),
        sec.overoptimization_section(*exp.overoptimization) if exp.overoptimization else None,
        sec.plots_section(exp.images),
        sec.config_section(exp.config, __version__, exp.runs),
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


def _map_section(exp: _Experiment, rows: np.ndarray, map_data: dict[str, Any]) -> sec.Section:
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
        '<p class="note">Each point is a preference pair. x: TM, the mean probability that '
        "reward models trained on the pair prefer its chosen response; y: TG, the same for "
        "models that never saw it. CM = TM - TG is the distance below the dashed diagonal. "
        "Hover for a summary, click for the whole pair; drag to zoom, double-click to reset."
        f"{esc(sec.quality_line(exp.summary))}{esc(sampled)}{esc(cut)}</p>"
        '<div class="controls"><label>Colour by <select id="map-color"></select></label>'
        '<span class="downloads">Full table: <a href="memorization.csv">memorization.csv</a>'
        ' \u00b7 <a href="memorization.parquet">memorization.parquet</a></span></div>'
        f'<div class="map-wrap"><div class="map-main">{figure_div("map-plot", 720)}</div>'
        '<aside id="details" class="empty" aria-live="polite">'
        '<p class="hint">Click a point on the map, or a row of the tables below, to see the '
        "pair: its prompt, both responses, TM, TG and CM with their bootstrap intervals, "
        "the number of runs it was in and out of, and its metadata.</p>"
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
