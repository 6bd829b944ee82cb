"""The findings page is built from the findings' JSON files: a table of claims and verdicts,
then each finding with its figures, plot and reading (docs/_ext/findings_page.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

EXT = Path(__file__).resolve().parents[1] / "docs" / "_ext" / "findings_page.py"


def _page_module(folder: Path):
    spec = importlib.util.spec_from_file_location("findings_page_under_test", EXT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.FOLDER = folder
    return module


def _finding(name: str, verdict: str, figures: list[dict]) -> dict:
    return {"name": name, "title": f"Title of {name}", "claim": f"Claim of {name}.",
            "source": "Someone et al. 2025", "command": f"python benchmarks/findings.py {name}",
            "data": "some pairs", "figures": figures, "headline": [f["key"] for f in figures[:1]],
            "verdict": verdict, "reading": f"Reading of {name}.",
            "tables": [{"caption": "A table", "columns": ["a", "b"], "rows": [["1", "2"]]}],
            "measured": "2026-12-05"}  # fmt: skip


def test_page_lists_every_finding_with_its_figure_and_verdict(tmp_path):
    fig = {"key": "gap", "label": "IM minus EX", "value": 0.123, "lo": -0.05, "hi": 0.3,
           "n": 60, "unit": "accuracy drop", "claimed": 0.2}  # fmt: skip
    (tmp_path / "one.json").write_text(json.dumps(_finding("one", "partly", [fig])))
    (tmp_path / "two.json").write_text(json.dumps(
        _finding("two", "not testable here", [{**fig, "key": "g", "value": -1.5, "lo": -2.0,
                                               "hi": -1.0, "claimed": None}])))  # fmt: skip
    _page_module(tmp_path).write_page(None)
    page = (tmp_path / "index.rst").read_text()
    top = page[: page.index("Title of one\n---")]
    assert "IM minus EX: 0.12 [-0.05, 0.30] (accuracy drop)" in top  # the headline, its unit
    assert "     - partly" in top and "     - not testable here" in top
    assert "0.123" in page and "-0.050 to 0.300" in page and "60 pairs" in page
    assert "**Verdict: not testable here.** Reading of two." in page
    assert ".. image:: _figures/one.png" in page
    for name in ("one", "two"):
        assert (tmp_path / "_figures" / f"{name}.png").stat().st_size > 1000
