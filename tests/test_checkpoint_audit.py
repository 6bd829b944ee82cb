"""The one-checkpoint audit (``rmlens memorize --rm RM``) and the ``rm`` -> ``rm_kind``
rename (``--rm`` names an RM folder on every command; old records still load)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from conftest import assert_strict_json
from rmlens._errors import InputError
from rmlens.hub import train
from rmlens.memorization import AuditConfig, audit_rm
from rmlens.rewards import TrainConfig
from test_paired import word_pairs


@pytest.fixture(scope="module")
def trained(tiny_encoder_dir, tmp_path_factory):
    pairs = word_pairs(24, 6)
    cfg = TrainConfig(model=str(tiny_encoder_dir), epochs=2, batch_size=8, lr=5e-3,
                      head_lr=5e-3, device="cpu", max_length=24, eval_fraction=0.25)  # fmt: skip
    out = tmp_path_factory.mktemp("ckpt") / "rm"
    train(pairs, cfg, out=out, quiet=True)
    return pairs, out


def test_one_checkpoint_audit_reads_the_rm_and_removes_each_group(trained, tmp_path, monkeypatch):
    pairs, rm = trained
    out = tmp_path / "audit"
    table = audit_rm(pairs, rm, out=out, quiet=True)
    scores = pd.read_parquet(out / "runs" / "000" / "scores.parquet")
    manifest = json.loads((out / "runs" / "000" / "manifest.json").read_text())
    config = json.loads((out / "config.json").read_text())
    # TM is the RM's own p; TG the p of its group removed; CM their difference
    np.testing.assert_allclose(scores.p, expit(scores.r_chosen - scores.r_rejected), atol=1e-6)
    merged = table.merge(scores, on="id")
    trained_ids = set(manifest["train_ids"])
    inside = merged.id.isin(trained_ids).to_numpy()
    np.testing.assert_allclose(merged.tm[inside], merged.p[inside], atol=1e-9)
    np.testing.assert_allclose(merged.tg[inside], merged.p_cf[inside], atol=1e-9)
    np.testing.assert_allclose(merged.cm, merged.tm - merged.tg, atol=1e-9)
    assert (merged.cm[inside] > 0).mean() > 0.9  # removing a pair's group lowers its p
    # its scores are the saved RM's: rmlens.load_rm gives the same rewards
    from rmlens.hub import load_rm

    r = load_rm(rm, device="cpu").score_pairs(pairs)
    np.testing.assert_allclose(scores.r_chosen, r[0], atol=1e-4)
    summary = json.loads((out / "summary.json").read_text())
    assert "standing" in summary["reliability"]["reason"] and summary["mode_note"] is None
    # how far to trust it, as measured against brute-force retraining on real pairs
    assert "0.47 for the one-checkpoint audit" in summary["reliability"]["reason"]
    assert "Findings page" in summary["checkpoint"]["standing"]
    assert summary["validation"]["pairs_words"].startswith("the RM's own evaluation split")
    # the damping: where the trained pairs' mean TG meets the evaluation pairs' mean p
    assert summary["checkpoint"]["damping_how"].startswith("calibrated on the RM's own")
    held = merged.id.isin(set(manifest["val_ids"])).to_numpy()
    assert held.any()
    assert merged.tg[inside].mean() == pytest.approx(merged.p[held].mean(), abs=1e-9)
    assert config["estimator"] == "paired" and config["checkpoint"]["rm"] == str(rm)
    assert "one checkpoint" in config["estimator_note"]
    # started again: nothing recomputed
    stamp = (out / "runs" / "000" / "manifest.json").stat().st_mtime_ns
    audit_rm(pairs, rm, out=out, quiet=True)
    assert (out / "runs" / "000" / "manifest.json").stat().st_mtime_ns == stamp
    with pytest.raises(InputError, match="another checkpoint, damping or blocks"):
        audit_rm(pairs, rm, out=out, damping=10.0, quiet=True)
    # a newer rmlens words the standing otherwise: the same audit still resumes
    import rmlens.memorization._checkpoint as checkpoint

    monkeypatch.setattr(checkpoint, "STANDING", "measured again on another benchmark")
    audit_rm(pairs, rm, out=out, quiet=True)
    assert (out / "runs" / "000" / "manifest.json").stat().st_mtime_ns == stamp


def test_one_checkpoint_audit_refuses_other_pairs_and_other_rms(trained, tmp_path):
    pairs, rm = trained
    with pytest.raises(InputError, match="not the pairs .* was trained on"):
        audit_rm(pairs.iloc[:-1], rm, out=tmp_path / "a", quiet=True)
    with pytest.raises(InputError, match="no train.json"):
        (tmp_path / "copy").mkdir()
        (tmp_path / "copy" / "rm_config.json").write_text((rm / "rm_config.json").read_text())
        audit_rm(pairs, tmp_path / "copy", out=tmp_path / "d", quiet=True)
    with pytest.raises(InputError, match="neither an rmlens RM folder"):
        audit_rm(pairs, tmp_path, out=tmp_path / "b", quiet=True)
    with pytest.raises(InputError, match="dedupe"):
        audit_rm(pairs, rm, AuditConfig(dedupe="pairs"), out=tmp_path / "c", quiet=True)


def test_cli_memorize_rm_audits_a_folder(trained, tmp_path, monkeypatch, capsys):
    from rmlens.cli import main

    pairs, rm = trained
    data = tmp_path / "pairs.jsonl"
    pairs.to_json(data, orient="records", lines=True)
    out = tmp_path / "audit"
    code = main(["memorize", "--data", str(data), "--rm", str(rm), "--out", str(out),
                 "--quiet"])  # fmt: skip
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert (out / "report.html").is_file()
    assert (out / "memorization.parquet").is_file()
    assert "one checkpoint" in printed.out and "One-checkpoint damping" in printed.out
    assert "One-checkpoint damping" in (out / "report.html").read_text()
    assert assert_strict_json(out) >= 2


def test_rm_kind_reads_old_records_and_toml():
    assert TrainConfig.from_dict({"rm": "implicit"}).rm_kind == "implicit"
    old = AuditConfig.from_dict({"mode": "finetune", "train": {"rm": "implicit", "beta": 0.2}})
    assert old.train.rm_kind == "implicit" and old.train.beta == 0.2
    assert AuditConfig.upgrade({"train": {"rm": "explicit"}}) == {"train": {"rm_kind": "explicit"}}


@pytest.fixture(scope="module")
def classifier_dirs(tiny_causal_dir, tmp_path_factory):
    """A whole causal classifier RM (as TRL's RewardTrainer saves one), and a PEFT LoRA
    adapter on it, both with weights away from their initialisation."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    root = tmp_path_factory.mktemp("classifiers")
    torch.manual_seed(3)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_causal_dir, num_labels=1)
    model.config.pad_token_id = 0
    tokenizer = AutoTokenizer.from_pretrained(tiny_causal_dir)
    model.save_pretrained(root / "whole")
    tokenizer.save_pretrained(root / "whole")
    lora = get_peft_model(model, LoraConfig(task_type="SEQ_CLS", r=4,
                                            target_modules=["q_proj", "v_proj"]))  # fmt: skip
    with torch.no_grad():
        for name, param in lora.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.1)
    lora.peft_config["default"].base_model_name_or_path = str(root / "whole")
    lora.save_pretrained(root / "adapter")
    return root / "whole", root / "adapter"


