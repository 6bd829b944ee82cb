"""``rmlens data convert`` through Typer's runner, then ``data inspect`` and ``memorize``.

On the fixtures of tests/fixtures/convert (see test_convert.py for the pairs they hold).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from conftest import run_cli

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "convert"
HUB_IDS = {"prism": "HannahRoseKirk/prism-alignment", "shp": "stanfordnlp/SHP"}
# (dataset, fixture, extra flags, memorize flags): every fixture, converted and audited
CASES = [
    ("prism", "prism_conversations.jsonl", [], []),
    ("prism", "prism_utterances.jsonl", [], ["--group-by", "interaction_id"]),  # one user
    ("community-alignment", "community_alignment.csv", [], []),
    (
        "ultrafeedback",
        "ultrafeedback_binarized.jsonl",
        ["--models-from", str(FIXTURES / "openbmb_ultrafeedback.jsonl")],
        [],
    ),
    ("ultrafeedback", "openbmb_ultrafeedback.jsonl", ["--score", "fine-grained"], []),
    ("helpsteer2", "helpsteer2_preference.jsonl", [], []),
    ("helpsteer2", "helpsteer2_train.jsonl", ["--ties", "keep"], []),
    ("chatbot-arena", "chatbot_arena_conversations.jsonl", ["--bothbad", "keep"], []),
    ("shp", "shp.jsonl", [], ["--group-by", "post_id"]),
]
WRITTEN = {  # pairs written per case, from the dataset's rules (see test_convert.py)
    "prism_conversations.jsonl": 18,
    "prism_utterances.jsonl": 4,
    "community_alignment.csv": 12,
    "ultrafeedback_binarized.jsonl": 2,
    "openbmb_ultrafeedback.jsonl": 18,
    "helpsteer2_preference.jsonl": 2,
    "helpsteer2_train.jsonl": 2,
    "chatbot_arena_conversations.jsonl": 3,
    "shp.jsonl": 3,
}
# under the tiny test tokenizer (a word-level vocabulary: other words are [UNK]), pairs of
# these fixtures have chosen == rejected after truncation (1 of 2: the tied multi-turn
# helpsteer2 pair; 2 of 3: the 2-turn battle and the bothbad vote), so one run of a 2-fold
# plan would train on no pair: the audit refuses it in one line (exit 2) rather than score
# every pair 0.5 from an untrained head
EMPTY_RUN = {"helpsteer2_train.jsonl": 2, "chatbot_arena_conversations.jsonl": 3}
# one field per dataset renamed in the first record: the error names it
RENAMED = [
    ("prism", "prism_conversations.jsonl", "user_id", "participant_id"),
    ("community-alignment", "community_alignment.jsonl", "annotator_id", "rater_id"),
    ("ultrafeedback", "ultrafeedback_binarized.jsonl", "score_chosen", "chosen_score"),
    ("helpsteer2", "helpsteer2_preference.jsonl", "response_2", "response_b"),
    ("chatbot-arena", "chatbot_arena_conversations.jsonl", "judge", "user"),
    ("shp", "shp.jsonl", "labels", "label"),
]


def fixture(name: str) -> Path:
    path = FIXTURES / name
    assert path.is_file(), f"converter fixture {name} missing from {FIXTURES}"
    return path


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    from rmlens.cli._app import app

    return app


def run(app, *args):
    """Through ``rmlens.cli.main``, the one exit-code path (what the ``rmlens`` script runs)."""
    return run_cli(["data", *args])


def convert_case(app, tmp_path: Path, name: str, file: str, flags: list[str]) -> Path:
    out = tmp_path / f"{Path(file).stem}.jsonl"
    result = run(app, "convert", "--from", name, fixture(file), "--out", out, *flags)
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.parametrize(("name", "file", "flags", "_"), CASES)
def test_convert_writes_pairs_report_and_table(app, tmp_path, name, file, flags, _):
    out = convert_case(app, tmp_path, name, file, flags)
    report = json.loads((tmp_path / f"{Path(file).stem}.report.json").read_text())
    assert report["pairs_written"] == WRITTEN[file] == len(out.read_text().splitlines())
    assert report["dataset"] == name and report["output"] == str(out)
    assert set(report) >= {"records_read", "dropped", "users", "models", "margin"}
    result = run(app, "convert", "--from", name, fixture(file), "--out", out, *flags, "-q")
    table = " ".join(result.stdout.split())
    assert f"{WRITTEN[file]} pairs written" in table and "records read" in table
    assert result.stderr == ""
    shown = run(app, "inspect", out, "--strict")
    assert shown.exit_code == 0, shown.output
    # the verdict follows the warnings (the community-alignment fixture has two users
    # judging the same responses the other way: a conflict, not a problem reading it)
    warnings = json.loads(run(app, "inspect", out, "--json").stdout)["warnings"]
    assert ("no problems found" in shown.stdout) == (not warnings)


def test_convert_json_report_and_status_line(app, tmp_path):
    out = tmp_path / "arena.parquet"
    result = run(
        app,
        "convert",
        "--from",
        "chatbot-arena",
        fixture("chatbot_arena_conversations.jsonl"),
        "--out",
        out,
        "--json",
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dropped"] == {"tie": 1, "tie (bothbad)": 1}
    assert report["users"] == 2 and report["models"] == 4
    assert report["margin"]["values"] == {"1": 2}
    assert (tmp_path / "arena.report.json").exists() and out.exists()
    assert "wrote 2 pairs" in result.stderr and "rmlens memorize --data" in result.stderr


def test_help_documents_every_dataset_rule(app):
    result = CliRunner().invoke(app, ["data", "convert", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    for name in (
        "prism",
        "community-alignment",
        "ultrafeedback",
        "helpsteer2",
        "chatbot-arena",
        "shp",
    ):
        assert f"{name} (" in text
    for rule in (
        "same_model",
        "if_chosen",
        "EMPTY STRING",
        "tie (bothbad)",
        "--models-from",
        "score_ratio",
        "post_id",
        "<extra_id_1>",
        "--ties",
    ):
        assert rule in text


@pytest.mark.parametrize(("name", "file", "field", "new"), RENAMED)
def test_renamed_field_fails_with_one_line_naming_it(app, tmp_path, name, file, field, new):
    records = [json.loads(x) for x in fixture(file).read_text().splitlines() if x.strip()]
    records[0] = {(new if k == field else k): v for k, v in records[0].items()}
    source = tmp_path / file
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = run(app, "convert", "--from", name, source, "--out", tmp_path / "o.jsonl")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert f"'{field}'" in result.stderr and "line 1" in result.stderr
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("name", sorted(HUB_IDS))
def test_hub_id_offline_fails_with_one_line(app, tmp_path, monkeypatch, name):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: offline
    for source in (HUB_IDS[name], name):
        result = run(app, "convert", "--from", name, source, "--out", tmp_path / "o.jsonl")
        assert result.exit_code == 2, result.output
        assert result.stderr.count("\n") == 1 and "offline" in result.stderr
        assert result.stderr.startswith(f"error: {HUB_IDS[name]}: not a local file or folder")


def test_hub_id_in_offline_mode_and_not_cached(app, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = run(
        app, "convert", "--from", "shp", "someone/not-cached-dataset", "--out", tmp_path / "o.jsonl"
    )
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and "not in the local cache" in result.stderr


def test_options_that_do_not_apply_or_are_bad_exit_2(app, tmp_path):
    shp, out = fixture("shp.jsonl"), tmp_path / "o.jsonl"
    cases = [
        (
            ["--from", "shp", shp, "--ties", "keep"],
            "error: --ties does not apply to --from shp (it takes --margin-from, --min-ratio, "
            "--max-per-post)",
        ),
        (
            ["--from", "prism", fixture("prism_utterances.jsonl"), "--ties", "maybe"],
            "error: --ties must be one of 'drop', 'keep', got maybe",
        ),
        (["--from", "nope", shp], "error: --from: unknown dataset 'nope'; known: chatbot-arena"),
        (["--from", "shp", tmp_path / "missing.jsonl"], "no such file or folder"),
        (["--from", "shp", tmp_path], "no shp data files found in this folder"),
    ]
    for args, message in cases:
        result = run(app, "convert", *args, "--out", out)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("error: ") and message in result.stderr
    bad = run(app, "convert", "--from", "shp", shp, "--out", tmp_path / "o.txt")
    assert bad.exit_code == 2 and "unknown output type" in bad.stderr


def test_folder_sources(app, tmp_path):
    folder = tmp_path / "shp" / "askculinary"  # SHP's layout: <subreddit>/<split>.json
    folder.mkdir(parents=True)
    lines = fixture("shp.jsonl").read_text().splitlines()
    (folder / "train.json").write_text("\n".join(lines) + "\n")
    (folder / "test.json").write_text("\n".join(lines[:2]) + "\n")
    out = tmp_path / "o.jsonl"
    assert run(app, "convert", "--from", "shp", tmp_path / "shp", "--out", out).exit_code == 0
    ids = [json.loads(x)["id"] for x in out.read_text().splitlines()]
    assert ids[2:] == [  # test.json is read first, then train.json
        "k2m9qa:hq1z2ab>hq1y7cd-2",
        "k2m9qa:hq1z2ab>hq1x4ef-2",
        "p8w3zd:gt9k5pq>gt9k1mn",
    ]
    report = json.loads((tmp_path / "o.report.json").read_text())
    assert report["notes"] == {"repeated source ids, made unique with -2, -3, ...": 2}
    split = run(app, "convert", "--from", "shp", tmp_path / "shp", "--out", out, "--split", "test")
    assert split.exit_code == 0 and len(out.read_text().splitlines()) == 2
    prism = tmp_path / "prism"
    prism.mkdir()
    (prism / "survey.jsonl").write_text(fixture("prism_survey.jsonl").read_text())
    (prism / "utterances.jsonl").write_text(fixture("prism_utterances.jsonl").read_text())
    assert run(app, "convert", "--from", "prism", prism, "--out", out).exit_code == 0
    assert len(out.read_text().splitlines()) == 4


@pytest.mark.slow
def test_memorize_runs_on_every_converted_fixture(app, tmp_path, tiny_encoder_dir, monkeypatch,
                                                  capsys):
    from rmlens.cli import main

    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / "cache"))
    for name, file, flags, audit_flags in CASES:
        data = convert_case(app, tmp_path, name, file, flags)
        report = json.loads((tmp_path / f"{Path(file).stem}.report.json").read_text())
        out = tmp_path / f"audit-{Path(file).stem}"
        capsys.readouterr()  # this case's output only
        code = main(
            [
                "memorize",
                "--data",
                str(data),
                "--out",
                str(out),
                "--model",
                str(tiny_encoder_dir),
                "--runs",
                "2",
                "--folds",
                "2",
                "--l2-grid",  # a fixed lambda: a fixture of 2 users has no group to validate on
                "1",
                "--quiet",
                "--no-report",
                *audit_flags,
            ]
        )
        if file in EMPTY_RUN:  # refused in one line, as a run on no pair would mean nothing
            err = capsys.readouterr().err
            assert code == 2 and err.count("\n") == 1, (file, err)
            assert err.startswith(f"error: 1 usable pair(s) left of {EMPTY_RUN[file]} (")
            assert "would train on none" in err
            continue
        assert code == 0, file
        config = json.loads((out / "config.json").read_text())
        expected = (audit_flags[1:] or ["user_id" if report["users"] else "prompt"])[0]
        assert config["group_by"] == expected, file
        assert (out / "memorization.parquet").exists()


def test_config_file_and_saved_config(app, tmp_path):
    """--config holds `from` and the dataset's options; flags override; the resolved options
    are saved beside the output and read back."""
    toml = tmp_path / "prism.toml"
    toml.write_text('from = "prism"\nties = "keep"\n')
    out = tmp_path / "p.jsonl"
    source = fixture("prism_conversations.jsonl")
    result = run(app, "convert", source, "--config", toml, "--out", out)
    assert result.exit_code == 0, result.output
    kept = len(out.read_text().splitlines())
    saved = tmp_path / "p.config.toml"
    assert 'ties = "keep"' in saved.read_text()
    result = run(app, "convert", source, "--config", toml, "--ties", "drop", "--out", out)
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) < kept
    bad = tmp_path / "bad.toml"
    bad.write_text('from = "shp"\nties = "keep"\n')
    result = run(app, "convert", fixture("shp.jsonl"), "--config", bad, "--out", out)
    assert result.exit_code == 2 and "unknown ShpOptions setting(s): ties" in result.stderr
