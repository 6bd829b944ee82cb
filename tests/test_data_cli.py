"""``rmlens data inspect`` and ``rmlens data synth`` through ``rmlens.cli.main``."""

from __future__ import annotations

import json

import pytest
import typer

from conftest import run_cli
from rmlens.data import load_pairs


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    from rmlens.cli._app import app

    return app


def run(app, *args):
    """Through ``rmlens.cli.main``, the one exit-code path (what the ``rmlens`` script runs)."""
    return run_cli(["data", *args])


def test_synth_then_inspect(app, tmp_path):
    out = tmp_path / "synth.jsonl"
    result = run(app, "synth", "--out", out, "--pairs", 120, "--users", 6, "--seed", 2)
    assert result.exit_code == 0, result.output
    assert "wrote 120 pairs" in result.stderr
    pairs = load_pairs(out)
    assert len(pairs) == 120 and pairs["user_id"].nunique() == 6
    assert not list(tmp_path.glob(".*.tmp"))

    shown = run(app, "inspect", out)
    assert shown.exit_code == 0, shown.output
    assert "120 pairs" in shown.stdout and "no problems found" in shown.stdout

    as_json = run(app, "inspect", out, "--json")
    data = json.loads(as_json.stdout)
    assert data["layout"] == "explicit" and data["problems"] == []
    assert data["summary"]["pairs"] == 120 and data["summary"]["users"] == 6


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_synth_formats_by_suffix(app, tmp_path, suffix):
    out = tmp_path / f"synth{suffix}"
    assert run(app, "synth", "--out", out, "--pairs", 30, "-q").exit_code == 0
    assert len(load_pairs(out)) == 30


def test_synth_bad_config_and_suffix_exit_2(app, tmp_path):
    result = run(app, "synth", "--out", tmp_path / "s.jsonl", "--quality", 0.2)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --quality must be such that the mechanism shares")
    result = run(app, "synth", "--out", tmp_path / "s.txt")
    assert result.exit_code == 2 and "unknown output type" in result.stderr
    assert not (tmp_path / "s.txt").exists()


def test_inspect_lists_problems_and_strict_exits_2(app, tmp_path):
    path = tmp_path / "prefs.jsonl"
    path.write_text(
        '{"prompt": "a", "chosen": "b", "rejected": "c"}\n'
        '{"prompt": "a", "chosen": null, "rejected": "c"}\n'
        "not json\n"
    )
    result = run(app, "inspect", path)
    assert result.exit_code == 0, result.output
    assert "2 errors (rows not read" in result.stdout
    assert "line 2: 'chosen' must be a non-empty string" in result.stdout
    assert "line 3: invalid JSON" in result.stdout
    strict = run(app, "inspect", path, "--strict", "--json")
    assert strict.exit_code == 2
    assert strict.stderr.strip() == f"error: {path}: 2 problems found"
    assert len(json.loads(strict.stdout)["problems"]) == 2


def test_inspect_unreadable_file_exits_2(app, tmp_path):
    result = run(app, "inspect", tmp_path / "missing.jsonl")
    assert result.exit_code == 2
    assert result.stderr == f"error: {tmp_path / 'missing.jsonl'}: no such file or folder\n"
    assert result.stdout == ""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = run(app, "inspect", empty)
    assert result.exit_code == 2 and "empty file" in result.stderr


def test_inspect_with_column_map(app, tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"q": "a", "chosen": "b", "rejected": "c", "annotator": 7}\n')
    result = run(app, "inspect", path, "--map", "prompt=q", "--map", "user_id=annotator", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["users"] == 1
    bad = run(app, "inspect", path, "--map", "prompt")
    assert bad.exit_code == 2 and "expected NEW=OLD" in bad.stderr
    unmapped = json.loads(run(app, "inspect", path, "--json").stdout)
    assert unmapped["layout"] == "implicit"
    assert unmapped["problems"] == [
        f"{path} line 1: cannot split off the prompt: 'chosen' and 'rejected' share no "
        "'\\n\\nAssistant:' turn; give the prompt as a field (--map prompt=FIELD)"
    ]
    other = tmp_path / "other.jsonl"
    other.write_text('{"q": "a", "good": "b", "bad": "c"}\n')
    unknown = run(app, "inspect", other)
    assert unknown.exit_code == 2 and "cannot tell the layout" in unknown.stderr