@pytest.mark.parametrize("which", ["whole", "adapter"])
def test_one_checkpoint_audit_of_a_hugging_face_rm(which, classifier_dirs, tmp_path):
    from rmlens.hub import load_rm

    whole, adapter = classifier_dirs
    folder = whole if which == "whole" else adapter
    pairs = word_pairs(12, 4)
    out = tmp_path / "audit"
    with pytest.warns(Warning, match="not checked"):
        table = audit_rm(pairs, folder, AuditConfig(format="chat", max_length=24), out=out,
                         device="cpu", quiet=True)  # fmt: skip
    scores = pd.read_parquet(out / "runs" / "000" / "scores.parquet").set_index("id")
    if which == "whole":  # its rewards are the classifier's own, as load_rm reads them
        r_c, _ = load_rm(whole).score_pairs(pairs)
        np.testing.assert_allclose(scores.loc[pairs.id, "r_chosen"], r_c, atol=1e-4)
    assert (table.n_in == 1).all() and (table.n_out == 1).all()
    np.testing.assert_allclose(table.cm, table.tm - table.tg, atol=1e-12)
    summary = json.loads((out / "summary.json").read_text())
    assert "checkpoint_pairs_unchecked" in [w["code"] for w in summary["warnings"]]
    assert summary["checkpoint"]["damping_how"].startswith("no evaluation split")
    trained = "LoRA adapters and score" if which == "adapter" else "every weight"
    note = json.loads((out / "config.json").read_text())["estimator_note"]
    assert trained in note
    # without an evaluation split: the benchmark's damping itself, said so everywhere
    from rmlens.memorization._notes import CHECKPOINT_DAMPING

    assert summary["checkpoint"]["damping"] == CHECKPOINT_DAMPING
    assert "the benchmark's value" in note and "calibrated" not in note
    if which == "whole":  # the page of one run: no spread, no held-out row, no verdict
        from rmlens.report import write_report

        page = write_report(out).read_text()
        assert "± 0.000" not in page and "– ± –" not in page
        assert "held out (out)" not in page and "rankings are reliable" not in page
        assert "of the one run" in page and "calibrated on its evaluation split" not in page


