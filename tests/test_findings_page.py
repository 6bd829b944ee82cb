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


def test_page_writes_the_verdict_rules_and_how_each_verdict_was_given(tmp_path):
    fig = {"key": "framing", "label": "framing index", "value": 0.09, "lo": -0.11, "hi": 0.26,
           "n": 1226, "n_of": "words", "unit": "SD", "claimed": None}  # fmt: skip
    other = {**fig, "key": "skew", "label": "skewness", "value": 0.6, "lo": 0.5, "hi": 0.7}
    rule = {"rule": "inconclusive", "caveat": "No null baseline yet.",
            "parts": [{"figure": "framing", "sign": 1, "outcome": "inconclusive"},
                      {"figure": "share", "outcome": "missing"}]}  # fmt: skip
    found = {**_finding("three", "inconclusive", [fig, other]), "verdict_rule": rule}
    (tmp_path / "three.json").write_text(json.dumps(found))
    module = _page_module(tmp_path)
    module.write_page(None)
    page = (tmp_path / "index.rst").read_text()
    rules = page[page.index("How verdicts are given\n---"): page.index("Title of three\n---")]
    assert [label for label, _ in module._rules()] == [
        "reproduced", "not reproduced", "inconclusive", "partly", "not testable here"]
    for label, when in module._rules():
        assert f"- **{label}**: {when}" in rules
    assert "`How verdicts are given`_" in page  # the intro points to them
    assert "     - inconclusive" in page[: page.index("How verdicts are given\n---")]
    assert "     - claimed\n     - outcome" in page
    assert "     - above 0\n     - inconclusive" in page  # the claimed setting
    assert "     - \u2013\n     - \u2013" in page  # a figure the verdict does not rest on
    assert "*By the rules:* inconclusive: no setting excludes the claimed effect" in page
    assert "The interval of share is missing here" in page
    assert "*Caveat:* No null baseline yet." in page


def test_claimed_side_and_size_in_words(tmp_path):
    claimed = _page_module(tmp_path)._claimed
    assert claimed({"sign": 1}) == "above 0"
    assert claimed({"sign": 1, "size": 0.32}) == "above 0, reaching 0.32"
    assert claimed({"sign": -1, "size": 0.1, "null": 1.0}) == "below 1, reaching 0.9"
    assert claimed({"sign": 0, "size": 0.1}) == "either side of 0, by 0.1 or more"
