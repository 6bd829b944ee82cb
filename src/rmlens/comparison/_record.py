"""The comparison directory: ``compare.parquet``, ``compare.json`` and the PNGs."""

from __future__ import annotations

from pathlib import Path

import rmlens
from rmlens._io import jsonable, write_json, write_parquet
from rmlens.comparison import metrics as M
from rmlens.comparison._config import CompareConfig
from rmlens.comparison._margin import METRICS as MARGIN_METRICS
from rmlens.comparison._plots import plot_agreement, plot_cm_by_margin, plot_family
from rmlens.comparison._result import Comparison


def write_comparison(result: Comparison, out: Path, config: CompareConfig) -> None:
    """Write the figures, ``compare.json`` and the plots into ``out``; remove stale plots."""
    out.mkdir(parents=True, exist_ok=True)
    result.out = out
    labels = [a["label"] for a in result.audits]
    files = ["compare.parquet", "compare.json"]
    plots = []
    for fam in M.FAMILIES:
        if (result.figures.family == fam).any():
            plots.append(plot_family(result.figures, fam, labels, out / f"compare_{fam}.png"))
    if result.figures.metric.isin(MARGIN_METRICS).any():
        plots.append(plot_cm_by_margin(result.figures, labels, out / "compare_cm_by_margin.png"))
    if len(result.agreement):
        plots.append(plot_agreement(result.agreement, out / "compare_agreement.png"))
    files += [p.name for p in plots]
    for stale in (*(f"compare_{fam}.png" for fam in M.FAMILIES), "compare_cm_by_margin.png",
                  "compare_agreement.png"):  # an earlier comparison's plot, not drawn now
        if stale not in files:
            (out / stale).unlink(missing_ok=True)
    result.files = files
    write_parquet(result.figures, out / "compare.parquet")
    write_json(compare_record(result, config), out / "compare.json")


def compare_record(result: Comparison, config: CompareConfig) -> dict:
    """``compare.json``: the figures, agreement, audits, notes, warnings, config."""
    return jsonable({
        "version": rmlens.__version__,
        "config": config.to_dict(),
        "audits": result.audits,
        "figures": result.figures.to_dict("records"),
        "agreement": result.agreement.to_dict("records"),
        "details": result.details,
        "notes": result.notes,
        "warnings": result.warnings,
        "flags": result.flags,
        "files": result.files,
        "metrics": {m: {"family": M.family(m), "label": M.label(m)}
                    for m in dict.fromkeys(result.figures.metric)},  # fmt: skip
    })