def test_frozen_audits_say_their_mode_and_cite_the_transfer_table():
    from rmlens.memorization._notes import mode_note

    note = mode_note(AuditConfig(model="minilm"))
    assert note.startswith("frozen audit") and "'Frozen and fine-tuned'" in note
    assert "0.73 (0.96 corrected) for frozen smollm2-135m" in note
    assert "0.35 (0.48 corrected) for frozen minilm" in note
    # and how far to trust it against brute-force retraining on real pairs (Findings page)
    assert "0.27 for a frozen audit" in note and "as one pair's verdict" in note
    assert mode_note(AuditConfig(mode="finetune")) is None


def test_calibration_at_the_grid_edge_says_so():
    """An RM that scores its evaluation pairs as well as its training pairs leaves no
    damping to calibrate: the largest is kept and named as an edge, not as a measurement."""
    from rmlens.memorization._damping import calibrate_on_held as _calibrated

    p = np.array([0.7, 0.7, 0.7, 0.8])  # pairs 0-2 trained on, pair 3 evaluation
    p_cf = np.array([[0.5, 0.6, 0.69]] * 3 + [[0.8, 0.8, 0.8]])  # CM 0.2, 0.1, 0.01
    fit, held = np.array([0, 1, 2]), np.array([3])
    out, chosen = _calibrated(p, p_cf, fit, held, (1.0, 10.0, 100.0), "given")
    assert chosen["damping_edge"] == "largest" and chosen["damping"] == 100.0
    np.testing.assert_allclose(out, p_cf[:, 2])
    p[3] = 0.6  # mean TM - eval p = 0.1: met inside the grid, no edge
    _, chosen = _calibrated(p, p_cf, fit, held, (1.0, 10.0, 100.0), "given")
    assert "damping_edge" not in chosen and chosen["damping"] == pytest.approx(10.0)


@pytest.fixture(scope="module")
def exported_lora(tiny_causal_dir, tmp_path_factory):
    """A LoRA RM trained by rmlens with an evaluation split, and its export."""
    from rmlens.hub import export_rm

    root = tmp_path_factory.mktemp("exported-ckpt")
    pairs = word_pairs(24, 6)
    cfg = TrainConfig(model=str(tiny_causal_dir), epochs=3, batch_size=8, lr=5e-2,
                      head_lr=5e-2, device="cpu", max_length=40, eval_fraction=0.25)  # fmt: skip
    train(pairs, cfg, out=root / "rm", quiet=True)
    export_rm(root / "rm", root / "hf")
    return pairs, root / "rm", root / "hf"


