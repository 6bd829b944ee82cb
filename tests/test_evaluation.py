"""Evaluation metrics against hand-computed values, and shortcut probes on a length RM."""

import json
import re

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, logit

from rmlens.evaluation import (
    PROBES,
    EvaluateConfig,
    LengthCalibrator,
    Probe,
    accuracy_by,
    auroc,
    brier_score,
    calibrate_length,
    ensemble_disagreement,
    evaluate,
    expected_calibration_error,
    fit_temperature,
    length_correlation,
    margin_spearman,
    pair_metrics,
    probe_effects,
    register_probe,
    reliability_bins,
    reward_distribution,
    rewardbench_scores,
    run_probes,
    temperature_scaling,
)
from rmlens.evaluation._probes import FILLER, resolve_probes
from rmlens.rewards._metrics import pairwise_accuracy


class LengthRM:
    """Rewards the number of characters of the response, nothing else."""

    def score(self, prompts, responses):
        return np.array([len(r) for r in responses], dtype=float)


def test_accuracy_counts_ties_half():
    m = pair_metrics([1.0, 2.0, 0.5, 3.0], [0.0, 2.0, 1.5, 1.0])
    assert m["accuracy"] == pytest.approx(2.5 / 4)
    assert m["n_ties"] == 1 and m["n_pairs"] == 4
    assert m["margin_mean"] == pytest.approx((1 + 0 - 1 + 2) / 4)


def test_ece_and_brier_on_a_hand_example():
    p, y = [0.9, 0.8, 0.3, 0.6], [1, 0, 0, 1]
    # confidences 0.9 0.8 0.7 0.6, picks right/wrong/right/right;
    # bins {0.6, 0.7}: conf 0.65 acc 1; {0.8, 0.9}: conf 0.85 acc 0.5 -> ECE = 0.35
    assert expected_calibration_error(p, y, n_bins=2) == pytest.approx(0.35)
    bins = reliability_bins(p, y, n_bins=2)
    assert bins.n.tolist() == [2, 2]
    np.testing.assert_allclose(bins.confidence, [0.65, 0.85])
    np.testing.assert_allclose(bins.accuracy, [1.0, 0.5])
    assert brier_score(p, y) == pytest.approx((0.01 + 0.64 + 0.09 + 0.16) / 4)
    # one bin: |mean correct 0.75 - mean conf 0.75| = 0
    assert expected_calibration_error(p, y, n_bins=1) == pytest.approx(0.0)
    # a pair set (every label 1): p = 0.5 is a tie, counted 1/2
    assert expected_calibration_error([0.5, 0.5]) == pytest.approx(0.0)
    assert expected_calibration_error([0.8, 0.4], n_bins=1) == pytest.approx(abs(0.5 - 0.7))


def test_ece_does_not_depend_on_which_side_is_first():
    rng = np.random.default_rng(1)
    p, y = rng.uniform(size=200), rng.integers(0, 2, 200)
    assert expected_calibration_error(p, y) == pytest.approx(
        expected_calibration_error(1 - p, 1 - y)
    )


