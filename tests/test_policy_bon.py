"""The overoptimization finding's estimators on hand-made curves (benchmarks/findings/
policy_bon.py, issue 59 item 2): the cross-fitted fall (rmlens.stats.cross_fitted_fall,
which ``rmlens overoptimize``'s gold_drop also reads) and the ensembles of runs."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "benchmarks") not in sys.path:  # after the installed packages
    sys.path.append(str(ROOT / "benchmarks"))
policy_bon = importlib.import_module("findings.policy_bon")
cross_fitted_fall = policy_bon.cross_fitted_fall  # rmlens.stats's, as the finding reads it


def test_a_rising_curve_does_not_fall_and_a_peaked_one_falls_by_hand():
    half = np.array([True, True, False, False])
    rising = np.array([[0.0, 1.0, 2.0]] * 4)
    assert cross_fitted_fall(rising, half).tolist() == [0.0] * 4
    # the other half's mean curve peaks at n index 1 for both halves
    peaked = np.array([[0.0, 2.0, 1.0], [0.0, 1.0, 0.5], [0.0, 3.0, 0.0], [0.0, 1.0, 1.0]])
    assert cross_fitted_fall(peaked, half).tolist() == [1.0, 0.5, 3.0, 0.0]


def test_the_peak_is_read_from_the_other_half_not_the_curve_measured():
    """A prompt whose own curve peaks early while the other half rises counts a negative
    fall: noise in the measured half cannot make a fall."""
    half = np.array([True, False])
    curve = np.array([[0.0, 2.0, 1.0], [0.0, 1.0, 2.0]])
    # row 0's peak comes from row 1 (the last n): 0; row 1's from row 0 (index 1): 1 - 2
    assert cross_fitted_fall(curve, half).tolist() == [0.0, -1.0]
    reversed_ = curve[:, ::-1]  # rows [1, 2, 0] and [2, 1, 0]: each run its own peaks
    runs = np.stack([curve, reversed_])  # (R, P, K)
    # run 1: row 0 peaks where row 1 does (index 0): 1 - 0; row 1 where row 0 does: 1 - 0
    assert cross_fitted_fall(runs, half).tolist() == [[0.0, -1.0], [1.0, 1.0]]


def test_the_ensembles_combine_the_runs_z_scores_by_hand():
    z = np.array([[[1.0, -1.0]], [[3.0, -1.0]]])  # (R=2, P=1, N=2)
    assert policy_bon.ensemble(z, "mean").tolist() == [[2.0, -1.0]]
    assert policy_bon.ensemble(z, "min").tolist() == [[1.0, -1.0]]
    assert policy_bon.ensemble(z, "uwo").tolist() == [[2.0 - 0.5 * 1.0, -1.0]]


def test_the_interval_resamples_units_and_prompts():
    same = np.ones((3, 5))
    assert policy_bon.boot(same, np.random.default_rng(0), n_boot=50) == (1.0, 1.0)
    spread = np.arange(15.0).reshape(3, 5)
    lo, hi = policy_bon.boot(spread, np.random.default_rng(0), n_boot=200)
    assert lo < spread.mean() < hi
    assert policy_bon.boot(spread[:1], np.random.default_rng(0), n_boot=200) != (lo, hi)


def test_a_split_with_one_side_empty_is_refused():
    with pytest.raises(ValueError, match="both sides"):
        cross_fitted_fall(np.zeros((2, 3)), np.array([True, True]))


@pytest.mark.parametrize("kind", ["mean", "min", "uwo"])
def test_an_ensemble_of_one_run_is_that_run(kind):
    z = np.random.default_rng(1).normal(size=(1, 3, 4))
    assert np.allclose(policy_bon.ensemble(z, kind), z[0])