def test_an_export_is_audited_as_the_rm_folder_it_came_from(exported_lora, tmp_path):
    """The export carries its training record and its LoRA adapter unmerged: the audit of
    the exported folder checks the same training pairs, finds the same evaluation split,
    takes gradients through the adapters and head, and gives the folder's CM."""
    pairs, rm, hf = exported_lora
    record = json.loads((hf / "rmlens_training.json").read_text())
    assert record["data_sha1"] == json.loads((rm / "train.json").read_text())["data_sha1"]
    assert (hf / "rmlens_adapter" / "adapter_config.json").is_file()
    read = {}
    for name, folder in (("rm", rm), ("hf", hf)):
        out = tmp_path / name
        table = audit_rm(pairs, folder, out=out, device="cpu", quiet=True)
        read[name] = (table.set_index("id").loc[pairs.id],
                      json.loads((out / "runs" / "000" / "manifest.json").read_text()),
                      json.loads((out / "summary.json").read_text()),
                      json.loads((out / "config.json").read_text()))  # fmt: skip
        with pytest.raises(InputError, match="not the pairs .* was trained on"):
            audit_rm(pairs.iloc[:-1], folder, out=tmp_path / f"{name}-other", quiet=True)
    (ours, man, summary, config), (theirs, man_hf, summary_hf, config_hf) = read["rm"], read["hf"]
    assert man_hf["val_ids"] == man["val_ids"] and man["val_ids"]  # the same split
    assert man_hf["train_ids"] == man["train_ids"]
    assert summary_hf["checkpoint"]["damping_how"].startswith("calibrated on the RM's own")
    assert summary_hf["checkpoint"]["damping"] == pytest.approx(summary["checkpoint"]["damping"],
                                                                rel=1e-6)  # fmt: skip
    assert "checkpoint_pairs_unchecked" not in [w["code"] for w in summary_hf["warnings"]]
    assert summary_hf["checkpoint"]["training_pairs"].startswith(
        "the pairs of its rmlens_training.json (sha1 " + record["data_sha1"][:12])
    for note in (config["estimator_note"], config_hf["estimator_note"]):
        assert "a Gauss-Newton step through its LoRA adapters and head" in note
    np.testing.assert_allclose(theirs.tm, ours.tm, atol=1e-5)
    np.testing.assert_allclose(theirs.cm, ours.cm, atol=1e-5)
    assert np.abs(ours.cm).max() > 1e-3  # a CM worth comparing


def test_the_last_blocks_are_a_cheaper_reading_of_a_whole_rm(classifier_dirs, tmp_path,
                                                             monkeypatch):  # fmt: skip
    """--checkpoint-blocks K: the gradients of the last K blocks' linear layers and the head,
    in one batched pass (no pair-by-pair backward through every weight)."""
    import rmlens.influence._pair_gradients as pg
    from rmlens.hub._classifier_net import classifier_net
    from rmlens.influence import through_last

    whole, _ = classifier_dirs
    net, *_ = classifier_net(whole, format="chat", max_length=24)
    kept = through_last(net, 1)
    trained = {n for n, p in net.named_parameters() if p.requires_grad}
    last = len(net.body.layers) - 1
    assert kept == len(trained) and "head.weight" in trained
    assert all(n.startswith(f"body.layers.{last}.") or n.startswith("head.") for n in trained)
    assert any("mlp" in n for n in trained) and not any("norm" in n for n in trained)

    def refuse(*args, **kwargs):
        raise AssertionError("pair by pair")

    monkeypatch.setattr(pg, "_pair_by_pair", refuse)
    pairs = word_pairs(12, 4)
    out = tmp_path / "audit"
    with pytest.warns(Warning, match="not checked"):
        table = audit_rm(pairs, whole, AuditConfig(format="chat", max_length=24), out=out,
                         device="cpu", blocks=1, quiet=True)  # fmt: skip
    assert np.isfinite(table.cm).all() and table.cm.abs().max() > 0
    config = json.loads((out / "config.json").read_text())
    assert config["checkpoint"]["blocks"] == 1
    assert "linear layers of its last 1 blocks" in config["estimator_note"]
    summary = json.loads((out / "summary.json").read_text())
    assert "linear layers of its last blocks only" in summary["reliability"]["reason"]
    with pytest.raises(InputError, match="another checkpoint, damping or blocks"):
        audit_rm(pairs, whole, AuditConfig(format="chat", max_length=24), out=out,
                 device="cpu", blocks=2, quiet=True)  # fmt: skip
    with pytest.raises(InputError, match="1 or more"):
        audit_rm(pairs, whole, out=tmp_path / "zero", blocks=0, quiet=True)