def synthetic(n, sharpen, seed=0):
    """Pairs whose true P(first wins) is p; the RM's margin is sharpen * logit(p)."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 0.95, n)
    y = rng.random(n) < p
    margin = sharpen * logit(p) * np.where(y, 1.0, -1.0)  # oriented so the winner is first
    return p, y, margin


def test_calibrated_case_has_small_ece_and_overconfident_case_large():
    p, y, margin = synthetic(20000, sharpen=1.0)
    assert expected_calibration_error(p, y) < 0.02
    assert expected_calibration_error(expit(margin)) < 0.02  # the same, as a pair set
    _, _, bad = synthetic(20000, sharpen=4.0)
    assert expected_calibration_error(expit(bad)) > 0.1


def test_temperature_scaling_repairs_overconfidence():
    _, _, bad = synthetic(20000, sharpen=4.0)
    t = fit_temperature(bad)
    assert t == pytest.approx(4.0, rel=0.1)
    assert expected_calibration_error(expit(bad / t)) < 0.02
    summary, held = temperature_scaling(bad, frac=0.3, seed=0)
    assert summary["n_fit"] == 6000 and summary["n_eval"] == held.sum() == 14000
    assert summary["ece_after"] < 0.03 < 0.1 < summary["ece_before"]
    assert summary["brier_after"] < summary["brier_before"]
    with pytest.raises(ValueError, match="at least 2"):
        temperature_scaling(bad[:3], frac=0.1)


def test_accuracy_by_subset_and_rewardbench_sections():
    rc = np.array([1, 1, 0, 1, 0, 1, 1, 0, 1.0])
    rr = np.array([0, 0, 1, 1, 1, 0, 0, 1, 0.0])
    subset = ["alpacaeval-easy"] * 2 + ["mt-bench-easy"] * 2 + ["hep-go"] * 3 + ["mine"] * 2
    by = accuracy_by(rc, rr, subset)
    assert by == {
        "alpacaeval-easy": {"accuracy": 1.0, "n": 2},
        "mt-bench-easy": {"accuracy": 0.25, "n": 2},
        "hep-go": {"accuracy": 2 / 3, "n": 3},
        "mine": {"accuracy": 0.5, "n": 2},
    }
    rb = rewardbench_scores(by)
    # Chat weighs by RewardBench's counts: alpacaeval-easy 100, mt-bench-easy 28
    chat = (100 * 1.0 + 28 * 0.25) / 128
    assert rb["sections"]["Chat"]["accuracy"] == pytest.approx(chat)
    assert rb["sections"]["Chat"]["n"] == 4
    assert rb["sections"]["Reasoning"]["accuracy"] == pytest.approx(2 / 3)
    # a subset that is not RewardBench's is listed apart, never folded into the score
    assert "mine" not in rb["sections"] and rb["n_sections"] == 2
    assert rb["other_subsets"] == {"mine": {"accuracy": 0.5, "n": 2}}
    assert rb["score"] == pytest.approx((chat + 2 / 3) / 2)
    assert rewardbench_scores({"mine": by["mine"]}) is None


def test_margin_spearman_leaves_out_missing_margins():
    rc, rr = np.array([3.0, 2.0, 1.0, 0.0, 5.0]), np.zeros(5)
    res = margin_spearman(rc, rr, [30, 20, 10, 0, np.nan])
    assert res["rho"] == pytest.approx(1.0) and res["n"] == 4
    assert margin_spearman(rc, rr, [3, 2, 1, 4, 0])["rho"] == pytest.approx(-0.6)


def test_reward_distribution_flags_collapse_and_extremes():
    flat = reward_distribution(np.full(50, 2.0), np.full(50, 2.0))
    assert flat["collapsed"] and flat["mode_share"] == 1.0
    m = pair_metrics(np.full(50, 2.0), np.full(50, 2.0))
    assert any("collapsed" in w for w in m["warnings"])
    rng = np.random.default_rng(0)
    normal = reward_distribution(rng.normal(size=5000), rng.normal(size=5000))
    assert not normal["collapsed"]
    assert 0.0005 < normal["extreme_share"] < 0.006  # P(|z| > 3) = 0.0027
    spiky = reward_distribution(np.r_[np.zeros(99), 100.0], np.zeros(100))
    assert spiky["extreme_share"] == pytest.approx(1 / 200) and spiky["collapsed"]


def test_auroc_and_ensemble_disagreement_by_hand():
    assert auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.75)
    assert auroc([1, 1, 1], [0, 1, 0]) == pytest.approx(0.5)
    assert np.isnan(auroc([1, 2], [1, 1]))
    margins = np.array([[1.0, 2.0, -1.0, 0.5], [1.0, 0.0, 1.0, -2.5]])
    summary, spread = ensemble_disagreement(margins)
    np.testing.assert_allclose(spread, [0.0, 1.0, 1.0, 1.5])
    # mean margins 1, 1, 0, -1: pairs 3 and 4 are errors (a tie counts as one)
    assert summary["n_wrong"] == 2
    assert summary["disagreement_correct"] == pytest.approx(0.5)
    assert summary["disagreement_wrong"] == pytest.approx(1.25)
    assert summary["disagreement_auroc"] == pytest.approx(0.875)
    assert summary["member_accuracy_min"] == pytest.approx(0.625)
    assert summary["member_accuracy_max"] == pytest.approx(0.75)


def length_pairs():
    chosen = ["aaaaaaaaaa", "aaaaaaa", "aaaaa", "aaaa", "aaa", "aa", "aaaaaaaaa"]
    rejected = ["a", "aaaa", "aaaaa", "aaa", "aaaaaaa", "aaaaaaa", "a"]
    # d = len(chosen) - len(rejected) = 9, 3, 0, 1, -4, -5, 8
    return pd.DataFrame(
        {"id": [f"p{i}" for i in range(7)], "prompt": "q", "chosen": chosen, "rejected": rejected}
    )


def test_probe_on_a_length_rm_flips_exactly_the_pairs_it_should():
    pairs = length_pairs()
    five = Probe("plus5", "append five characters", lambda t: t + "bbbbb")
    # rejected +5: d -> d - 5; sign changes for d in {3, 0, 1} (0 -> -5 is a flip from a tie)
    eff = probe_effects(LengthRM(), pairs, five, "rejected")
    assert set(eff.id[eff.flipped]) == {"p1", "p2", "p3"}
    np.testing.assert_allclose(eff["shift"], 5.0)
    # chosen +5: d -> d + 5; flips for d in {0, -4}, and -5 becomes a tie
    eff = probe_effects(LengthRM(), pairs, five, "chosen")
    assert set(eff.id[eff.flipped]) == {"p2", "p4", "p5"}
    table = run_probes(LengthRM(), pairs, [five])
    row = table.set_index("side").loc["rejected"]
    assert row.flip_rate == pytest.approx(3 / 7) and row.n == 7
    assert row.to_wrong == pytest.approx(2 / 7) and row.to_right == 0.0
    assert row.accuracy_before == pytest.approx(4.5 / 7)
    assert row.accuracy_after == pytest.approx(2 / 7)
    assert row.mean_shift == pytest.approx(5.0) and row.n_invisible == 0
    chosen = table.set_index("side").loc["chosen"]
    assert chosen.to_right == pytest.approx(1 / 7) and chosen.to_wrong == 0.0  # p5 ends tied


def test_builtin_filler_probe_shifts_by_its_length():
    pairs = length_pairs()
    eff = probe_effects(LengthRM(), pairs, PROBES["pad_filler"], "rejected")
    np.testing.assert_allclose(eff["shift"], len(FILLER) + 1)
    # every chosen ends shorter than its rejected + filler: all but the already-wrong flip
    assert set(eff.id[eff.flipped]) == {"p0", "p1", "p2", "p3", "p6"}


def test_probe_edits_the_last_assistant_message_of_a_conversation():
    convo = [{"role": "assistant", "content": "Hi."}, {"role": "user", "content": "Ok"}]
    edited = PROBES["refusal"].apply(convo)
    assert edited[0]["content"].startswith("I'm sorry") and edited[1]["content"] == "Ok"
    assert convo[0]["content"] == "Hi."
    md = PROBES["markdown"].edit("One. Two!")
    assert md == "**Answer**\n\n- One.\n- Two!"
    assert PROBES["pad_repeat"].edit("First one. Second.") == "First one. Second. First one."


def test_probe_registry():
    probe = Probe("shout", "upper case", str.upper)
    register_probe(probe)
    try:
        assert probe in resolve_probes("all")
        assert resolve_probes("shout,refusal") == [probe, PROBES["refusal"]]
        with pytest.raises(ValueError, match="already registered"):
            register_probe(probe)
    finally:
        PROBES.pop("shout")
    assert resolve_probes("none") == [] and resolve_probes(None) == []
    with pytest.raises(ValueError, match="unknown probe 'nope'"):
        resolve_probes("refusal,nope")


def test_evaluate_writes_metrics_and_probes(tmp_path):
    pairs = length_pairs().assign(
        margin=[1.0, 2.0, 0.0, 3.0, 1.0, 1.0, 5.0], subset=["a"] * 4 + ["b"] * 3
    )
    config = EvaluateConfig(calibrate_frac=0.5, by=["subset"])
    metrics = evaluate(
        pairs, rm=LengthRM(), probes="pad_filler,refusal", out=tmp_path, config=config, quiet=True
    )
    assert metrics["accuracy"] == pytest.approx(4.5 / 7)
    assert metrics["by"]["subset"]["b"] == {"accuracy": pytest.approx(1 / 3), "n": 3}
    # subsets "a" and "b" are not RewardBench's: no RewardBench score
    assert "temperature" in metrics and "rewardbench" not in metrics
    saved = json.loads((tmp_path / "metrics.json").read_text())
    for key in ("accuracy", "ece", "brier", "n_pairs"):
        assert saved[key] == pytest.approx(metrics[key])
    probes = pd.read_parquet(tmp_path / "probes.parquet")
    assert {"probe", "side", "mean_shift", "flip_rate", "n"} <= set(probes.columns)
    assert len(probes) == 4
    for name in ("reliability.png", "rewards.png", "probes.png", "scores.parquet"):
        assert (tmp_path / name).stat().st_size > 0, name


def test_evaluate_samples_pairs_for_probes():
    pairs = pd.DataFrame(
        {"prompt": "q", "chosen": [f"{'a' * i}" for i in range(1, 41)], "rejected": "aaa"}
    )
    metrics = evaluate(
        pairs, rm=LengthRM(), probes="refusal", config=EvaluateConfig(probe_pairs=10), quiet=True
    )
    assert [row["n"] for row in metrics["probes"]] == [10, 10]
    with pytest.raises(ValueError, match="unknown probe"):
        evaluate(pairs, rm=LengthRM(), probes="nope", quiet=True)


class RecordingRM(LengthRM):
    """A length RM that keeps every response it scored."""

    def __init__(self):
        self.seen = []

    def score(self, prompts, responses):
        self.seen += list(responses)
        return super().score(prompts, responses)


def test_probes_edit_a_seeded_sample_of_200_pairs_by_default_or_all():
    from rmlens.evaluation._evaluate import probe_rows

    pairs = pd.DataFrame({"prompt": "q", "chosen": [f"{'a' * (i % 50 + 1)} {i}" for i in
                          range(300)], "rejected": "aaa"})  # fmt: skip
    assert EvaluateConfig().probe_pairs == 200

    def probed(**kw):
        rm = RecordingRM()
        metrics = evaluate(pairs, rm=rm, probes="refusal", quiet=True, **kw)
        return [row["n"] for row in metrics["probes"]], rm.seen[2 * len(pairs):]  # the edits

    n, edited = probed()
    assert n == [200, 200] and len(set(edited[:200])) == 200  # 200 distinct chosen edits
    assert edited == probed()[1]  # same seed, same pairs
    assert set(edited) != set(probed(seed=1)[1])
    assert probed(probe_pairs="all")[0] == probed(probe_pairs=0)[0] == [300, 300]
    assert probed(probe_pairs=500)[0] == [300, 300]
    # an int is the sample it always was (a seeded draw without replacement, sorted)
    expected = np.sort(np.random.default_rng(7).choice(300, 40, replace=False))
    np.testing.assert_array_equal(probe_rows(300, 40, seed=7), expected)
    np.testing.assert_array_equal(probe_rows(300, "all", seed=7), np.arange(300))
    with pytest.raises(ValueError, match="must be an int >= 0 or 'all'. Got 'some'"):
        evaluate(pairs, rm=LengthRM(), probes="none", probe_pairs="some", quiet=True)


def test_validation_pairs_are_neither_in_train_nor_held_out():
    """An audit run's validation pairs (its early stopping looked at them) count in neither."""
    from rmlens.evaluation._evaluate import membership_metrics
    from rmlens.hub import EnsembleRM

    class Constant:
        def score(self, prompts, responses):
            return np.zeros(len(responses))

    ids = ["a", "b", "c"]
    rm = EnsembleRM([Constant()] * 3, train_ids=[{"a"}, {"a", "b"}, {"b"}],
                    val_ids=[{"b"}, {"c"}, {"a"}])  # fmt: skip
    margins = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [-1.0, 2.0, -3.0]])
    split = membership_metrics(rm, ids, margins, n_bins=2)
    # held out: a by none (member 2 validated on it), b by none, c by members 0 and 2
    assert split["held_out"]["members_per_pair"] == 2.0
    assert split["in_train"]["members_per_pair"] == 2.0  # a by 0 and 1, b by 1 and 2
    assert rm.validation(ids).tolist() == [[False, True, False], [False, False, True],
                                           [True, False, False]]  # fmt: skip


