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
