"""Split-half reliability of TM, TG, CM with every audit (issue 13, item 1)."""

import json

import numpy as np
import pandas as pd
import pytest

from rmlens.memorization import AuditConfig, audit
from rmlens.memorization._plan import make_plan
from rmlens.memorization._reliability import (
    prophecy_factor,
    reliability_warnings,
    runs_needed,
    same_partition,
    spearman_brown,
    split_half,
)
from rmlens.report._sections import quality_section
from rmlens.rewards import FrozenHeadTrainer, HeadConfig

K = 2  # folds per repeat in the planted tables


def planted(n_pairs, repeats, rng, signal=None, noise=1.0, same=False):
    """p (n_pairs, n_runs) and membership of a K=2 plan: pair i is in run 2q + (i + q) % 2.

    p = 0.5 + 0.1 * (signal_i + noise_ir) where the run trains on the pair, else 0.5: TM
    carries the planted signal, TG is constant. ``same``: every run repeats the first.
    """
    n_runs = repeats * K
    runs = np.arange(n_runs)
    member = ((np.arange(n_pairs)[:, None] + runs[None, :] // K) % K) == runs[None, :] % K
    signal = np.zeros(n_pairs) if signal is None else signal
    noise = noise * rng.standard_normal((n_pairs, n_runs))
    if same:
        noise = np.repeat(noise[:, :1], n_runs, axis=1)
    p = np.where(member, 0.5 + 0.01 * (signal[:, None] + noise), 0.5)
    return p, member, np.zeros_like(member), runs // K


def test_spearman_brown_and_prophecy_by_hand():
    assert spearman_brown(0.5, 2) == pytest.approx(2 / 3, abs=1e-3)  # 0.667
    assert spearman_brown(0.37, 2) == pytest.approx(0.540, abs=1e-3)
    assert spearman_brown(0.8, 1) == pytest.approx(0.8)
    # rel 0.54 at 25 runs: 25 * 0.8 * 0.46 / (0.54 * 0.2) = 85.19 runs
    assert 25 * prophecy_factor(0.54) == pytest.approx(85.185, abs=1e-2)
    assert runs_needed(0.54, 25) == 86
    assert runs_needed(0.54, 25, folds=5) == 90  # whole repeats of 5 folds
    assert runs_needed(0.8, 25, folds=5) == 25  # already there
    assert runs_needed(0.0, 25) is None and runs_needed(float("nan"), 25) is None
    # the prophecy inverts Spearman-Brown
    assert spearman_brown(0.54, prophecy_factor(0.54, 0.9)) == pytest.approx(0.9)


def test_identical_halves_give_one():
    rng = np.random.default_rng(0)
    p, member, val, repeat = planted(500, 4, rng, signal=rng.standard_normal(500), same=True)
    rel = split_half(p, member, val, repeat, folds=K, n_splits=5)
    assert rel["tm"]["split_half"] == pytest.approx(1.0)
    assert rel["tm"]["spearman_brown"] == pytest.approx(1.0)
    assert rel["tm"]["split_half_std"] == pytest.approx(0.0)
    assert np.isnan(rel["tg"]["split_half"])  # TG constant: no ranking to correlate
    assert rel["n_runs"] == 8 and rel["n_repeats"] == 4 and rel["n_splits"] == 5


def test_independent_noise_gives_about_zero():
    rng = np.random.default_rng(1)
    p, member, val, repeat = planted(2000, 6, rng)
    rel = split_half(p, member, val, repeat, folds=K, n_splits=10)
    assert abs(rel["tm"]["split_half"]) < 0.15
    assert abs(rel["cm"]["alternating"]) < 0.15
    assert [w["score"] for w in reliability_warnings(rel)] == ["tm", "cm"]  # TG undefined


def test_planted_signal_to_noise_matches_theory():
    # signal variance s2 = 1, per-run noise variance n2 = 4; each half averages h = 3 in-runs
    # per pair (6 repeats of K=2, half the runs train on each pair, 3 repeats per half):
    # reliability of a half's mean = s2 / (s2 + n2 / h) = 1 / (1 + 4/3) = 0.4286
    rng = np.random.default_rng(2)
    n = 3000
    p, member, val, repeat = planted(n, 6, rng, signal=rng.standard_normal(n), noise=2.0)
    rel = split_half(p, member, val, repeat, folds=K, n_splits=1)
    theory = 1 / (1 + 4 / 3)
    assert rel["tm"]["split_half"] == pytest.approx(theory, abs=0.05)  # Spearman ~ Pearson
    assert rel["tm"]["spearman_brown"] == pytest.approx(spearman_brown(theory, 2), abs=0.05)
    assert rel["cm"]["split_half"] == pytest.approx(theory, abs=0.05)  # TG constant here


def test_validation_pairs_and_partial_repeats_are_left_out():
    rng = np.random.default_rng(3)
    p, member, val, repeat = planted(300, 3, rng, signal=rng.standard_normal(300))
    rel = split_half(p[:, :5], member[:, :5], val[:, :5], repeat[:5], folds=K)
    assert rel["n_repeats"] == 2 and rel["n_runs"] == 4  # repeat 2 has one run of two
    one = split_half(p[:, :3], member[:, :3], val[:, :3], repeat[:3], folds=K)
    assert np.isnan(one["cm"]["spearman_brown"]) and "split-half needs 2" in one["reason"]
    assert reliability_warnings(one) == []


def test_same_partition_when_every_repeat_leaves_one_group_out():
    groups = ["a", "b", "c", "d"]
    assert same_partition(make_plan(groups, n_runs=8, n_folds=4), 4)
    assert not same_partition(make_plan(groups * 3 + ["e", "f"], n_runs=8, n_folds=2), 2)


def make_pairs(n: int = 48, users: int = 6) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    good, bad = ["good", "great", "help", "sure"], ["bad", "hate", "never", "sorry"]
    return pd.DataFrame(
        {
            "id": [f"t{i:03d}" for i in range(n)],
            "prompt": [f"what is the {rng.choice(['cat', 'dog'])} ?" for _ in range(n)],
            "chosen": [" ".join(rng.choice(good, 3)) + f" {i % 7}" for i in range(n)],
            "rejected": [" ".join(rng.choice(bad, 3)) + f" {i % 5}" for i in range(n)],
            "user_id": [f"u{i % users}" for i in range(n)],
        }
    )


def test_audit_writes_reliability(tiny_encoder_dir, tmp_path):
    head = HeadConfig(epochs=5, batch_size=16, lr=3e-3)
    config = AuditConfig(runs=6, folds=2, n_boot=20, head=head)
    trainer = FrozenHeadTrainer(
        model=str(tiny_encoder_dir), head=config.resolved().head, cache_dir=tmp_path / "cache"
    )
    out = tmp_path / "audit"
    audit(make_pairs(), config, out, trainer=trainer, quiet=True)
    summary = json.loads((out / "summary.json").read_text())
    rel = summary["reliability"]
    assert rel["n_runs"] == 6 and rel["n_repeats"] == 3 and rel["n_splits"] == 20
    for score in ("tm", "tg", "cm"):
        keys = {"split_half", "spearman_brown", "split_half_std", "runs_for_0_8"}
        assert keys <= set(rel[score])
    unreliable = [w for w in summary["warnings"] if w["code"] == "unreliable"]
    for w in unreliable:
        assert rel[w["score"]]["spearman_brown"] < 0.7
        assert "is not yet reliable" in w["message"]
    section = quality_section(summary)
    assert "Spearman-Brown" in section.html()