def test_lowess_matches_the_tricube_formula_and_statsmodels():
    x, y = np.array([0.0, 1, 2, 3, 10]), np.array([1.0, 3, 2, 5, 4])
    # by hand at x = 0, frac 0.8: the k = 4 nearest are 0..3, h = 3, so x = 3 weighs 0
    w = (1 - (np.array([0.0, 1, 2]) / 3) ** 3) ** 3
    line = np.polyfit(x[:3], y[:3], 1, w=np.sqrt(w))  # polyfit squares its w
    plain = LengthCalibrator(frac=0.8, it=0).fit(y, x)
    assert plain.bias([0.0])[0] == pytest.approx(np.polyval(line, 0.0), abs=1e-12)
    # statsmodels 0.15.0: lowess(y, x, frac=0.8, it=0) and it=3
    np.testing.assert_allclose(
        plain.bias_, [1.359316816956, 2.141068447412, 3.145242070117, 4.520910910726,
                      4.00960730316], atol=1e-11)  # fmt: skip
    robust = LengthCalibrator(frac=0.8, it=3).fit(y, x)
    np.testing.assert_allclose(
        robust.bias_, [1.14182152265, 2.385213425408, 3.669261669702, 4.845111541176,
                       4.002309846333], atol=1e-11)  # fmt: skip
    # tied lengths: statsmodels' lowess(y, x, frac=0.5, it=3) at the distinct lengths
    x = np.array([1.0, 1, 2, 3, 3, 3, 5, 8, 9, 12])
    y = np.array([0.5, 1.5, 1.0, 2.0, 2.5, 1.5, 3.0, 6.0, 4.0, 7.0])
    fit = LengthCalibrator(frac=0.5).fit(y, x)
    assert fit.lengths_.tolist() == [1, 2, 3, 5, 8, 9, 12]
    np.testing.assert_allclose(
        fit.bias_, [1, 1, 2, 3, 4.694501313765, 5.271790488496, 6.82980740221], atol=1e-11
    )


