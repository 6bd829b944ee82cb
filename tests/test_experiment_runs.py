"""AuditDir: an audit's plan and run folders, and when a run counts as finished."""

import json

import pandas as pd
import pytest

from rmlens._errors import InputError
from rmlens.experiment import AuditDir, UnusableFile


def test_no_plan_is_bad_input(tmp_path):
    with pytest.raises(InputError, match="no plan.parquet"):
        AuditDir(tmp_path).n_runs()


def test_a_run_is_finished_only_with_scores_and_a_manifest_naming_its_pairs(tmp_path):
    exp = AuditDir(tmp_path)
    exp.write_plan(pd.DataFrame({"run": [0, 0, 1, 2], "group": list("abca")}))
    assert exp.n_runs() == 3
    for run in range(3):
        exp.write_table(pd.DataFrame({"id": ["p"]}), f"runs/{run:03d}/scores.parquet")
    exp.write_json({"train_ids": ["p"]}, "runs/000/manifest.json")
    exp.write_json({"run": 1}, "runs/001/manifest.json")  # no train_ids: unfinished
    (exp.run_dir(2) / "manifest.json").write_text("{trunc")
    assert exp.finished_runs() == [0]
    assert exp.manifest(0) == {"train_ids": ["p"]}
    assert exp.scores_path(0).is_file()


def test_a_failed_run_says_why_in_its_error_file(tmp_path):
    exp = AuditDir(tmp_path)
    assert exp.read_error(3) is None
    exp.write_error(3, {"run": 3, "attempts": 2, "error": "ValueError: bad", "traceback": "tb"})
    assert exp.read_error(3) == "ValueError: bad"
    assert json.loads((exp.run_dir(3) / "error.json").read_text())["attempts"] == 2
    (exp.run_dir(4)).mkdir(parents=True)
    (exp.run_dir(4) / "error.json").write_text("{half")
    assert exp.read_error(4) is None
    assert not exp.run_done(3)


def test_scores_manifests_and_missing_files_of_runs(tmp_path):
    exp = AuditDir(tmp_path)
    assert exp.manifest(0, required=False) is None
    with pytest.raises(InputError, match="manifest.json: not found"):
        exp.manifest(0)
    with pytest.raises(InputError, match="scores.parquet: not found"):
        exp.read_scores(0)
    exp.write_table(pd.DataFrame({"id": ["p", "q"], "r_chosen": [1.0, 2.0]}),
                    "runs/000/scores.parquet")  # fmt: skip
    assert exp.read_scores(0, columns=["id"])["id"].tolist() == ["p", "q"]
    (exp.run_dir(1)).mkdir()
    (exp.run_dir(1) / "manifest.json").write_text("{trunc")
    with pytest.raises(UnusableFile, match=r"001/manifest.json: not valid JSON"):
        exp.manifest(1, required=False)
    assert exp.missing(["plan.parquet", "runs/000/scores.parquet", "config.json"]) == [
        "plan.parquet", "config.json"]
