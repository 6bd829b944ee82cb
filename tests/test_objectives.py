"""Training objectives against shortcut memorization: losses by hand, planted behaviour, CLI."""

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import length_pairs
from rmlens.attribution import bias_features
from rmlens.cli import main
from rmlens.rewards import FrozenHeadTrainer, HeadConfig
from rmlens.rewards.losses import ObjectiveModule, PairExtras
from rmlens.rewards.objectives import (
    GroupDRO,
    LabelSmoothing,
    ProductOfExperts,
    Reweight,
    bt,
)

label_smoothing = LabelSmoothing.loss
poe = ProductOfExperts.loss
reweight_weights = Reweight.weights
dro_weights = GroupDRO.step
fit_bias_model = Reweight.fit_bias_model


def softplus(x: float) -> float:
    return math.log1p(math.exp(x))


def test_bt_label_smoothing_and_poe_against_hand_values():
    d = torch.tensor([0.0, 1.0, -2.0])
    assert bt(d).tolist() == pytest.approx([math.log(2), softplus(-1), softplus(2)])
    assert bt(d, torch.tensor([1.0, 1.0, 0.0])).tolist() == pytest.approx(
        [softplus(1), math.log(2), softplus(2)]
    )
    # (1 - eps) * -log sigmoid(d) + eps * -log sigmoid(-d), eps = 0.1, d = 2
    got = label_smoothing(torch.tensor([2.0]), 0.1).item()
    assert got == pytest.approx(0.9 * softplus(-2) + 0.1 * softplus(2))
    assert label_smoothing(d, 0.0).tolist() == pytest.approx(bt(d).tolist())
    # a smoothed loss is minimal at sigmoid(d) = 1 - eps, not at d -> infinity
    grid = torch.linspace(0, 6, 601)
    best = grid[label_smoothing(grid, 0.1).argmin()].item()
    assert best == pytest.approx(math.log(0.9 / 0.1), abs=0.02)
    assert poe(torch.tensor([0.5]), torch.tensor([1.0])).item() == pytest.approx(softplus(-1.5))


def test_reweight_weights_by_hand_and_uninformative_bias():
    # 1 - sigmoid(0) = 1/2, 1 - sigmoid(log 3) = 1/4; normalized to mean 1: 4/3, 2/3
    assert reweight_weights(np.array([0.0, math.log(3)]), 1.0) == pytest.approx([4 / 3, 2 / 3])
    assert reweight_weights(np.array([0.0, math.log(3)]), 2.0) == pytest.approx([1.6, 0.4])
    assert reweight_weights(np.array([0.0, math.log(3)]), 0.0) == pytest.approx([1.0, 1.0])
    rng = np.random.default_rng(0)
    # a bias feature independent of the labels: the bias model is flat, every weight ~ 1
    dphi = rng.normal(size=(4000, 2)) * rng.choice([-1, 1], size=(4000, 1))
    train = PairExtras(dphi=torch.as_tensor(dphi, dtype=torch.float32))
    objective = ObjectiveModule("reweight", train=train)
    assert np.abs(objective.bias_coef_).max() < 0.1
    assert np.abs(objective.weights_ - 1).max() < 0.15
    constant = ObjectiveModule("reweight", train=PairExtras(dphi=torch.zeros(10, 3)))
    assert constant.weights_ == pytest.approx(np.ones(10))


def test_bias_model_recovers_a_planted_coefficient():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(20000, 1))
    wins = rng.random(20000) < 1 / (1 + np.exp(-1.5 * x[:, 0]))
    dphi = np.where(wins[:, None], x, -x)  # chosen minus rejected
    assert fit_bias_model(dphi, np.ones(1))[0] == pytest.approx(1.5, abs=0.1)


