"""``rmlens attribute``: feature listing, bad input, and a whole run on a small directory."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from rmlens.cli import main
from test_attribution_regress import planted_table


@pytest.fixture
def experiment(tmp_path):
    table = planted_table(160)
    table.to_parquet(tmp_path / "memorization.parquet")
    (tmp_path / "config.json").write_text(json.dumps({"group_by": "user_id",
                                                      "audit": {"model": "minilm"}}))
    return tmp_path


def test_list_features_needs_no_dir(capsys):
    assert main(["attribute", "--list-features", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    names = {r["name"] for r in rows}
    assert {"len_chars", "refusal", "sentiment", "chosen_model", "flesch"} <= names
    assert all(r["description"] and r["source"] for r in rows)
    assert main(["attribute", "--list-features"]) == 0
    assert "len_chars" in capsys.readouterr().out


def test_dir_without_memorization_table_exits_2(tmp_path, capsys):
    assert main(["attribute", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "memorization.parquet" in err


def test_missing_dir_argument_exits_2(capsys):
    assert main(["attribute"]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_bad_option_value_exits_2(experiment, capsys):
    assert main(["attribute", str(experiment), "--targets", "tm,zz", "-q"]) == 2
    assert "error: --targets must be a subset of tm, tg, cm, got tm,zz" in capsys.readouterr().err


def test_missing_target_column_exits_2(experiment, capsys):
    pd.read_parquet(experiment / "memorization.parquet").drop(columns="cm").to_parquet(
        experiment / "memorization.parquet")
    assert main(["attribute", str(experiment), "-q", "--tokenizer", "none"]) == 2
    assert "'cm'" in capsys.readouterr().err


def test_attribute_writes_tables_and_plots(experiment, capsys):
    code = main(["attribute", str(experiment), "--quiet", "--json", "--folds", "3",
                 "--tokenizer", "none", "--shap-rows", "100", "--mlp-shap-rows", "20",
                 "--shap-background", "10"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert {(f["target"], f["regressor"]) for f in out["fit"]} == {
        (t, r) for t in ("tm", "tg", "cm") for r in ("lightgbm", "mlp")}
    imp = pd.read_parquet(experiment / "attribution.parquet")
    fit = pd.read_parquet(experiment / "attribution_fit.parquet")
    diff = pd.read_parquet(experiment / "attribution_diff.parquet")
    assert list(imp.columns[:4]) == ["target", "regressor", "feature", "importance"]
    assert list(fit.columns[:4]) == ["target", "regressor", "r2", "r2_std"]
    assert {"feature", "importance_tm", "importance_tg", "diff"} <= set(diff.columns)
    assert imp[(imp.target == "tm") & (imp["rank"] == 1)].feature.unique().tolist() == ["margin"]
    for png in ("attribution_importance.png", "attribution_beeswarm_lightgbm.png",
                "attribution_beeswarm_mlp.png", "attribution_diff.png"):
        assert (experiment / png).read_bytes()[:4] == b"\x89PNG", png
    record = json.loads((experiment / "attribution.json").read_text())
    assert record["attribute"]["folds"] == 3
    # issue 31: each fit says whether it explains anything, and the tables carry it
    floor = record["r2_floor"]
    assert [f["informative"] for f in record["fit"]] == [f["r2"] is not None and f["r2"] >= floor
                                                          for f in record["fit"]]
    assert fit.informative.tolist() == [f["informative"] for f in record["fit"]]
    assert record["warnings"] == out["warnings"]
    useful = set(zip(fit.target, fit.regressor, fit.informative))
    assert set(zip(imp.target, imp.regressor, imp.informative)) <= useful
    assert record["skipped"]["mechanism"] == "excluded"
    assert not list(experiment.glob(".*.tmp"))


def test_attribute_refreshes_the_report(experiment, monkeypatch, capsys):
    import rmlens.report

    written = []
    monkeypatch.setattr(rmlens.report, "write_report", lambda out, *a, **k: written.append(out)
                        or out / "report.html")  # fmt: skip
    argv = ["attribute", str(experiment), "--targets", "tm", "--regressors", "lightgbm",
            "--no-plots", "-q", "--tokenizer", "none"]  # fmt: skip
    assert main(argv) == 0
    assert written == [] and f"rmlens report {experiment}" in capsys.readouterr().err
    (experiment / "report.html").write_text("<html></html>")
    assert main(argv[:-3] + ["--tokenizer", "none"]) == 0
    assert written == [experiment]
    assert "report updated" in capsys.readouterr().err
    assert (experiment / "attribute.toml").exists()


def test_identifier_columns_are_listed_and_come_back_with_features(experiment, capsys):
    table = pd.read_parquet(experiment / "memorization.parquet")
    table["passage_id"] = [str(i % 8) for i in range(len(table))]
    table.to_parquet(experiment / "memorization.parquet")
    fast = ["-q", "--tokenizer", "none", "--targets", "tm", "--regressors", "lightgbm",
            "--no-plots", "--folds", "3"]
    assert main(["attribute", str(experiment), *fast]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert "left out of the features" in out and "passage_id (named like an identifier)" in out
    assert "user_id (the audit's grouping column)" in out
    record = json.loads((experiment / "attribution.json").read_text())
    assert set(record["left_out"]) == {"passage_id", "user_id"}
    assert "passage_id" not in set(pd.read_parquet(experiment / "attribution.parquet").feature)

    assert main(["attribute", str(experiment), *fast, "--features", "passage_id", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["left_out"] == {
        "user_id": "the audit's grouping column"}
    assert "passage_id" in set(pd.read_parquet(experiment / "attribution.parquet").feature)
    assert json.loads((experiment / "attribution.json").read_text())["left_out"] == {
        "user_id": "the audit's grouping column"}
    assert main(["attribute", str(experiment), *fast, "--features", "nope"]) == 2
    assert "error: --features must be metadata columns of the table (left out by default: " \
           "user_id, passage_id), got nope" in capsys.readouterr().err
