"""Sweep statistics against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rmlens.tokens import (
    agreement,
    framing,
    frequency_bias,
    moments,
    rank_biased_overlap,
    top_bottom,
    word_features,
)
from rmlens.tokens._stats import ols


def sweep_frame(decoded, scores, prompt="p"):
    scores = np.asarray(scores, dtype=float)
    order = np.argsort(-scores, kind="stable")
    rank = np.empty(len(scores), dtype=int)
    rank[order] = np.arange(1, len(scores) + 1)
    return pd.DataFrame({"token_id": np.arange(len(scores)), "token": decoded,
                         "decoded": decoded, "prompt": prompt, "score": scores, "rank": rank})


def test_moments_by_hand():
    # x - mean = (-3, -2, -1, 0, 6): m2 = 50/5 = 10, m3 = 180/5 = 36, m4 = 1394/5 = 278.8
    m = moments([1, 2, 3, 4, 10])
    assert m["n"] == 5 and m["mean"] == pytest.approx(4.0)
    assert m["std"] == pytest.approx(math.sqrt(50 / 4))
    assert m["skew"] == pytest.approx(36 / 10**1.5)
    assert m["kurtosis"] == pytest.approx(278.8 / 100 - 3)
    assert math.isnan(moments([1.0])["std"])


def test_rbo_by_hand():
    p = 0.9
    assert rank_biased_overlap("abc", "abc", p) == pytest.approx(1.0)
    assert rank_biased_overlap("abc", "xyz", p) == pytest.approx(0.0)
    # X = (1, 1, 3): (1-p)/p * (1*.9 + 1/2*.81 + 3/3*.729) + 3/3*.729
    assert rank_biased_overlap("abc", "acb", p) == pytest.approx(2.034 / 9 + 0.729)
    # X = (0, 1, 3): (1-p)/p * (0 + 1/2*.81 + .729) + .729
    assert rank_biased_overlap("abc", "cba", p) == pytest.approx(1.134 / 9 + 0.729)
    # uneven (eq. 32): a prefix of the other ranking extrapolates to full agreement
    assert rank_biased_overlap("ab", "abc", p) == pytest.approx(1.0)
    # s=1, l=2, X = (0, 0): the tail terms vanish, only the extrapolated term p^l * X_s/s = 0
    assert rank_biased_overlap("a", "bc", p) == pytest.approx(0.0)
    # s=1, l=2, X_1 = 0, X_2 = 1: (1-p)/p*(1/2*.81 + 0) + ((1-0)/2 + 0)*.81
    assert rank_biased_overlap("a", "ba", p) == pytest.approx(0.1 / 0.9 * 0.405 + 0.405)
    with pytest.raises(ValueError):
        rank_biased_overlap("ab", "ab", p=1.0)


def test_agreement_by_hand():
    a = sweep_frame(["w", "x", "y", "z", "dup", "dup", "only_a"], [4, 3, 2, 1, 9, 8, 0])
    b = sweep_frame(["w", "x", "y", "z", "dup", "only_b"], [4, 3, 1, 2, 5, -1])
    row = agreement({"a": a, "b": b}).iloc[0]
    # shared unique texts: w x y z ("dup" occurs twice in a); one discordant pair of six
    assert row.n_shared == 4
    assert row.kendall_tau == pytest.approx((5 - 1) / 6)
    assert row.spearman == pytest.approx(1 - 6 * 2 / (4 * 15))
    assert row.rbo == pytest.approx(rank_biased_overlap("wxyz", "wxzy"))


def test_framing_and_top_bottom():
    decoded = ["a", "b", "c", "d"]
    frame = pd.concat([sweep_frame(decoded, [4, 3, 2, 1], "best"),
                       sweep_frame(decoded, [1, 2, 3, 4], "worst")])
    row = framing(frame, k=2).iloc[0]
    assert (row.prompt_a, row.prompt_b, row.n) == ("best", "worst", 4)
    assert row.spearman == pytest.approx(-1.0) and row.kendall_tau == pytest.approx(-1.0)
    assert row.mean_diff == pytest.approx(0.0) and row.top_overlap == 0.0
    ext = top_bottom(frame, k=2)
    best = ext[ext.prompt == "best"]
    assert list(best[best.side == "top"].decoded) == ["a", "b"]
    assert list(best[best.side == "bottom"].decoded) == ["d", "c"]


def test_ols_recovers_coefficients_and_interval():
    rng = np.random.default_rng(0)
    x = np.column_stack([np.ones(200), rng.normal(size=200), rng.normal(size=200)])
    y = x @ np.array([1.0, 2.0, -3.0]) + rng.normal(scale=0.1, size=200)
    fit = ols(x, y)
    np.testing.assert_allclose(fit["beta"], [1, 2, -3], atol=0.05)
    assert np.all(fit["lo"] < fit["beta"]) and np.all(fit["beta"] < fit["hi"])
    exact = ols(x[:5], x[:5] @ np.array([1.0, 2.0, -3.0]))
    np.testing.assert_allclose(exact["beta"], [1, 2, -3], atol=1e-9)


def test_frequency_bias_recovers_planted_slope():
    pytest.importorskip("wordfreq")
    words = [" the", "of", " love", " hate", " peace", " war", "zebra", " xylophone", " good",
             " bad", "house", " quantum", "!!", "12", " happy", " sad", "tree", " joy"]
    feats = word_features(words)
    assert not feats.is_word[words.index("!!")] and not feats.is_word[words.index("12")]
    assert feats.valence[words.index(" love")] > 0 > feats.valence[words.index(" hate")]
    scores = 0.5 * feats.zipf + 2.0 * feats.valence + 1.0
    row = frequency_bias(sweep_frame(words, scores)).iloc[0]
    assert row.n_words == int(feats.is_word.sum())
    assert row.coef_log_freq == pytest.approx(0.5, abs=1e-6)
    assert row.coef_valence == pytest.approx(2.0, abs=1e-6)
    assert row.coef_log_freq_lo <= 0.5 <= row.coef_log_freq_hi


def test_frequency_bias_without_sentiment_words_drops_the_control():
    pytest.importorskip("wordfreq")
    words = [" the", "of", "house", " tree", "zebra", " table", "water", " window"]
    feats = word_features(words)
    assert (feats.valence == 0).all()
    with np.errstate(all="raise"):
        row = frequency_bias(sweep_frame(words, 2.0 - 0.25 * feats.zipf)).iloc[0]
    assert row.coef_log_freq == pytest.approx(-0.25, abs=1e-6)
    assert math.isnan(row.coef_valence)
