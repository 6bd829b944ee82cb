"""`rmlens evaluate` on an experiment directory of a tiny random encoder: ensemble, files,
cache reuse by probes, bad input."""

import json

import numpy as np
import pandas as pd
import pytest

from conftest import assert_strict_json
from rmlens.cli import main
from rmlens.evaluation import Probe, run_probes
from rmlens.hub import load_rm
from rmlens.hub._ensemble import member_pair_scores
from rmlens.memorization import AuditConfig, audit
from rmlens.rewards import FrozenHeadTrainer, HeadConfig
from rmlens.rewards._metrics import pairwise_accuracy

GOOD = ["good", "great", "help", "answer", "sure", "yes"]
BAD = ["bad", "worst", "hate", "never", "no", "sorry"]


def make_pairs(n: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "id": [f"p{i:03d}" for i in range(n)],
            "prompt": [f"what is the {rng.choice(['cat', 'dog', 'sun'])} ?" for _ in range(n)],
            "chosen": [" ".join(rng.choice(GOOD, 4)) + "." for _ in range(n)],
            "rejected": [" ".join(rng.choice(BAD, 4)) + "." for _ in range(n)],
            "user_id": [f"u{i % 5}" for i in range(n)],
            "margin": [float(i % 3) for i in range(n)],
        }
    )


