"""The one-checkpoint audit's standing measured on the user's data (``check_runs``, issue 58):
K paired runs in the RM's own regime, and one-checkpoint CM's agreement with them."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from conftest import assert_strict_json, run_cli
from rmlens._errors import InputError, RmlensWarning
from rmlens.hub import train
from rmlens.memorization import AuditConfig, audit_rm, audit_sentences
from rmlens.memorization._check_runs import check_config, runs_agreement
from rmlens.rewards import TrainConfig
from rmlens.stats import spearman
from test_checkpoint_audit import classifier_dirs  # noqa: F401 (a fixture)
from test_paired import word_pairs


def _table(cm, groups, category=None) -> pd.DataFrame:
    cm = np.asarray(cm, float)
    return pd.DataFrame({"id": [f"p{i}" for i in range(len(cm))], "group": groups,
                         "tm": 0.6 + cm, "tg": np.full(len(cm), 0.6), "cm": cm,
                         "category": category or ["typical"] * len(cm)})  # fmt: skip


def test_agreement_by_hand():
    groups = ["a", "a", "b", "b", "c", "c", "d", "d"]
    here = _table([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, np.nan], groups,
                  ["memorized"] * 2 + ["typical"] * 6)  # fmt: skip
    there = _table([0.2, 0.1, 0.4, 0.3, 0.6, 0.5, 0.8, 0.9], groups,
                   ["memorized"] + ["typical"] * 7)  # fmt: skip
    links = {"margin": {"spearman": 0.5, "lo": 0.4, "hi": 0.6}}
    result = runs_agreement(here, there, {"links": links},
                            {"reliability": {"cm": {"spearman_brown": 0.64}},
                             "n_runs_finished": 3, "links": {}}, n_boot=200)  # fmt: skip
    # the pair with no CM here is left out: 7 pairs in 4 groups
    assert result["n_pairs"] == 7 and result["n_groups"] == 4 and result["runs"] == 3
    rho = spearman([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7], [0.2, 0.1, 0.4, 0.3, 0.6, 0.5, 0.8])
    assert result["cm"]["spearman"] == pytest.approx(rho)
    assert result["tg"]["spearman"] is not None and math.isnan(result["tg"]["spearman"])
    # corrected by the check runs' own reliability: rho / sqrt(0.64)
    assert result["share"] == pytest.approx(rho / 0.8)
    assert result["share_lo"] == pytest.approx(result["cm"]["lo"] / 0.8)
    assert result["cm"]["lo"] <= rho <= result["cm"]["hi"]
    assert result["links"] == {"margin": {"checkpoint": links["margin"]}}
    assert result["memorized"] == {"checkpoint": pytest.approx(2 / 7),
                                   "check": pytest.approx(1 / 7)}  # fmt: skip
    with pytest.raises(InputError, match="at least 3 pairs in 2 groups"):
        runs_agreement(here.iloc[:2], there, {}, {})
    # the words: the firmer reading named where one checkpoint falls short; where the check
    # runs learned nothing either, no reading is firmer
    from rmlens.memorization._notes import check_sentence

    said = check_sentence({**result, "share_hi": 0.7, "warnings": []})
    assert "of what their own reliability (0.64) allows" in said
    assert "is the firmer reading" in said
    idle = check_sentence({**result, "warnings": ["not_learned"]})
    assert "did not learn either" in idle and "firmer" not in idle


def test_check_runs_train_in_the_rms_regime():
    record = TrainConfig(model="minilm", lr=3e-4, epochs=4, patience=1, eval_fraction=0.2,
                         precision="bf16", seed=7)  # fmt: skip
    cfg = check_config(AuditConfig(folds=5, seed=3), record, 3)
    assert (cfg.mode, cfg.runs, cfg.estimator, cfg.folds) == ("finetune", 3, "paired", 5)
    # its evaluation share becomes each run's validation groups; the rest is its record's
    assert cfg.val_fraction == 0.2 and cfg.train.eval_fraction == 0.0
    assert (cfg.train.lr, cfg.train.epochs, cfg.train.patience) == (3e-4, 4, 1)
    assert cfg.train.lr_grid == () and cfg.precision == "bf16" and cfg.train.seed == 3
    # trained every epoch on every pair: no validation groups
    every = check_config(AuditConfig(), record.replace(patience=0, eval_fraction=0.0), 2)
    assert every.val_fraction == 0.0 and every.train.patience == 0
    with pytest.raises(InputError, match="2 or more"):
        check_config(AuditConfig(), record, 1)


@pytest.fixture(scope="module")
def trained(tiny_encoder_dir, tmp_path_factory):
    pairs = word_pairs(40, 10)
    cfg = TrainConfig(model=str(tiny_encoder_dir), epochs=2, batch_size=8, lr=5e-3,
                      head_lr=5e-3, device="cpu", max_length=24)  # fmt: skip
    out = tmp_path_factory.mktemp("check") / "rm"
    train(pairs, cfg, out=out, quiet=True)
    return pairs, out


def test_an_rmlens_rm_is_audited_with_check_runs(trained, tmp_path):
    pairs, rm = trained
    out = tmp_path / "audit"
    with pytest.warns(RmlensWarning) as caught:
        audit_rm(pairs, rm, AuditConfig(n_boot=50), out=out, check_runs=2, quiet=True)
    summary = json.loads((out / "summary.json").read_text())
    check = summary["check"]
    # the check runs' own warnings (a tiny RM's) are said as theirs, in one line
    said = [str(w.message) for w in caught]
    assert any(m.startswith("the check runs' audit gave") and "check/summary.json" in m
               for m in said)  # fmt: skip
    assert check["runs"] == 2 and check["folder"] == "check"
    assert check["regime_from"].startswith("the RM's training record (")
    # the check runs trained as the RM did (rmlens train's defaults: a 0.2 evaluation share,
    # early stopping): validation groups of that share, the RM's rate
    config = json.loads((out / "check" / "config.json").read_text())
    assert config["audit"]["val_fraction"] == 0.2 and config["audit"]["train"]["lr"] == 5e-3
    # every defined pair of both audits, less the RM's evaluation split (undefined here)
    table = pd.read_parquet(out / "memorization.parquet")
    assert check["n_pairs"] == int(np.isfinite(table.cm).sum())
    assert set(check) >= {"tm", "tg", "cm", "reliability", "share", "links", "memorized"}
    assert "check runs" in summary["reliability"]["reason"]
    said = audit_sentences(summary)
    assert str(said.standing).startswith("Measured on this data: one-checkpoint CM ranks the")
    for path in [out / "summary.json", out / "check" / "summary.json"]:
        assert_strict_json(path)
    # started again: the check runs are read, not trained again
    stamp = (out / "check" / "runs" / "000" / "manifest.json").stat().st_mtime_ns
    audit_rm(pairs, rm, AuditConfig(n_boot=50), out=out, check_runs=2, quiet=True)
    assert (out / "check" / "runs" / "000" / "manifest.json").stat().st_mtime_ns == stamp


def test_without_check_runs_the_standing_is_plainly_the_benchmarks(trained, tmp_path):
    pairs, rm = trained
    audit_rm(pairs, rm, out=tmp_path / "a", quiet=True)
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert "check" not in summary
    assert "not measured on this data" in summary["reliability"]["reason"]
    assert str(audit_sentences(summary).standing).startswith("Standing: the benchmark's only")


def test_cli_check_runs(trained, tmp_path):
    pairs, rm = trained
    data = tmp_path / "pairs.jsonl"
    pairs.to_json(data, orient="records", lines=True)
    result = run_cli(["memorize", "--data", data, "--rm", rm, "--out", tmp_path / "o",
                      "--check-runs", "2", "--n-boot", "50", "--no-report", "--quiet"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "Measured on this data: one-checkpoint CM ranks the" in " ".join(result.stdout.split())
    result = run_cli(["memorize", "--data", data, "--rm", rm, "--out", tmp_path / "p",
                      "--check-runs", "1"])  # fmt: skip
    assert result.exit_code == 2 and "expected 0 (none) or 2 or more" in result.stderr
    result = run_cli(["memorize", "--data", data, "--out", tmp_path / "q", "--check-runs", "2"])
    assert result.exit_code == 2 and "--check-runs goes with --rm" in result.stderr


def test_an_adapter_from_elsewhere_is_checked_in_the_regime_given(classifier_dirs, tmp_path):  # noqa: F811
    whole, adapter = classifier_dirs
    pairs = word_pairs(24, 8)
    given = TrainConfig(epochs=1, lr=5e-3, head_lr=5e-3, patience=0)
    cfg = AuditConfig(format="chat", max_length=24, n_boot=50, mode="finetune", train=given,
                      val_fraction=0.0)  # fmt: skip
    with pytest.warns(RmlensWarning):  # a random RM's: pairs unchecked, barely learned
        audit_rm(pairs, adapter, cfg, out=tmp_path / "a", device="cpu", check_runs=2,
                 quiet=True)  # fmt: skip
    check = json.loads((tmp_path / "a" / "summary.json").read_text())["check"]
    # its own settings are not recorded: the runs train as told, from its adapter's base
    assert check["regime_from"] == (f"the settings given, the RM's own not being recorded "
                                    f"({whole}, its adapter's base; lora, lr 0.005, 1 epoch, "
                                    "patience 0)")  # fmt: skip
    config = json.loads((tmp_path / "a" / "check" / "config.json").read_text())["audit"]
    assert config["model"] == str(whole) and config["train"]["epochs"] == 1
    assert config["val_fraction"] == 0.0 and config["format"] == "chat"