def test_quiet_audit_of_an_adapter_prints_the_result_only(classifier_dirs, tmp_path):
    """Under --quiet, the one-checkpoint audit of a PEFT adapter prints its result and its
    real warnings: no library bar, no deprecation warning (a fresh process, as a user runs
    it)."""
    import subprocess
    import sys

    _, adapter = classifier_dirs
    data = tmp_path / "pairs.jsonl"
    word_pairs(12, 4).to_json(data, orient="records", lines=True)
    args = ["memorize", "--data", str(data), "--rm", str(adapter), "--format", "chat",
            "--max-length", "24", "--out", str(tmp_path / "a"), "--quiet"]  # fmt: skip
    done = subprocess.run([sys.executable, "-c", "import sys; from rmlens.cli import main; "
                           f"sys.exit(main({args!r}))"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Memorization audit" in done.stdout
    for noise in ("Writing", "it/s", "FutureWarning", "DeprecationWarning"):
        assert noise not in done.stderr, done.stderr
    # without --quiet: rmlens's status lines and its bar, not transformers' report of the
    # score layer the adapter brings, nor of its tensor-parallel plan
    args = [*args[:-2], str(tmp_path / "b")]
    done = subprocess.run([sys.executable, "-c", "import sys; from rmlens.cli import main; "
                           f"sys.exit(main({args!r}))"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "gradients" in done.stderr and "through its LoRA adapters" in done.stderr
    for noise in ("LOAD REPORT", "not sharded", "newly initialized"):
        assert noise not in done.stderr, done.stderr


def test_an_rm_at_chance_gets_no_category_and_advice_about_its_own_training(
        classifier_dirs, tmp_path):  # fmt: skip
    """A random classifier RM (trained elsewhere) sits at chance on the pairs: every pair's
    category is withheld, with the reason first among the warnings, and the not-learned
    advice names what to check, not rmlens's defaults."""
    from rmlens.rewards._metrics import chance_band

    whole, _ = classifier_dirs
    pairs = word_pairs(16, 4)
    out = tmp_path / "audit"
    with pytest.warns(Warning):
        table = audit_rm(pairs, whole, AuditConfig(format="chat", max_length=24), out=out,
                         device="cpu", quiet=True)  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    trained = summary["rm_quality"]["runs"][0]["in_train"]
    assert abs(trained["accuracy"] - 0.5) <= chance_band(trained["n"])  # at chance
    assert set(table.category) <= {"withheld", "undefined"} and "withheld" in set(table.category)
    assert summary["category_order"] == ["undefined", "withheld"]
    assert summary["counts"]["withheld"] == (table.category == "withheld").sum()
    assert summary["categories_withheld"].startswith("categories withheld: the RM did not learn")
    assert summary["most_memorized"] == []
    codes = [w["code"] for w in summary["warnings"]]
    assert codes[0] == "categories_withheld" and "not_learned" in codes
    advice = next(w["message"] for w in summary["warnings"] if w["code"] == "not_learned")
    assert "training logs" in advice and "(now" not in advice
    np.testing.assert_allclose(table.cm, table.tm - table.tg, atol=1e-12)  # still reported
    from rmlens.report import write_report

    page = write_report(out).read_text()
    assert "No pair has a category: they are withheld" in page
    assert "Largest CM (categories withheld)" in page
    assert page.index("categories withheld: the RM did not learn") < page.index("Estimator")


def test_eval_pairs_calibrate_an_rm_from_elsewhere(classifier_dirs, tmp_path, capsys):
    """`memorize --rm --eval-data`: the damping is calibrated on pairs the RM never saw, as
    on an rmlens RM's evaluation split; they are scored, never removed, and have no TM, TG
    or CM. Without them the audit says CM is uncalibrated."""
    from rmlens.cli import main

    _, adapter = classifier_dirs
    pairs = word_pairs(24, 6)
    trained, held = pairs.iloc[:16], pairs.iloc[16:].assign(user_id="v")
    data, evals = tmp_path / "train.jsonl", tmp_path / "eval.jsonl"
    trained.to_json(data, orient="records", lines=True)
    held.to_json(evals, orient="records", lines=True)
    out = tmp_path / "a"
    argv = ["memorize", "--data", str(data), "--rm", str(adapter), "--format", "chat",
            "--max-length", "24", "--out", str(out), "--quiet", "--no-report"]  # fmt: skip
    assert main([*argv, "--eval-data", str(evals)]) == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    how = summary["checkpoint"]["damping_how"]
    assert how.startswith("calibrated on the evaluation pairs given (`eval_data`), 8 pairs")
    assert summary["validation"]["used"] and "8 pairs" in summary["validation"]["pairs_words"]
    assert summary["rm_quality"]["runs"][0]["validation"]["n"] == 8
    assert "checkpoint_uncalibrated" not in [w["code"] for w in summary["warnings"]]
    table = pd.read_parquet(out / "memorization.parquet").set_index("id")
    assert table.loc[held.id, "cm"].isna().all() and table.loc[trained.id, "cm"].notna().all()
    assert (table.loc[held.id, "category"] == "undefined").all()
    assert json.loads((out / "config.json").read_text())["checkpoint"]["eval_pairs"] == 8

    capsys.readouterr()
    assert main([*argv[:-4], "--out", str(tmp_path / "b"), "--quiet", "--no-report"]) == 0
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    uncalibrated = [w for w in summary["warnings"] if w["code"] == "checkpoint_uncalibrated"]
    assert uncalibrated and "--eval-data" in capsys.readouterr().err

    both = tmp_path / "both.jsonl"
    pairs.iloc[10:].to_json(both, orient="records", lines=True)
    assert main([*argv[:-4], "--out", str(tmp_path / "c"), "--eval-data", str(both),
                 "--quiet"]) == 2  # fmt: skip
    assert "also in the pairs the RM was trained on" in capsys.readouterr().err


def test_a_whole_rm_audit_times_its_readings_before_it_starts(classifier_dirs, tmp_path,
                                                              caplog):  # fmt: skip
    """Before the gradients of a merged or full RM, the console says what every weight costs
    and what the cheaper readings are, measured on the first pairs."""
    import logging

    whole, _ = classifier_dirs
    with caplog.at_level(logging.INFO, logger="rmlens"), pytest.warns(Warning):
        audit_rm(word_pairs(12, 4), whole, AuditConfig(format="chat", max_length=24),
                 out=tmp_path / "a", device="cpu", quiet=False)  # fmt: skip
    said = [r.getMessage() for r in caplog.records if "backward pass per pair" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in caplog.records]
    assert "for 12 pairs" in said[0] and "s per pair, measured" in said[0]
    assert "--checkpoint-blocks 8 reads the last 8 blocks in about" in said[0]
    assert "save the LoRA adapter unmerged" in said[0]


def test_a_bf16_reading_agrees_with_the_classifier_to_bf16_noise_not_to_another_pooling(
        tmp_path):  # fmt: skip
    """In bf16 the net may differ from the classifier's fp32 pass by bf16's noise (a share of
    the rewards' spread); a difference the size of the spread (another pooling) is refused."""
    from rmlens.hub._classifier_net import check_agreement

    reference = np.random.default_rng(0).normal(0, 0.3, (50, 2))
    noise = reference + 0.2 * reference.std()  # a shift a bf16 reading of SmolLM2 shows
    check_agreement(tmp_path, noise, reference, "bf16")
    with pytest.raises(InputError, match="away from its own forward pass"):
        check_agreement(tmp_path, noise, reference, "fp32")
    with pytest.raises(InputError, match="away from its own forward pass"):
        check_agreement(tmp_path, reference[::-1], reference, "bf16")  # other tokens' rewards