def test_lowess_weighs_a_window_of_tied_lengths_equally():
    # k = 2 and both nearest responses share the length: h = 0, f is their mean
    # (statsmodels divides by zero here and returns one response's reward)
    cal = LengthCalibrator(frac=0.5).fit([2.0, 4.0, 3.0, 5.0], [10.0, 20.0, 10.0, 20.0])
    np.testing.assert_allclose(cal.bias_, [2.5, 4.5])


def test_fitted_f_interpolates_and_extends_along_its_end_segments():
    lengths = np.arange(10.0, 110.0, 10.0)
    cal = LengthCalibrator(frac=0.5).fit(3.0 + 0.5 * lengths, lengths)  # a line is kept
    np.testing.assert_allclose(cal.bias([15.0, 0.0, 200.0]), [10.5, 3.0, 103.0])
    with pytest.raises(RuntimeError, match="not fitted yet"):
        LengthCalibrator().bias([1.0])
    with pytest.raises(ValueError, match="The 'frac' parameter of LengthCalibrator"):
        LengthCalibrator(frac=0).fit([1.0], [1.0])
    with pytest.raises(ValueError, match="equal 1-d shapes"):
        calibrate_length([1.0, 2.0], [1.0])


def planted_pairs(n=400, seed=0):
    """Pairs decided by quality q (chosen = rejected + a gap); lengths drawn independently.

    The response text carries its quality, read by ``QualityLengthRM``."""
    rng = np.random.default_rng(seed)
    q, gap = rng.normal(size=n), rng.uniform(0.5, 2.0, n)

    def text(quality, length):
        head = f"q={quality:.6f} "
        return head + "x" * (length - len(head))

    return pd.DataFrame({
        "id": [f"p{i}" for i in range(n)], "prompt": "q",
        "chosen": [text(a + g, L) for a, g, L in zip(q, gap, rng.integers(30, 400, n))],
        "rejected": [text(a, L) for a, L in zip(q, rng.integers(30, 400, n))],
    })  # fmt: skip


