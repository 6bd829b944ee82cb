"""The exact best-of-n estimator (DESIGN.md section 8) against enumeration and sampling."""

import itertools
import math

import numpy as np
import pytest

from rmlens.stats import best_of_n, best_of_n_weights, kl_best_of_n


def enumerate_best_of_n(proxy, values, n):
    """Mean over every n-subset of the value of its best item by proxy; ties split evenly."""
    total = 0.0
    subsets = list(itertools.combinations(range(len(proxy)), n))
    for subset in subsets:
        top = max(proxy[i] for i in subset)
        tied = [values[i] for i in subset if proxy[i] == top]
        total += sum(tied) / len(tied)
    return total / len(subsets)


@pytest.mark.parametrize("N", [1, 2, 5, 7])
def test_weights_are_the_order_statistics_of_a_draw_without_replacement(N):
    for n in range(1, N + 1):
        w = best_of_n_weights(N, n)
        assert w.sum() == pytest.approx(1.0)
        by_hand = [math.comb(i - 1, n - 1) / math.comb(N, n) for i in range(1, N + 1)]
        np.testing.assert_allclose(w, by_hand, rtol=1e-12, atol=0)
    np.testing.assert_allclose(best_of_n_weights(N, 1), np.full(N, 1 / N))
    assert best_of_n_weights(N, N)[-1] == pytest.approx(1.0)


def test_weights_stay_finite_for_the_pool_sizes_of_the_issue():
    w = best_of_n_weights(256, 64)
    assert np.isfinite(w).all() and w.sum() == pytest.approx(1.0)
    assert (w[:63] == 0).all() and w[-1] == pytest.approx(64 / 256)


def test_the_estimate_equals_enumeration_over_every_subset_ties_included():
    rng = np.random.default_rng(0)
    for _ in range(20):
        N = int(rng.integers(2, 8))
        proxy = rng.integers(0, 3, N).astype(float)  # few values: many ties
        values = rng.normal(size=N)
        got = best_of_n(proxy, values, range(1, N + 1))
        want = [enumerate_best_of_n(proxy, values, n) for n in range(1, N + 1)]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_the_estimate_agrees_with_monte_carlo():
    rng = np.random.default_rng(1)
    proxy, gold = rng.normal(size=40), rng.normal(size=40)
    for n in (1, 4, 16):
        draws = np.array([rng.choice(40, n, replace=False) for _ in range(40_000)])
        picked = draws[np.arange(len(draws)), proxy[draws].argmax(axis=1)]
        mc = gold[picked]
        exact = best_of_n(proxy, gold, [n])[0]
        assert abs(mc.mean() - exact) < 4 * mc.std() / np.sqrt(len(mc))


def test_pools_are_rows_and_shapes_must_match():
    proxy = np.array([[0.1, 0.4, 0.3], [3.0, 2.0, 1.0]])
    gold = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    out = best_of_n(proxy, gold, [1, 3])
    np.testing.assert_allclose(out, [[2.0, 2.0], [2.0, 1.0]])
    with pytest.raises(ValueError, match="`values` has shape"):
        best_of_n(proxy, gold[:, :2], [1])
    with pytest.raises(ValueError, match=r"`n` must be in \[1, 3\]"):
        best_of_n(proxy, gold, [4])


def test_kl_bound_is_zero_at_one_and_grows_like_log_n():
    kl = kl_best_of_n([1, 2, 4, 256])
    assert kl[0] == 0.0 and (np.diff(kl) > 0).all()
    assert kl[-1] == pytest.approx(math.log(256) - 255 / 256)


def test_a_length_proxy_is_hacked_where_length_opposes_gold_and_the_oracle_never_falls():
    """Length picks; gold falls with length: the proxy's gold curve falls as n grows, while
    best-of-n by gold itself (the oracle) never falls."""
    rng = np.random.default_rng(2)
    length = rng.uniform(10, 500, size=(50, 64))
    gold = -0.01 * length + rng.normal(0, 0.5, size=length.shape)
    ns = [1, 2, 4, 8, 16, 32, 64]
    proxy_gold = best_of_n(length, gold, ns).mean(axis=0)
    oracle = best_of_n(gold, gold, ns).mean(axis=0)
    assert (np.diff(proxy_gold) < 0).all()
    assert (np.diff(oracle) >= 0).all()
    assert (oracle >= proxy_gold).all()
    assert (np.diff(best_of_n(length, length, ns).mean(axis=0)) > 0).all()  # proxy rises
