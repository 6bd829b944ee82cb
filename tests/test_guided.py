"""Objectives under the default (logistic) head: poe's free expert, group_dro around solves,
the audit-guided weights (low_margin, complementary, curate) and inactive mechanisms."""

import json
import warnings

import numpy as np
from scipy.special import expit

from rmlens._errors import RmlensWarning
from rmlens.influence import LogisticProblem, fit_logistic
from rmlens.rewards import FrozenHeadTrainer, HeadConfig
from rmlens.rewards._guided import (
    complementary_weights,
    curate_weights,
    low_margin_weights,
    margin_quantile,
    nested_audit,
)
from test_objectives import length_decides


def test_weights_against_hand_values():
    margin = np.array([3.0, 1.0, 2.0, 2.0])
    # average ranks 4, 1, 2.5, 2.5 -> q = (rank - 1) / 3
    np.testing.assert_allclose(margin_quantile(margin), [1, 0, 0.5, 0.5])
    raw = np.array([1.0, 2.0, 1.5, 1.5])  # 2 - q
    np.testing.assert_allclose(low_margin_weights(margin), raw / raw.mean())
    tm = np.array([0.9, 0.8, 0.4, 0.7])
    tg = np.array([0.9, 0.5, 0.2, 0.6])
    raw = np.array([1.0 * 0.1, 2.0 * 0.5, 0.0, 1.5 * 0.4])  # (2 - q)(1 - TG), TM < 1/2 -> 0
    np.testing.assert_allclose(complementary_weights(tm, tg, margin, 1.0), raw / raw.mean())
    np.testing.assert_allclose(curate_weights(tm, 0.0), [1, 1, 0, 1])
    np.testing.assert_allclose(curate_weights(tm, 0.25), [1, 1, 0.25, 1])


def test_nested_audit_against_exact_refits():
    """In-run TM and TG from K fits and their Newton counterfactuals agree with the same
    means from exact refits of every changed training set."""
    rng = np.random.default_rng(3)
    n, d = 96, 5
    z = rng.normal(0.2, 1, (n, d))
    problem = LogisticProblem(z, np.ones(n), np.zeros(n))
    groups = np.arange(n) % 12
    lam, folds, seed = 5.0, 3, 7
    tm, tg = nested_audit(problem, lam, groups, folds, seed)
    order = np.random.default_rng([seed, 28]).permutation(12)
    fold_of = np.empty(12, dtype=int)
    fold_of[order] = np.arange(12) % folds
    fold = fold_of[groups]
    tm_ref, tg_ref = np.zeros(n), np.zeros(n)
    for f in range(folds):
        inside = fold != f
        w = fit_logistic(problem.take(inside), lam)
        p = expit(z @ w)
        for g in range(12):
            rows = groups == g
            changed = inside & ~rows if inside[rows].all() else inside | rows
            p_cf = expit(z[rows] @ fit_logistic(problem.take(changed), lam))
            tm_ref[rows] += p[rows] if inside[rows].all() else p_cf
            tg_ref[rows] += p_cf if inside[rows].all() else p[rows]
    np.testing.assert_allclose(tm, tm_ref / folds, atol=2e-3)
    np.testing.assert_allclose(tg, tg_ref / folds, atol=2e-3)
    assert (tm - tg).mean() > 0  # training on a group raises its pairs on average


def test_poe_expert_takes_the_shortcut_under_the_logistic_head():
    """The bias expert is nearly free of the L2 penalty, so the main head keeps almost none
    of a shortcut it could share (with an equally penalized expert it kept most of it)."""
    xc, xr, dphi = length_decides()
    val = (xc[1600:], xr[1600:], None, dphi[1600:])
    d = {}
    for name in ("bt", "poe"):
        trainer = FrozenHeadTrainer(HeadConfig(head="logistic", objective=name))
        rm = trainer.fit_features(xc[:1600], xr[:1600], bias=dphi[:1600], validation=val).head_
        d[name] = rm.score_features(xc) - rm.score_features(xr)
        assert rm.activity_["active"]
    length = dphi[:, 0]
    corr = {k: abs(np.corrcoef(v, length)[0, 1]) for k, v in d.items()}
    assert corr["bt"] > 0.9
    assert corr["poe"] < 0.4 * corr["bt"]
    assert np.abs(d["poe"]).mean() < 0.1 * np.abs(d["bt"]).mean()


def two_groups(n: int = 1000, seed: int = 0):
    """One rule for both groups, 30% of group 1's labels flipped (as test_objectives)."""
    rng = np.random.default_rng(seed)
    group = (np.arange(n) % 5 == 0).astype(int)
    xa, xb = rng.normal(size=(n, 4)), rng.normal(size=(n, 4))
    wins = (xa[:, 0] > xb[:, 0]) ^ ((group == 1) & (rng.random(n) < 0.3))
    return np.where(wins[:, None], xa, xb), np.where(wins[:, None], xb, xa), group


def test_group_dro_under_the_logistic_head_moves_weight_to_the_worst_group():
    xc, xr, group = two_groups()
    cfg = HeadConfig(head="logistic", objective="group_dro", l2_grid=(10.0,))
    rm = FrozenHeadTrainer(cfg).fit_features(xc, xr, groups=group).head_
    q = rm.objective_.q.numpy()
    assert q[1] > 0.6  # group 1's loss stays higher (its flipped labels)
    assert rm.activity_["active"]
    # the kept head is the optimum of the weighted problem under the final q
    counts = np.bincount(group)
    np.testing.assert_allclose(rm.weight_, len(group) * q[group] / counts[group], rtol=1e-6)
    problem = rm.pair_problem(xc, xr, weight=rm.weight_)
    g, _ = problem.grad_hess(rm.w_, rm.l2_)
    assert np.abs(g).max() < 1e-4  # a sum over 1000 pairs: about 100 at w = 0