class QualityLengthRM:
    """reward = quality + 0.5 * characters: a planted length bias."""

    def score(self, prompts, responses):
        quality = [float(re.search(r"q=(\S+)", r).group(1)) for r in responses]
        return np.array(quality) + 0.5 * np.array([len(r) for r in responses])


def test_length_calibration_removes_a_planted_length_bias(tmp_path):
    pairs = planted_pairs()
    rm, lengths = QualityLengthRM(), np.r_[pairs.chosen.str.len(), pairs.rejected.str.len()]
    rewards = np.r_[rm.score(None, pairs.chosen), rm.score(None, pairs.rejected)]
    before, after = length_correlation(rewards, lengths)
    assert before > 0.99 and abs(after) < 0.1
    calibrated = calibrate_length(rewards, lengths)
    n = len(pairs)
    assert pairwise_accuracy(rewards[:n], rewards[n:]) < 0.6
    assert pairwise_accuracy(calibrated[:n], calibrated[n:]) > 0.98  # quality decides again

    probes = "pad_filler,refusal"
    raw = evaluate(pairs, rm=rm, probes=probes, quiet=True)
    config = EvaluateConfig(calibrate="length")
    metrics = evaluate(pairs, rm=rm, probes=probes, out=tmp_path, config=config, quiet=True)
    block = metrics["posthoc_calibration"]
    assert block["method"] == "length" and block["unit"] == "characters"
    assert block["frac"] == 0.5 and block["n_responses"] == 2 * n
    assert block["corr_before"] == pytest.approx(before)
    assert block["corr_after"] == pytest.approx(after)
    assert block["accuracy_before"] == pytest.approx(raw["accuracy"])
    assert metrics["accuracy"] == block["accuracy_after"] > 0.98
    # probes score their padded texts with the same f: padding no longer flips preferences
    flips = {(r["probe"], r["side"]): r["flip_rate"] for r in metrics["probes"]}
    raw_flips = {(r["probe"], r["side"]): r["flip_rate"] for r in raw["probes"]}
    assert raw_flips["pad_filler", "rejected"] > 0.2
    assert flips["pad_filler", "rejected"] < 0.1 and flips["pad_filler", "chosen"] < 0.1
    scores = pd.read_parquet(tmp_path / "scores.parquet")
    np.testing.assert_allclose(scores.r_chosen, rewards[:n])  # raw beside calibrated
    np.testing.assert_allclose(scores.r_chosen_calibrated, calibrated[:n])
    assert scores.len_rejected.tolist() == pairs.rejected.str.len().tolist()
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["posthoc_calibration"] == pytest.approx(block)
    assert (tmp_path / "length.png").stat().st_size > 0