def test_dro_step_by_hand_and_weights_move_toward_the_worst_group():
    both = torch.tensor([True, True])
    q = dro_weights(torch.tensor([0.5, 0.5]), torch.tensor([1.0, 2.0]), both, 1.0)
    e = math.e
    assert q.tolist() == pytest.approx([1 / (1 + e), e / (1 + e)])
    absent = dro_weights(torch.tensor([0.5, 0.5]), torch.tensor([1.0, 9.0]),
                         torch.tensor([True, False]), 1.0)  # fmt: skip
    assert absent.tolist() == pytest.approx([e / (e + 1), 1 / (e + 1)])
    # group 0 (80% of pairs) prefers feature 0, group 1 prefers feature 1
    rng = np.random.default_rng(0)
    n = 1000
    group = (np.arange(n) % 5 == 0).astype(int)
    xa, xb = rng.normal(size=(n, 4)), rng.normal(size=(n, 4))
    score = np.where(group == 0, xa[:, 0] - xb[:, 0], xa[:, 1] - xb[:, 1])
    xc = np.where((score > 0)[:, None], xa, xb)
    xr = np.where((score > 0)[:, None], xb, xa)
    # one rule for both groups, but 30% of group 1's labels flipped: its loss stays higher,
    # so its weight grows (measured: q = 0.61 after 10 epochs)
    one_rule = xa[:, 0] > xb[:, 0]
    flip = (group == 1) & (rng.random(n) < 0.3)
    wins = one_rule ^ flip
    nc, nr = np.where(wins[:, None], xa, xb), np.where(wins[:, None], xb, xa)
    cfg = HeadConfig(objective="group_dro", epochs=10, patience=0, dro_step=0.5)
    q = FrozenHeadTrainer(cfg).fit_features(nc, nr, groups=group).head_.objective_.q
    assert q[1] > 0.57
    worst = {}
    for name in ("bt", "group_dro"):
        cfg = HeadConfig(objective=name, epochs=60, patience=0, dro_step=0.05)
        rm = FrozenHeadTrainer(cfg).fit_features(xc, xr, groups=group).head_
        d = rm.score_features(xc) - rm.score_features(xr)
        worst[name] = min((d[group == g] > 0).mean() for g in (0, 1))
    assert worst["group_dro"] > worst["bt"] + 0.05  # measured: 0.645 -> 0.76


def length_decides(n: int = 2000, seed: int = 0):
    """Pairs whose label is drawn from sigmoid(2 * (length_a - length_b)) alone; the
    backbone features carry the length (column 0) and noise."""
    rng = np.random.default_rng(seed)
    ha, hb = rng.normal(size=(n, 8)), rng.normal(size=(n, 8))
    wins = rng.random(n) < 1 / (1 + np.exp(-2 * (ha[:, 0] - hb[:, 0])))
    xc = np.where(wins[:, None], ha, hb)
    xr = np.where(wins[:, None], hb, ha)
    return xc, xr, (xc[:, 0] - xr[:, 0])[:, None]


def test_poe_leaves_the_main_rm_near_zero_when_the_bias_decides():
    xc, xr, dphi = length_decides()
    val = (xc[1600:], xr[1600:], None, dphi[1600:])
    d = {}
    for name in ("bt", "poe"):
        rm = FrozenHeadTrainer(HeadConfig(objective=name, epochs=100, patience=5)).fit_features(
            xc[:1600], xr[:1600], bias=dphi[:1600], validation=val
        ).head_
        d[name] = np.abs(rm.score_features(xc) - rm.score_features(xr)).mean()
        if name == "poe":
            assert rm.objective_.describe()["bias_weights"][0] == pytest.approx(2.0, abs=0.3)
    assert d["bt"] > 0.5
    assert d["poe"] < 0.1 * d["bt"]


def test_objective_validation_loss_and_missing_inputs():
    d = torch.tensor([1.0, -1.0, 2.0, 0.0])
    groups = PairExtras(group=torch.tensor([0, 0, 1, 1]))
    dro = ObjectiveModule("group_dro", train=groups)
    worst = max((softplus(-1) + softplus(1)) / 2, (softplus(-2) + math.log(2)) / 2)
    assert dro.validation_loss(d, groups) == pytest.approx(worst)
    smooth = ObjectiveModule("label_smoothing", smoothing=0.2)
    assert smooth(d, PairExtras()).item() == pytest.approx(label_smoothing(d, 0.2).mean().item())
    with pytest.raises(ValueError, match="bias features"):
        ObjectiveModule("poe")
    with pytest.raises(ValueError, match="group"):
        ObjectiveModule("group_dro")
    with pytest.raises(ValueError, match="bias features"):
        FrozenHeadTrainer(HeadConfig(objective="reweight", epochs=1)).fit_features(
            np.ones((3, 2)), np.zeros((3, 2))
        )


