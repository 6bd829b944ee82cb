"""rmlens.stats, the one home of each statistic, against values computed by hand."""

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from rmlens import stats
from rmlens._io import json_digest, json_sha1, jsonable
from rmlens.stats import (
    bootstrap_runs,
    log_loss,
    nanquantiles,
    pairwise_accuracy,
    pairwise_correct,
    percentile_interval,
    prophecy_factor,
    run_weights,
    spearman,
    spearman_brown,
    spearman_columns,
    spearman_rows,
    spearman_test,
)


def test_ties_count_half():
    assert pairwise_accuracy([1, 2, 3, 0], [0, 2, 4, 0]) == pytest.approx((1 + 0.5 + 0 + 0.5) / 4)


def test_accuracy_edge_cases():
    assert math.isnan(pairwise_accuracy([], []))
    assert pairwise_accuracy([5.0]) == 1.0 and pairwise_accuracy([0.0]) == 0.5  # margins
    assert pairwise_accuracy([-1.0, 0.0, 2.0, 3.0]) == (0 + 0.5 + 1 + 1) / 4
    # a NaN compares false both ways: a wrong pair, not a missing one
    assert pairwise_accuracy([np.nan, 1.0], [0.0, 0.0]) == 0.5
    # probabilities against 0.5: p == 0.5 exactly is the tie
    assert pairwise_accuracy([0.9, 0.5, 0.2, 0.7], 0.5) == (1 + 0.5 + 0 + 1) / 4
    assert pairwise_correct([3.0, 3.0, 1.0], [1.0, 3.0, 3.0]).tolist() == [1.0, 0.5, 0.0]


def test_log_loss_by_hand():
    assert log_loss([0.9, 0.5, 0.2]) == pytest.approx(-np.mean(np.log([0.9, 0.5, 0.2])))
    assert log_loss([0.25], y=[0]) == pytest.approx(-math.log(0.75))
    assert log_loss([0.0]) == pytest.approx(-math.log(np.finfo(float).tiny))  # floored, finite
    assert math.isnan(log_loss([])) and math.isnan(log_loss([], logits=True))
    # margins: -log sigmoid(d); d = 0 gives log 2, y = 0 flips the sign
    assert log_loss([0.0, 0.0], logits=True) == pytest.approx(math.log(2))
    assert log_loss([2.0], y=[0], logits=True) == pytest.approx(math.log1p(math.exp(2.0)))
    assert log_loss([-800.0], logits=True) == pytest.approx(800.0)  # exact where p underflows
    # the two forms agree where the probability is well inside (0, 1)
    d = np.array([-1.5, 0.3, 2.0])
    assert log_loss(1 / (1 + np.exp(-d))) == pytest.approx(log_loss(d, logits=True))
    with pytest.raises(ValueError, match="`y` has shape"):
        log_loss([0.5, 0.5], y=[1])


def test_spearman_by_hand():
    # ranks (1, 2, 3, 4) and (1, 2, 4, 3): 1 - 6 * 2 / (4 * 15) = 0.8
    assert spearman([1, 2, 3, 4], [10, 20, 40, 30]) == pytest.approx(0.8)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # ties: (1, 2.5, 2.5) against (1, 2, 3): cov 1.5 / sqrt(1.5 * 2)
    assert spearman([1, 2, 2], [1, 2, 3]) == pytest.approx(1.5 / math.sqrt(3.0))


def test_spearman_nan_and_edge_cases():
    # omit: the entries where both are finite; too few or constant: NaN
    assert spearman([1, 2, 3, np.nan, 5], [1, 2, 3, 9, np.inf]) == pytest.approx(1.0)
    assert math.isnan(spearman([1, 2, np.nan], [1, 2, 3]))
    assert math.isnan(spearman([1, 1, 1, 1], [1, 2, 3, 4]))
    assert math.isnan(spearman([], []))
    # propagate: any NaN gives NaN
    assert math.isnan(spearman([1, 2, 3, np.nan], [1, 2, 3, 4], nan_policy="propagate"))
    assert spearman([1, 2, 3, 4], [1, 2, 4, 3], nan_policy="propagate") == pytest.approx(0.8)


def test_spearman_matches_scipy_to_the_bit_with_swapped_arguments():
    rng = np.random.default_rng(3)
    for k in range(200):
        a = rng.normal(size=50 + k)
        b = np.round(a + rng.normal(size=a.size), 1)  # with ties
        assert spearman(b, a) == float(spearmanr(a, b).statistic)