def test_paired_counterfactuals_of_weighted_objectives_match_refits(
    tiny_encoder_dir, tmp_path, monkeypatch
):
    from conftest import length_pairs
    from rmlens.memorization import audit

    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / "cache"))
    pairs = length_pairs(120, 24)
    rng = np.random.default_rng(0)
    flip = (rng.random(len(pairs)) < 0.3) | (pairs.user_id == "u3").to_numpy()
    pairs.loc[flip, ["chosen", "rejected"]] = pairs.loc[flip, ["rejected", "chosen"]].values
    pairs["margin"] = rng.integers(1, 5, len(pairs)).astype(float)
    for name in ("group_dro", "complementary", "curate", "low_margin"):
        cfg = HeadConfig(head="logistic", objective=name)
        audit(pairs, out=tmp_path / name, runs=4, folds=2, model=str(tiny_encoder_dir),
              head=cfg, check_exact=2, quiet=True)  # fmt: skip
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        assert summary["estimator"] == "paired"
        assert summary["exactness"]["max_abs_error"] < 0.01, name
        assert summary["objective"]["objective"] == name
        assert summary["objective"]["runs_inactive"] == [], name
        manifest = json.loads((tmp_path / name / "runs" / "000" / "manifest.json").read_text())
        metrics = manifest["metrics"]
        assert metrics["objective"] == name and metrics["objective_active"]
        assert ("dro_q" if name == "group_dro" else "weight_cv") in metrics
        if name == "curate":  # what was dropped: the pairs of weight 0, by id
            assert len(metrics["dropped_ids"]) == metrics["n_zero_weight"] > 0
            assert set(metrics["dropped_ids"]) <= set(manifest["train_ids"])


def test_guided_weights_never_read_held_out_pairs(tiny_encoder_dir, tmp_path):
    """A run's complementary head is the same whatever the labels of the pairs it holds
    out: its nested audit sees the run's training groups only."""
    from conftest import length_pairs

    pairs = length_pairs(80, 8)
    flipped = pairs.copy()
    held = np.arange(len(pairs)) % 8 >= 6  # users u6, u7 held out
    flipped.loc[held, ["chosen", "rejected"]] = pairs.loc[held, ["rejected", "chosen"]].values
    weights = []
    for table in (pairs, flipped):
        trainer = FrozenHeadTrainer(HeadConfig(head="logistic", objective="complementary"),
                                    model=str(tiny_encoder_dir), cache_dir=tmp_path / "c")
        trainer.prepare(table, quiet=True)
        train = np.flatnonzero(np.arange(len(pairs)) % 8 < 4)
        val = np.flatnonzero((np.arange(len(pairs)) % 8 >= 4) & ~held)
        scores = trainer.fit_score(train, seed=1, val_index=val)
        weights.append((scores.model.head.w_, scores.metrics["guide"]))
    np.testing.assert_array_equal(weights[0][0], weights[1][0])
    assert weights[0][1] == weights[1][1]


def test_an_inactive_mechanism_is_said():
    xc, xr, _ = length_decides(400)
    zeros = np.zeros((400, 1))  # a bias feature that never differs: the expert takes nothing
    rm = FrozenHeadTrainer(HeadConfig(head="logistic", objective="poe")).fit_features(
        xc, xr, bias=zeros).head_  # fmt: skip
    assert not rm.activity_["active"]
    assert "bias expert stayed near 0" in rm.activity_["why"]
    rm = FrozenHeadTrainer(HeadConfig(head="logistic", objective="label_smoothing",
                                      smoothing=0.0)).fit_features(xc, xr).head_  # fmt: skip
    assert "`smoothing` is 0" in rm.activity_["why"]
    groups = np.arange(400) % 4
    rm = FrozenHeadTrainer(HeadConfig(head="logistic", objective="curate",
                                      curate_weight=1.0)).fit_features(
        xc, xr, groups=groups).head_  # fmt: skip
    assert rm.activity_ == {"active": False, "why": "`curate_weight` is 1"}


def test_fit_warns_when_the_mechanism_stayed_inactive(tiny_encoder_dir, tmp_path):
    from conftest import length_pairs

    pairs = length_pairs(40, 4)
    trainer = FrozenHeadTrainer(HeadConfig(head="logistic", objective="label_smoothing",
                                           smoothing=0.0),
                                model=str(tiny_encoder_dir), cache_dir=tmp_path)  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(pairs, quiet=True)
    messages = [str(w.message) for w in caught if issubclass(w.category, RmlensWarning)]
    assert any("mechanism stayed inactive" in m for m in messages), messages


def test_explicit_fine_tuning_accepts_the_guided_objectives():
    from rmlens.rewards.finetune import TrainConfig

    assert TrainConfig(objective="complementary").check().objective == "complementary"


def test_the_report_says_what_the_objective_did():
    from rmlens.report._sections._quality import _objective_block

    record = {"objective": "curate", "mean_weight_cv": 0.4253, "mean_weight_min": 0.0,
              "mean_weight_max": 1.0, "mean_n_zero_weight": 146.6, "guide_tm_mean": 0.674,
              "guide_tg_mean": 0.6185, "guide_cm_mean": 0.0555, "guide_n_not_learned": 146.6,
              "guide_margin_from": "data", "runs_inactive": [{"run": 2, "why": "x"}],
              "n_runs": 5}  # fmt: skip
    text = _objective_block(record)
    assert "<code>curate</code>" in text and "146.6 pairs at weight 0" in text
    assert "in-run TM &lt; 0.5" in text and "the data's margin" in text
    assert "inactive in 1 of 5 runs" in text
    assert _objective_block({"objective": "bt", "runs_inactive": [], "n_runs": 5}) == ""
