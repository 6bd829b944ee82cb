"""rmlens mitigate: one audit per objective with one plan and seed, then the comparison."""

import json

import pandas as pd

from conftest import length_pairs
from rmlens.cli import main


def test_cli_mitigate_audits_each_objective_compares_and_resumes(
    tiny_encoder_dir, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "pairs.jsonl"
    length_pairs().drop(columns=["user_id"]).to_json(data, orient="records", lines=True)
    out = tmp_path / "mit"
    args = ["mitigate", "--data", str(data), "--out", str(out), "--model",
            str(tiny_encoder_dir), "--runs", "5", "--head", "linear", "--epochs", "3",
            "--objectives", "bt,poe,group_dro", "--bias-features", "len_words", "--no-probes",
            "--no-shap", "--quiet"]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert "group_dro left out: no group column 'user_id'" in err
    for name in ("bt", "poe"):
        record = json.loads((out / name / "config.json").read_text())
        assert record["audit"]["head"]["objective"] == name
        assert record["audit"]["runs"] == 5
    plans = [pd.read_parquet(out / name / "plan.parquet") for name in ("bt", "poe")]
    pd.testing.assert_frame_equal(*plans)  # one plan for every objective
    assert not (out / "group_dro").exists()
    figures = pd.read_parquet(out / "compare.parquet")
    assert {"bt", "poe", "bt + length calibration"} <= set(figures.audit)
    held = figures[figures.metric == "heldout_accuracy"].set_index("audit")
    assert held.loc["poe", "n"] > 0 and 0 <= held.loc["poe", "value"] <= 1
    assert (out / "compare.html").exists() and (out / "config.toml").exists()
    manifest = json.loads((out / "poe" / "runs" / "000" / "manifest.json").read_text())
    assert set(manifest["metrics"]["bias_weights"]) == {"len_words"}
    before = {p: p.stat().st_mtime_ns for p in out.glob("*/runs/*/manifest.json")}
    assert main(args) == 0  # resumed: every run was finished, none is redone
    after = {p: p.stat().st_mtime_ns for p in out.glob("*/runs/*/manifest.json")}
    assert before == after and len(before) == 10
    assert main([*args[:-1], "--objectives", "bt,nope", "--quiet"]) == 2
    assert "--objectives" in capsys.readouterr().err


def test_cli_mitigate_with_the_logistic_head_pairs_every_objective(
    tiny_encoder_dir, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "pairs.jsonl"
    length_pairs(120, 24).to_json(data, orient="records", lines=True)
    out = tmp_path / "mit"
    args = ["mitigate", "--data", str(data), "--out", str(out), "--model",
            str(tiny_encoder_dir), "--runs", "6", "--folds", "3", "--objectives",
            "bt,label_smoothing,poe,reweight,group_dro,low_margin,complementary,curate",
            "--bias-features", "len_words", "--no-probes", "--no-shap", "--quiet"]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err
    assert "left out" not in capsys.readouterr().err
    names = ("bt", "label_smoothing", "poe", "reweight", "group_dro", "low_margin",
             "complementary", "curate")  # fmt: skip
    for name in names:
        summary = json.loads((out / name / "summary.json").read_text())
        assert summary["estimator"] == "paired", name
        assert summary["exactness"]["median_abs_error"] < 0.01, name
    poe = json.loads((out / "poe" / "runs" / "000" / "manifest.json").read_text())
    assert set(poe["metrics"]["bias_weights"]) == {"len_words"}