def test_spearman_test_by_hand_and_as_scipy():
    # ranks (1, 2, 3) and (1, 3, 2): 1 - 6 (0 + 1 + 1) / (3 (9 - 1)) = 1/2; t = 1/2 sqrt(1 / (3/4))
    # = 1/sqrt(3) on 1 dof (Cauchy): p = 1 - (2 / pi) atan(1/sqrt(3)) = 1 - 1/3
    rho, p = spearman_test([1, 2, 3], [1, 3, 2])
    assert rho == pytest.approx(0.5) and p == pytest.approx(2 / 3)
    rho, p = spearman_test([1, 2], [5, 3])  # n = 2: -1, no p-value (spearman() says NaN)
    assert rho == pytest.approx(-1.0) and math.isnan(p)
    assert all(math.isnan(v) for v in spearman_test([1, 2, np.nan, 4], [1, 2, 3, 4]))
    with pytest.warns(RuntimeWarning):  # scipy's ConstantInputWarning
        assert all(math.isnan(v) for v in spearman_test([1, 1, 1], [1, 2, 3]))
    rng = np.random.default_rng(5)
    for n in (3, 4, 10, 57):
        a, b = np.round(rng.normal(size=(2, n)), 1)  # with ties
        res = spearmanr(a, b)
        assert spearman_test(a, b) == (float(res.statistic), float(res.pvalue))  # to the bit


def test_spearman_rows_by_hand_and_per_row():
    assert spearman_rows([[1, 2, 3], [3, 2, 1]], [1, 3, 2]).tolist() == [0.5, -0.5]
    # ties: (1, 2.5, 2.5) against (1, 2, 3): 1.5 / sqrt(1.5 * 2)
    assert spearman_rows([1, 2, 2], [1, 2, 3]) == pytest.approx(1.5 / math.sqrt(3.0))
    out = spearman_rows([[1, 1, 1], [1, 2, np.nan]], [[1, 2, 3], [1, 2, 3]])
    assert np.isnan(out).all()  # a constant row, a row with a NaN
    rng = np.random.default_rng(2)
    a = np.round(rng.normal(size=(4, 6, 20)), 1)  # (R, P, N), with ties
    b = np.round(rng.normal(size=(6, 20)), 1)
    rows = spearman_rows(a, b)
    assert rows.shape == (4, 6)
    for r in range(4):
        for q in range(6):
            assert rows[r, q] == pytest.approx(spearman(a[r, q], b[q]), abs=1e-12)
    from scipy.stats import rankdata

    ranked = spearman_rows(a, rankdata(b, axis=-1), b_ranked=True)
    assert np.array_equal(ranked, rows)


def test_spearman_columns_by_column_and_on_finite_rows():
    rng = np.random.default_rng(3)
    a = np.round(rng.normal(size=(30, 4)), 1)
    a[:, 2] = 1.0  # constant: NaN
    b = np.round(rng.normal(size=(30, 3)), 1)
    b[::4, 1] = np.nan  # ranked on its finite rows only
    b[2:, 2] = np.nan  # fewer than 3 finite values: NaN
    rho = spearman_columns(a, b)
    assert rho.shape == (4, 3)
    for j in (0, 1, 3):
        for f in (0, 1):
            assert rho[j, f] == pytest.approx(spearman(a[:, j], b[:, f]), abs=1e-12)
    assert np.isnan(rho[2]).all() and np.isnan(rho[:, 2]).all()


def test_nanquantiles_are_numpys_to_the_bit():
    rng = np.random.default_rng(4)
    qs = np.array([0.0, 0.025, 0.1, 0.5, 0.9, 0.975, 1.0])
    for n_draws in (1, 2, 7, 200):
        draws = rng.normal(size=(300, n_draws))
        draws[rng.uniform(size=draws.shape) < 0.3] = np.nan  # whole NaN rows among them
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN row
            expected = np.nanquantile(draws, qs, axis=1).T
        assert np.array_equal(nanquantiles(draws, qs), expected, equal_nan=True)


def test_log_loss_of_margins_is_the_calibration_figure():
    from rmlens.evaluation import calibration_metrics

    # -log sigmoid(0) = log 2, -log sigmoid(log 3) = -log(3/4): mean log(8/3) / 2
    d = np.array([0.0, math.log(3.0)])
    assert log_loss(d, logits=True) == pytest.approx(math.log(8 / 3) / 2)
    assert calibration_metrics(d)["log_loss"] == log_loss(d, logits=True)