def test_length_calibration_leaves_a_constant_length_set_unchanged():
    rng = np.random.default_rng(3)
    rewards = rng.normal(size=50)
    shift = calibrate_length(rewards, np.full(50, 42.0)) - rewards
    np.testing.assert_allclose(shift, shift[0])  # one constant for every response
    pairs = pd.DataFrame({"prompt": "q", "chosen": [f"c{i:02d}" for i in range(30)],
                          "rejected": [f"r{i:02d}" for i in range(30)]})  # fmt: skip

    class Hashed:
        def score(self, prompts, responses):
            return np.array([sum(map(ord, r)) * 7919 % 1000 / 100 for r in responses])

    config = EvaluateConfig(calibrate="length")
    metrics = evaluate(pairs, rm=Hashed(), probes="none", config=config, quiet=True)
    block = metrics["posthoc_calibration"]
    assert block["accuracy_after"] == block["accuracy_before"] and block["flipped"] == 0.0
    assert np.isnan(block["corr_before"])  # one length: no correlation to speak of
    bad = EvaluateConfig(calibrate="spline")
    with pytest.raises(ValueError, match="'calibrate' parameter of EvaluateConfig must be 'length"):
        evaluate(pairs, rm=Hashed(), probes="none", config=bad)


def test_flip_rates_carry_their_wilson_interval():
    # 50 flips out of 100 edited pairs: Wilson 95% (0.4038, 0.5962), by hand; 0 flips out of
    # 10 still has width (the normal interval would be [0, 0]); no edited pair: no interval.
    from rmlens.evaluation._probes import summarize_effects
    from rmlens.stats import wilson_interval

    z = 1.959963984540054
    p, n = 0.5, 100
    half = z / (1 + z**2 / n) * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    lo, hi = wilson_interval(50, 100)
    assert (float(lo), float(hi)) == pytest.approx((centre - half, centre + half))
    assert (float(lo), float(hi)) == pytest.approx((0.4038, 0.5962), abs=1e-4)
    effects = pd.DataFrame({"d_before": np.ones(10), "d_after": np.ones(10),
                            "shift": np.zeros(10), "flipped": np.zeros(10, dtype=bool)})
    row = summarize_effects(effects, "p", "chosen")
    assert row["flip_rate"] == 0 and row["flip_rate_lo"] == pytest.approx(0, abs=1e-12)
    assert row["flip_rate_hi"] == pytest.approx(z**2 / (10 + z**2))  # (0, z^2 / (n + z^2))
    empty = summarize_effects(effects.iloc[:0], "p", "chosen")
    assert np.isnan(empty["flip_rate_lo"]) and np.isnan(empty["flip_rate_hi"])
