import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from rmlens.memorization import estimate, memorization_scores


def long_tables(margins: dict[str, list[float]], member: dict[str, list[bool]]):
    rows, mem = [], []
    for pid, ms in margins.items():
        for run, m in enumerate(ms):
            rows.append({"run": run, "id": pid, "r_chosen": m / 2, "r_rejected": -m / 2})
            mem.append({"run": run, "id": pid, "in_train": member[pid][run]})
    return pd.DataFrame(rows), pd.DataFrame(mem)


def test_tm_tg_cm_by_hand():
    margins = {"a": [2, 0, -1, 1], "b": [-2, -2, 3, 3], "c": [1, 1, 1, 1]}
    member = {
        "a": [True, True, False, False],
        "b": [True, True, False, False],
        "c": [True, True, True, True],
    }
    table = estimate(*long_tables(margins, member), n_boot=0).set_index("id")
    s = expit
    assert table.loc["a", "tm"] == pytest.approx((s(2) + s(0)) / 2)  # 0.6903985
    assert table.loc["a", "tg"] == pytest.approx((s(-1) + s(1)) / 2)  # 0.5
    assert table.loc["a", "cm"] == pytest.approx(0.6903985 - 0.5, abs=1e-6)
    # mean of sigmoids, not sigmoid of the mean margin
    assert table.loc["a", "tm"] != pytest.approx(s(np.mean([2, 0])))
    # negative CM is kept, never clipped
    assert table.loc["b", "cm"] == pytest.approx(s(-2) - s(3))
    assert table.loc["b", "cm"] < -0.8
    # no out-runs: NaN, reported with its counts
    assert np.isnan(table.loc["c", "tg"]) and np.isnan(table.loc["c", "cm"])
    assert table.loc["c", "tm"] != table.loc["c", "tm"]  # NaN too: CM undefined for the pair
    assert (table.loc["c", "n_in"], table.loc["c", "n_out"]) == (4, 0)
    assert (table.loc["a", "n_in"], table.loc["a", "n_out"]) == (2, 2)


def test_bootstrap_intervals():
    rng = np.random.default_rng(0)
    p = rng.uniform(0.2, 0.9, size=(50, 25))
    p[0] = 0.7  # constant over runs: degenerate interval
    member = np.zeros((50, 25), dtype=bool)
    member[:, :20] = True
    table = memorization_scores(p, member, n_boot=500, seed=1)
    assert table.loc[0, "tm_lo"] == pytest.approx(0.7) and table.loc[0, "tm_hi"] == pytest.approx(
        0.7
    )
    assert table.loc[0, "cm_lo"] == pytest.approx(0.0)
    inside = (table.tm_lo <= table.tm) & (table.tm <= table.tm_hi)
    assert inside.mean() > 0.9
    assert (table.cm_hi - table.cm_lo > 0)[1:].all()
    again = memorization_scores(p, member, n_boot=500, seed=1)
    pd.testing.assert_frame_equal(table, again)


def test_chunking_does_not_change_results():
    rng = np.random.default_rng(3)
    p = rng.uniform(size=(101, 10))
    member = rng.uniform(size=(101, 10)) < 0.7
    a = memorization_scores(p, member, n_boot=50, seed=0, chunk=7)
    b = memorization_scores(p, member, n_boot=50, seed=0, chunk=1000)
    pd.testing.assert_frame_equal(a, b)


def test_a_run_that_did_not_score_a_pair_does_not_count_for_it():
    s = expit
    # pair a: runs 0, 1 in, runs 2, 3 out; run 1 scored it NaN (e.g. a diverged head)
    # pair b: its only in-run scored it NaN, so it has no usable in-run
    p = np.array([[s(2), np.nan, s(-1), s(1)], [np.nan, s(0), s(1), s(3)]])
    member = np.array([[True, True, False, False], [True, False, False, False]])
    table = memorization_scores(p, member, n_boot=0)
    assert (table.loc[0, "n_in"], table.loc[0, "n_out"]) == (1, 2)
    assert table.loc[0, "tm"] == pytest.approx(s(2))  # the NaN run left out, not a NaN TM
    assert table.loc[0, "tg"] == pytest.approx((s(-1) + s(1)) / 2)
    assert table.loc[0, "cm"] == pytest.approx(s(2) - 0.5)
    assert (table.loc[1, "n_in"], table.loc[1, "n_out"]) == (0, 3)  # counted as lacking runs
    assert np.isnan(table.loc[1, ["tm", "tg", "cm"]].to_numpy(float)).all()


def test_bootstrap_ignores_nan_scores():
    rng = np.random.default_rng(2)
    p = rng.uniform(0.3, 0.9, size=(20, 12))
    member = np.zeros((20, 12), dtype=bool)
    member[:, :8] = True
    holed = p.copy()
    holed[:, 0] = np.nan  # run 0 scored nothing: the same as leaving it out
    full = memorization_scores(p[:, 1:], member[:, 1:], n_boot=0)
    table = memorization_scores(holed, member, n_boot=200, seed=0)
    np.testing.assert_allclose(table[["tm", "tg", "cm"]], full[["tm", "tg", "cm"]])
    assert (table.n_in == 7).all() and (table.n_out == 4).all()
    for k in ("tm", "tg", "cm"):
        lo, hi = table[f"{k}_lo"], table[f"{k}_hi"]
        assert lo.notna().all() and hi.notna().all()
        assert ((lo <= table[k] + 1e-9) & (table[k] <= hi + 1e-9)).mean() > 0.9


def test_estimate_counts_only_scored_runs_from_long_tables():
    margins = {"a": [2, 0, -1, 1], "b": [1, 1, 1, 1]}
    member = {"a": [True, True, False, False], "b": [True, False, True, False]}
    scores, membership = long_tables(margins, member)
    scores.loc[(scores.id == "a") & (scores.run == 2), "r_chosen"] = np.nan
    table = estimate(scores, membership, n_boot=0).set_index("id")
    assert (table.loc["a", "n_in"], table.loc["a", "n_out"]) == (2, 1)
    assert table.loc["a", "tg"] == pytest.approx(expit(1))
    assert (table.loc["b", "n_in"], table.loc["b", "n_out"]) == (2, 2)