def test_json_sha1_is_the_one_fingerprint():
    import hashlib
    import json

    obj = {"b": [1, 2.5, None], "a": {"y": True, "x": "é"}}
    text = json.dumps(obj, sort_keys=True)
    assert json_sha1(obj) == hashlib.sha1(text.encode()).hexdigest()
    assert json_sha1(obj, 16) == hashlib.sha1(text.encode()).hexdigest()[:16]
    assert json_sha1(obj, 12) == json_sha1(dict(reversed(obj.items())), 12)  # sorted keys
    unsorted = {"z": 1, "a": 2}
    assert json_sha1(unsorted, sort_keys=False) == hashlib.sha1(b'{"z": 1, "a": 2}').hexdigest()
    assert json_sha1(unsorted, sort_keys=False) != json_sha1(unsorted)
    with pytest.raises(TypeError):
        json_sha1({"p": Path("/a")})
    assert json_sha1({"p": Path("/a")}, default=str) == json_sha1({"p": "/a"})
    digest = json_digest([1], default=str)
    digest.update(b"more")
    assert digest.hexdigest() == hashlib.sha1(b"[1]more").hexdigest()


def test_spearman_brown_and_prophecy_by_hand():
    assert spearman_brown(0.5, 2) == pytest.approx(2 / 3, abs=1e-3)  # 0.667
    assert spearman_brown(0.37, 2) == pytest.approx(0.540, abs=1e-3)
    assert spearman_brown(0.8, 1) == pytest.approx(0.8)
    assert spearman_brown(np.array([0.0, 1.0]), 3.0).tolist() == [0.0, 1.0]
    # rel 0.54 at 25 runs: 25 * 0.8 * 0.46 / (0.54 * 0.2) = 85.19 runs
    assert 25 * prophecy_factor(0.54) == pytest.approx(85.185, abs=1e-2)
    assert math.isnan(prophecy_factor(0.0)) and math.isnan(prophecy_factor(float("nan")))
    # the prophecy inverts Spearman-Brown
    assert spearman_brown(0.54, prophecy_factor(0.54, 0.9)) == pytest.approx(0.9)


def test_bootstrap_over_runs():
    draws = bootstrap_runs(4, 100, seed=7)
    assert draws.shape == (100, 4) and draws.min() >= 0 and draws.max() <= 3
    assert (draws == bootstrap_runs(4, 100, seed=7)).all()  # seeded
    assert (draws == np.random.default_rng(7).integers(0, 4, size=(100, 4))).all()
    weights = run_weights(draws, 4)
    assert weights.dtype == float and (weights.sum(1) == 4).all()
    assert weights[0].tolist() == np.bincount(draws[0], minlength=4).tolist()
    assert run_weights(bootstrap_runs(3, 0, seed=0), 3).shape == (0, 3)


def test_percentile_interval():
    values = np.arange(101.0)  # quantiles 0.025 and 0.975: 2.5 and 97.5
    assert percentile_interval(values, 0.95) == pytest.approx((2.5, 97.5))
    assert percentile_interval([1.0, np.nan, 3.0, np.inf], 0.5) == (1.5, 2.5)
    lo, hi = percentile_interval([1.0, np.nan], 0.95)  # one finite draw: no spread
    assert math.isnan(lo) and math.isnan(hi)


def test_stats_is_a_bottom_module():
    imported = {name for name in vars(stats) if not name.startswith("_")}
    assert set(stats.__all__) <= imported
    source = Path(stats.__file__).read_text()
    assert "from rmlens" not in source and "import rmlens" not in source


def test_jsonable_is_the_one_json_sanitizer():
    value = {
        "f": np.float32(0.25),
        "i": np.int64(3),
        "b": np.bool_(True),
        2: (1, 2),
        "nan": float("nan"),
        "inf": np.float64("-inf"),
        "arr": np.array([1.5, np.nan]),
        "nested": [{"x": np.int8(1)}],
        "text": np.str_("a"),
    }
    assert jsonable(value) == {
        "f": 0.25,
        "i": 3,
        "b": True,
        "2": [1, 2],
        "nan": None,
        "inf": None,
        "arr": [1.5, None],
        "nested": [{"x": 1}],
        "text": "a",
    }
    kept = jsonable([np.float64("nan"), np.array([np.int32(1)])], missing=False)
    assert math.isnan(kept[0]) and kept[1] == [1] and type(kept[1][0]) is int