@pytest.fixture(scope="module")
def experiment(tiny_encoder_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("evaluate")
    pairs = make_pairs()
    data = root / "pairs.jsonl"
    pairs.to_json(data, orient="records", lines=True)
    trainer = FrozenHeadTrainer(model=str(tiny_encoder_dir), cache_dir=root / "cache")
    head = HeadConfig(epochs=5, batch_size=16, patience=0)  # no validation: in or out
    config = AuditConfig(runs=5, folds=5, n_boot=20, head=head)
    audit(pairs, config, out=root / "exp", trainer=trainer, quiet=True)
    return root, data, pairs


@pytest.fixture(autouse=True)
def cache_in_tmp(experiment, monkeypatch):
    monkeypatch.setenv("RMLENS_CACHE", str(experiment[0] / "cache"))


def test_cli_on_an_experiment_directory(experiment, capsys):
    root, data, pairs = experiment
    out = root / "eval"
    argv = ["evaluate", "--rm", str(root / "exp"), "--data", str(data), "--out", str(out),
            "--probes", "pad_filler,refusal", "--calibrate-frac", "0.5", "--by", "user_id",
            "--quiet"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "RM evaluation: 40 pairs, cross-fitted" in printed
    assert "held-out accuracy (cross-fitted)" in printed and "in-sample accuracy" in printed
    files = ("metrics.json", "probes.parquet", "scores.parquet", "reliability.png",
             "rewards.png", "probes.png")  # fmt: skip
    for name in files:
        assert (out / name).stat().st_size > 0, name
    assert f"({', '.join(files)}, evaluate.toml)" in " ".join(printed.split())  # every file
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_pairs"] == 40 and 0 <= metrics["ece"] <= 1 and 0 <= metrics["brier"] <= 1
    assert metrics["cross_fitted"]["runs_per_pair"] == 1.0  # 5 folds: one run held each out
    assert "ensemble" not in metrics  # member figures would mix in-sample runs
    assert metrics["in_train"]["members_per_pair"] == 4.0
    assert metrics["held_out"]["members_per_pair"] == 1.0
    assert metrics["accuracy"] == metrics["held_out"]["accuracy"]  # the headline: held out
    assert set(metrics["by"]["user_id"]) == {f"u{i}" for i in range(5)}
    assert metrics["temperature"]["n_fit"] == 20 and "margin_spearman" in metrics
    probes = pd.read_parquet(out / "probes.parquet")
    assert list(probes[["probe", "side"]].itertuples(index=False, name=None)) == [
        ("pad_filler", "chosen"), ("pad_filler", "rejected"),
        ("refusal", "chosen"), ("refusal", "rejected"),
    ]  # fmt: skip
    assert (probes.n == 40).all()
    # each pair's reward is that of the run that held it out, as the audit scored it
    exp = root / "exp" / "runs"
    runs = [pd.read_parquet(exp / f"{r:03d}" / "scores.parquet") for r in range(5)]
    trained = [set(json.loads((exp / f"{r:03d}" / "manifest.json").read_text())["train_ids"])
               for r in range(5)]  # fmt: skip
    held_by = [next(r for r in range(5) if i not in trained[r]) for i in pairs.id]
    expected = [runs[r].r_chosen[k] for k, r in enumerate(held_by)]
    scores = pd.read_parquet(out / "scores.parquet")
    np.testing.assert_allclose(scores.r_chosen, expected, rtol=1e-5, atol=1e-6)
    d = np.array([runs[r].r_chosen[k] - runs[r].r_rejected[k] for k, r in enumerate(held_by)])
    assert metrics["accuracy"] == pytest.approx(np.mean((d > 0) + 0.5 * (d == 0)))
    assert assert_strict_json(out) >= 1


def test_members_share_one_backbone_and_probes_encode_only_edited_texts(experiment, monkeypatch):
    root, _, pairs = experiment
    ensemble = load_rm(root / "exp", device="cpu")
    assert len({id(m.backbone) for m in ensemble.members}) == 1
    rc, rr, kept = member_pair_scores(ensemble, pairs)
    assert rc.shape == (5, 40) and kept.all()
    import rmlens.backbones._featurize as featurize_module

    encoded = []
    original = featurize_module.encode_ids

    def counting(backbone, seqs, **kw):
        encoded.append(len(seqs))
        return original(backbone, seqs, **kw)

    monkeypatch.setattr(featurize_module, "encode_ids", counting)
    kw = {"sides": ["rejected"], "r_chosen": rc.mean(0), "r_rejected": rr.mean(0)}
    thanks = Probe("thanks", "append thanks", lambda t: t + " thanks please")
    run_probes(ensemble, pairs, [thanks], **kw)
    n_unique = len(set(zip(pairs.prompt, pairs.rejected)))
    assert sum(encoded) == n_unique
    encoded.clear()
    table = run_probes(ensemble, pairs, [thanks], **kw)
    assert sum(encoded) == 0 and table.n.item() == 40


def test_cli_single_rm_json(experiment, capsys):
    root, data, _ = experiment
    argv = ["evaluate", "--rm", str(root / "exp" / "runs" / "000" / "rm"), "--data", str(data),
            "--out", str(root / "single"), "--probes", "none", "--json", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["rm"]["class"] == "ExplicitHeadRM" and metrics["probes"] == []
    assert "ensemble" not in metrics and metrics["n_pairs"] == 40


@pytest.mark.parametrize(
    "change, message",
    [
        ({"--rm": "missing-dir/nope/x"}, "no such file"),
        ({"--probes": "refusal,nope"}, "unknown probe 'nope'"),
        ({"--data": "missing.jsonl"}, "missing.jsonl"),
        ({"--calibrate-frac": "1.5"}, "--calibrate-frac must be a float in [0, 1), got 1.5"),
        ({"--by": "annotator"}, "no column 'annotator'"),
        ({"--calibrate": "spline"}, "--calibrate must be 'length' or left unset, got spline"),
        ({"--lowess-frac": "0"}, "--lowess-frac must be a float in (0, 1], got 0"),
        ({"--probe-pairs": "lots"}, "--probe-pairs must be an int >= 0 or 'all', got lots"),
        ({"--probe-pairs": "-3"}, "--probe-pairs must be an int >= 0 or 'all', got -3"),
    ],
)
def test_cli_bad_input_exits_2(experiment, capsys, change, message):
    root, data, _ = experiment
    args = {"--rm": str(root / "exp"), "--data": str(data), "--out": str(root / "bad")}
    args.update(change)
    argv = ["evaluate", "--quiet", "--probes", "none"] + [x for kv in args.items() for x in kv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err
    assert len(err.strip().splitlines()) == 1  # one line, no traceback


def test_cli_length_calibration(experiment, capsys):
    root, data, pairs = experiment
    out = root / "calibrated"
    argv = ["evaluate", "--rm", str(root / "exp"), "--data", str(data), "--out", str(out),
            "--calibrate", "length", "--lowess-frac", "0.6", "--probes", "pad_filler",
            "--quiet"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "length-calibrated" in printed and "Spearman(reward, length) after" in printed
    metrics = json.loads((out / "metrics.json").read_text())
    block = metrics["posthoc_calibration"]
    assert {"method", "unit", "frac", "corr_before", "corr_after", "accuracy_before",
            "accuracy_after"} <= set(block)  # fmt: skip
    assert (block["method"], block["unit"], block["frac"]) == ("length", "characters", 0.6)
    scores = pd.read_parquet(out / "scores.parquet")
    assert block["accuracy_before"] == pytest.approx(
        pairwise_accuracy(scores.r_chosen, scores.r_rejected)
    )
    assert metrics["accuracy"] == block["accuracy_after"] == pytest.approx(
        pairwise_accuracy(scores.r_chosen_calibrated, scores.r_rejected_calibrated)
    )
    assert scores.len_chosen.tolist() == pairs.chosen.str.len().tolist()
    assert abs(block["corr_after"]) < 0.2
    assert 'calibrate = "length"' in (out / "evaluate.toml").read_text()
    assert (out / "length.png").stat().st_size > 0


def test_cli_on_a_sequence_classification_model(experiment, tiny_encoder_dir, tmp_path):
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    root, data, _ = experiment
    torch.manual_seed(0)
    config = BertConfig.from_pretrained(tiny_encoder_dir, num_labels=1)
    BertForSequenceClassification(config).save_pretrained(tmp_path / "seqcls")
    AutoTokenizer.from_pretrained(tiny_encoder_dir).save_pretrained(tmp_path / "seqcls")
    out = tmp_path / "out"
    argv = ["evaluate", "--rm", str(tmp_path / "seqcls"), "--data", str(data), "--out", str(out),
            "--probes", "compliance", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["rm"]["class"] == "SequenceClassifierRM" and metrics["n_pairs"] == 40
    assert pd.read_parquet(out / "probes.parquet").n.tolist() == [40, 40]


def test_probes_score_each_pair_with_its_own_members(experiment):
    """Cross-fitted probes: one-hot member weights give exactly that member's effects."""
    root, _, pairs = experiment
    ensemble = load_rm(root / "exp", device="cpu")
    rc, rr, _ = member_pair_scores(ensemble, pairs)
    pick = np.arange(len(pairs)) % 5  # pair i scored by member i % 5 alone
    weights = np.eye(5)[:, pick]
    thanks = Probe("thanks", "append thanks", lambda t: t + " thanks please")
    from rmlens.evaluation._probes import probe_effects

    effects = probe_effects(ensemble, pairs, thanks, "chosen", member_weights=weights,
                            r_chosen=rc[pick, np.arange(40)], r_rejected=rr[pick, np.arange(40)])
    for m in range(5):
        rows = pick == m
        own = probe_effects(ensemble.members[m], pairs[rows].reset_index(drop=True), thanks,
                            "chosen")
        np.testing.assert_allclose(effects["shift"].to_numpy()[rows], own["shift"], atol=1e-5)


def test_cli_probe_pairs_a_number_or_all(experiment, capsys):
    root, data, _ = experiment
    out = root / "sampled"
    argv = ["evaluate", "--rm", str(root / "exp"), "--data", str(data), "--out", str(out),
            "--probes", "refusal", "--quiet"]  # fmt: skip
    assert main([*argv, "--probe-pairs", "10"]) == 0
    assert pd.read_parquet(out / "probes.parquet").n.tolist() == [10, 10]
    assert "probe_pairs = 10" in (out / "evaluate.toml").read_text()
    assert main([*argv, "--probe-pairs", "all"]) == 0
    assert pd.read_parquet(out / "probes.parquet").n.tolist() == [40, 40]
    assert 'probe_pairs = "all"' in (out / "evaluate.toml").read_text()
    assert main([*argv, "--config", str(out / "evaluate.toml")]) == 0  # read back: all
    assert json.loads((out / "metrics.json").read_text())["config"]["probe_pairs"] == "all"


class Alone:
    """A member scored by itself: its own encoding, no cache, nothing shared (the old way)."""

    def __init__(self, member):
        self.member = member

    def score(self, prompts, responses):
        return self.member.score(prompts, responses)


def test_calibrated_ensemble_encodes_each_text_once_for_all_members(experiment, monkeypatch,
                                                                   tmp_path):  # fmt: skip
    """--calibrate length: the pairs' and the probes' texts are encoded once for the five
    members (through the cache), whether the ensemble scores its own pairs (cross-fitted)
    or others."""
    from collections import Counter

    import rmlens.backbones._featurize as featurize_module
    from rmlens.backbones._tokenize import encode_pair_text
    from rmlens.evaluation import PROBES, evaluate

    root, _, pairs = experiment
    ensemble = load_rm(root / "exp", device="cpu")
    bb, fmt = ensemble.members[0].backbone, ensemble.members[0].format
    encoded, original = Counter(), featurize_module.encode_ids

    def counting(backbone, seqs, **kw):
        encoded.update(tuple(s) for s in seqs)
        return original(backbone, seqs, **kw)

    monkeypatch.setattr(featurize_module, "encode_ids", counting)
    texts = [(p, r) for side in ("chosen", "rejected") for p, r in zip(pairs.prompt, pairs[side])]
    texts += [(p, PROBES[name].apply(r)) for name in ("pad_filler", "refusal")
              for p, r in texts[:]]  # fmt: skip
    needed = {tuple(encode_pair_text(bb.tokenizer, p, r, bb.max_length, format=fmt))
              for p, r in texts}  # fmt: skip
    for k, ids in enumerate((pairs.id, "new-" + pairs.id)):  # own pairs, then other pairs
        monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / str(k)))  # a cold cache
        encoded.clear()
        metrics = evaluate(pairs.assign(id=ids), rm=ensemble, calibrate="length",
                           probes="pad_filler,refusal", quiet=True)  # fmt: skip
        assert ("cross_fitted" in metrics) == (k == 0)
        assert set(encoded) == needed and max(encoded.values()) == 1  # each text once


def test_calibrated_ensemble_scores_as_its_members_one_by_one(experiment):
    """The shared encoding changes no reward: the calibrated ensemble's rewards of edited
    texts, and evaluate's figures, equal those of the members scored alone (to 1e-6)."""
    from rmlens.evaluation import PROBES, LengthCalibratedRM, LengthCalibrator, evaluate
    from rmlens.evaluation._posthoc import response_lengths
    from rmlens.evaluation._probes import _member_rewards, _rewards
    from rmlens.hub import EnsembleRM

    root, _, pairs = experiment
    ensemble = load_rm(root / "exp", device="cpu")
    rc, rr, _ = member_pair_scores(ensemble, pairs)
    responses = list(pairs.chosen) + list(pairs.rejected)
    calibrator = LengthCalibrator().fit(np.r_[rc.mean(0), rr.mean(0)],
                                        response_lengths(responses))  # fmt: skip
    scorer = LengthCalibratedRM(ensemble, calibrator)
    edited = [PROBES["pad_filler"].apply(r) for r in pairs.rejected]
    lengths = response_lengths(edited)
    alone = np.stack([m.score(pairs.prompt, edited) for m in ensemble.members])  # (5, 40)
    shared = _rewards(scorer, _member_rewards(scorer, pairs.prompt, edited), edited)
    np.testing.assert_allclose(shared, calibrator.transform(alone.mean(0), lengths), atol=1e-6)
    np.testing.assert_array_equal(shared, scorer.score(pairs.prompt, edited))
    weights = np.eye(5)[:, np.arange(40) % 5]  # pair i scored by member i % 5 alone
    with_weights = _rewards(scorer, _member_rewards(scorer, pairs.prompt, edited), edited, weights)
    np.testing.assert_allclose(with_weights,
                               calibrator.transform((weights * alone).sum(0), lengths),
                               atol=1e-6)  # fmt: skip
    unshared = EnsembleRM([Alone(m) for m in ensemble.members], names=ensemble.names,
                          train_ids=ensemble.train_ids, val_ids=ensemble.val_ids)  # fmt: skip
    for ids in (pairs.id, "new-" + pairs.id):  # cross-fitted, then every member on every pair
        kw = {"calibrate": "length", "probes": "pad_filler,refusal", "quiet": True}
        a = evaluate(pairs.assign(id=ids), rm=ensemble, **kw)
        b = evaluate(pairs.assign(id=ids), rm=unshared, **kw)
        assert a["accuracy"] == b["accuracy"]
        assert a["posthoc_calibration"] == pytest.approx(b["posthoc_calibration"], abs=1e-6)
        for x, y in zip(a["probes"], b["probes"], strict=True):
            assert x == pytest.approx(y, abs=1e-6)


def test_evaluate_into_the_audit_keeps_its_config_toml(experiment, tmp_path):
    # `evaluate --out AUDIT` must not replace the audit's own settings (which --config reads
    # back into `rmlens memorize`): its settings go to evaluate.toml.
    import shutil

    root, data, _ = experiment
    exp = shutil.copytree(root / "exp", tmp_path / "exp")
    (exp / "config.toml").write_text('runs = 5\nfolds = 5\n')
    argv = ["evaluate", "--rm", str(exp), "--data", str(data), "--out", str(exp),
            "--probes", "refusal", "--probe-pairs", "10", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    assert (exp / "config.toml").read_text() == 'runs = 5\nfolds = 5\n'
    assert "probe_pairs = 10" in (exp / "evaluate.toml").read_text()


def test_probes_score_every_edited_text_in_one_length_sorted_pass(experiment, monkeypatch):
    # All (probe, side) edits go to the encoder together (one length-sorted order, so batches
    # pad far less than one probe at a time), in passes of at most SCORE_TEXTS texts; the
    # figures are those of each probe scored on its own.
    import rmlens.backbones._featurize as featurize_module
    import rmlens.evaluation._probes as probes_module
    from rmlens.evaluation import PROBES, probe_effects
    from rmlens.evaluation._probes import summarize_effects

    root, _, pairs = experiment
    ensemble = load_rm(root / "exp", device="cpu")
    rc, rr, _ = member_pair_scores(ensemble, pairs)
    kw = {"r_chosen": rc.mean(0), "r_rejected": rr.mean(0)}
    calls, original = [], featurize_module.encode_ids

    def counting(backbone, seqs, **k):
        calls.append(len(seqs))
        return original(backbone, seqs, **k)

    monkeypatch.setattr(featurize_module, "encode_ids", counting)
    monkeypatch.setenv("RMLENS_CACHE", str(root / "cache-one-pass"))  # cold: all encoded
    names = ["pad_filler", "refusal", "markdown"]
    table = run_probes(ensemble, pairs, names, **kw)
    assert len(calls) == 1 and calls[0] == 6 * 40  # 3 probes x 2 sides, one pass
    for row in table.itertuples():
        alone = summarize_effects(probe_effects(ensemble, pairs, PROBES[row.probe], row.side,
                                                **kw), row.probe, row.side)  # fmt: skip
        assert row.mean_shift == pytest.approx(alone["mean_shift"], abs=1e-6)
        assert (row.n, row.flip_rate) == (alone["n"], pytest.approx(alone["flip_rate"]))
    calls.clear()
    monkeypatch.setattr(probes_module, "SCORE_TEXTS", 100)
    monkeypatch.setenv("RMLENS_CACHE", str(root / "cache-passes"))
    again = run_probes(ensemble, pairs, names, **kw)
    assert calls == [80, 80, 80]  # a pass stops before SCORE_TEXTS: both sides of a probe
    pd.testing.assert_frame_equal(again.drop(columns=["mean_shift", "std_shift"]),
                                  table.drop(columns=["mean_shift", "std_shift"]))  # fmt: skip
    np.testing.assert_allclose(again.mean_shift, table.mean_shift, atol=1e-6)