def test_bias_features_by_hand():
    pairs = pd.DataFrame({
        "prompt": ["q", "q", "q"],
        "chosen": ["Sure, here it is: one two three", "I can't help with that.", "a b"],
        "rejected": ["no", "Certainly! Here is the answer.", "a b c d"],
        "chosen_model": ["human", "bart", "human"],
        "rejected_model": ["bart", "human", "bart-dpr"],
    })  # fmt: skip
    bias = bias_features(pairs, ["len_words", "refusal", "model"])
    assert list(bias.columns) == [
        "len_words", "refusal", "model=bart", "model=bart-dpr", "model=human"
    ]  # fmt: skip
    assert bias.len_words.tolist() == [6.0, 0.0, -2.0]  # 7 - 1, 5 - 5, 2 - 4 words
    assert bias.refusal.tolist() == [0.0, 1.0, 0.0]
    assert bias["model=human"].tolist() == [1.0, -1.0, 1.0]
    assert bias["model=bart-dpr"].tolist() == [0.0, 0.0, -1.0]
    without = bias_features(pairs.drop(columns=["chosen_model", "rejected_model"]),
                            ["len_words", "model"])  # fmt: skip
    assert list(without.columns) == ["len_words"]
    assert "model" in without.attrs["skipped"]


def test_cli_memorize_with_objectives(tiny_encoder_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "pairs.jsonl"
    length_pairs().to_json(data, orient="records", lines=True)
    base = ["memorize", "--data", str(data), "--model", str(tiny_encoder_dir), "--runs", "5",
            "--head", "linear", "--epochs", "3", "--quiet", "--no-report"]  # fmt: skip
    out = tmp_path / "poe"
    code = main([*base, "--out", str(out), "--objective", "poe", "--bias-features",
                 "len_words,model"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert "bias feature model left out" in capsys.readouterr().err
    manifest = json.loads((out / "runs" / "000" / "manifest.json").read_text())
    assert manifest["metrics"]["objective"] == "poe"
    assert set(manifest["metrics"]["bias_weights"]) == {"len_words"}
    record = json.loads((out / "config.json").read_text())
    assert record["audit"]["head"]["objective"] == "poe"
    code = main([*base, "--out", str(tmp_path / "dro"), "--objective", "group_dro"])
    assert code == 0, capsys.readouterr().err
    code = main([*base, "--out", str(tmp_path / "x"), "--objective", "group_dro",
                 "--dro-groups", "annotator"])  # fmt: skip
    assert code == 2
    assert "--dro-groups" in capsys.readouterr().err
    code = main([*base, "--out", str(tmp_path / "y"), "--objective", "poe", "--bias-features",
                 "no_such_feature"])  # fmt: skip
    assert code == 2
    assert "unknown feature(s) no_such_feature" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "z"), "--objective", "bogus"]) == 2


def test_objective_config_is_the_one_home_of_the_loss_fields():
    # Both training modes extend ObjectiveConfig: the loss's fields are declared and checked
    # there once, and stay flat on HeadConfig and TrainConfig.
    import inspect
    from dataclasses import fields

    from rmlens._params import ParamError
    from rmlens.rewards import ObjectiveConfig, TrainConfig

    loss_fields = [f.name for f in fields(ObjectiveConfig)]
    assert {"objective", "gamma", "smoothing", "dro_step", "use_margin"} <= set(loss_fields)
    for cls in (HeadConfig, TrainConfig):
        assert issubclass(cls, ObjectiveConfig)
        assert not set(inspect.get_annotations(cls)) & set(loss_fields)  # not declared again
        assert all(cls._constraints[n] is ObjectiveConfig._constraints[n] for n in loss_fields)
        with pytest.raises(ParamError, match="smoothing"):
            cls(objective="label_smoothing", smoothing=0.5).check()
    assert HeadConfig(objective="poe", gamma=2.0).to_dict()["gamma"] == 2.0
    with pytest.raises(ParamError, match="objective"):
        ObjectiveConfig(objective="dpo").check()


def test_objective_from_config_reads_the_config_and_the_kind_of_head():
    from rmlens.rewards import TrainConfig

    extras = PairExtras(group=torch.tensor([0, 1, 1]))
    steps = ObjectiveModule.from_config(TrainConfig(objective="group_dro"), train=extras)
    solve = ObjectiveModule.from_config(HeadConfig(head="logistic", objective="group_dro"),
                                  convex=True, train=extras)  # fmt: skip
    assert (steps.name, steps.dro_step, solve.dro_step) == ("group_dro", 0.01, 0.5)
    assert ObjectiveModule.from_config(HeadConfig(objective="group_dro", dro_step=0.2),
                                 convex=True, train=extras).dro_step == 0.2  # fmt: skip
    smooth = ObjectiveModule.from_config(TrainConfig(objective="label_smoothing", smoothing=0.2))
    assert (smooth.name, smooth.smoothing) == ("label_smoothing", 0.2)
