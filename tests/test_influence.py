"""Paired counterfactuals beyond the convex head: last-layer influence and its calibration."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from rmlens.influence import LogisticProblem, fit_logistic, last_layer_counterfactuals, refit
from rmlens.memorization import audit, estimate
from rmlens.memorization._config import AuditConfig
from rmlens.memorization._damping import blend, calibrate, choose_damping, damping_warning
from rmlens.memorization._run_folders import load_matrices, load_runs
from rmlens.rewards import HeadConfig, TrainConfig
from test_paired import cli_audit, word_pairs


def _case(n=10, d=3, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(0.3, 1, (n, d))
    u = rng.normal(0, 0.5, d)
    groups = np.array([0, 0, 0, 1, 2, 3, 4, 5, 5, 6])[:n]
    inside = np.zeros(n, dtype=bool)
    inside[:7] = True
    outside = ~inside
    outside[-1] = False  # a validation pair: neither in nor out
    return z, u, groups, inside, outside


def test_last_layer_step_by_hand():
    z, u, groups, inside, outside = _case()
    p, p_cf, lambdas = last_layer_counterfactuals(z, u, groups, inside, outside, damping=(0.5,))
    s = expit(z @ u) * (1 - expit(z @ u))
    lam = 0.5 * float(s[inside] @ (z[inside] ** 2).sum(1)) / z.shape[1]
    assert lambdas[0] == pytest.approx(lam)
    np.testing.assert_allclose(p, expit(z @ u))
    H = (z[inside] * s[inside, None]).T @ z[inside] + lam * np.eye(z.shape[1])
    for i in np.flatnonzero(inside | outside):
        rows = np.flatnonzero((groups == groups[i]) & (inside | outside))
        sign = -1 if inside[i] else 1
        zg = z[rows]
        changed = H + sign * (zg * s[rows, None]).T @ zg
        grad = zg.T @ (expit(zg @ u) - 1)
        u_g = u - sign * np.linalg.solve(changed, grad)
        assert p_cf[i, 0] == pytest.approx(expit(z[i] @ u_g), abs=1e-12)
    assert np.isnan(p_cf[~(inside | outside)]).all()


def test_damping_shrinks_the_effects_towards_none():
    z, u, groups, inside, outside = _case()
    p, p_cf, _ = last_layer_counterfactuals(z, u, groups, inside, outside)
    used = inside | outside
    effect = np.abs(p_cf[used] - p[used, None]).mean(0)
    assert (np.diff(effect) <= 1e-12).all() and effect[0] > 100 * effect[-1]
    sign = np.where(inside, 1, -1)[used]
    assert (sign[:, None] * (p[used, None] - p_cf[used]) > 0).all()  # a pair helps itself


def test_last_layer_at_a_convex_optimum_is_the_newton_step():
    """At the optimum of the L2 problem, damping = its lambda gives the convex head's Newton
    step: close to exact refits."""
    rng = np.random.default_rng(1)
    z = rng.normal(0.2, 1, (80, 4))
    problem = LogisticProblem(z, np.ones(80), np.zeros(80))
    inside = np.arange(80) < 60
    lam = 5.0
    u = fit_logistic(problem.take(inside), lam)
    s = expit(z[inside] @ u) * (1 - expit(z[inside] @ u))
    scale = float(s @ (z[inside] ** 2).sum(1)) / 4
    groups = np.arange(80) // 2
    p, p_cf, lambdas = last_layer_counterfactuals(z, u, groups, inside, ~inside,
                                                  damping=(lam / scale,))  # fmt: skip
    assert lambdas[0] == pytest.approx(lam)
    for g in (3, 35):  # a training group and a held-out one, 2 pairs each (3% of the run)
        rows = np.flatnonzero(groups == g)
        exact = refit(problem, u, lam, inside, rows)
        error, effect = np.abs(p_cf[rows, 0] - exact), np.abs(exact - p[rows])
        assert (error < 2e-3).all() and (error < 0.1 * effect).all()


def test_choose_damping_brackets_and_interpolates():
    grid = [0.1, 1.0, 10.0]
    sums = np.array([[0.4, 0.2, 0.1], [0.0, 0.0, 0.0]])  # per pair, per grid value
    counts = np.array([2.0, 2.0])
    brute = np.array([0.15, 0.0])  # mean 0.075; paired means 0.1, 0.05, 0.025
    k, t, record = choose_damping(brute, sums, counts, grid)
    assert k == 0 and t == pytest.approx(0.5)
    assert record["paired_mean_cm"] == pytest.approx([0.1, 0.05, 0.025])
    assert record["brute_mean_cm"] == pytest.approx(0.075)
    assert record["damping"] == pytest.approx(np.sqrt(0.1)) and "edge" not in record
    k, t, record = choose_damping(brute * 10, sums, counts, grid)
    assert (k, t) == (0, 0.0) and "smallest" in record["edge"]
    k, t, record = choose_damping(brute * 0 - 1, sums, counts, grid)
    assert (k, t) == (2, 0.0) and "largest" in record["edge"]
    assert "largest" in damping_warning(record)["message"]
    assert record["edge"].startswith("brute force's mean CM")
    _, _, record = choose_damping(brute * 0 - 1, sums, counts, grid, "the split's mean CM")
    assert record["edge"].startswith("the split's mean CM (-1.0000)")  # a checkpoint's target
    grid_values = np.array([[0.2, 0.4], [0.6, 0.8]])
    np.testing.assert_allclose(blend(grid_values, 0, 0.25), [0.25, 0.65])


def test_calibrate_by_hand():
    # 2 pairs, 2 runs: pair 0 in run 0 and out of run 1, pair 1 the other way round
    p = np.array([[0.8, 0.5], [0.5, 0.7]])
    member = np.array([[True, False], [False, True]])
    val = np.zeros_like(member)
    # brute CM: 0.8 - 0.5 = 0.3 and 0.7 - 0.5 = 0.2, mean 0.25
    # grid 0: p_cf = p -/+ 0.4 (paired CM 0.4 each), grid 1: p -/+ 0.1 (0.1 each)
    sign = np.where(member, 1, -1)
    grid = np.stack([p - sign * 0.4, p - sign * 0.1], axis=2)
    p_cf, record = calibrate(p, grid, member, val, grid=[1.0, 100.0])
    assert record["brute_mean_cm"] == pytest.approx(0.25)
    np.testing.assert_allclose(p_cf, p - sign * 0.25)  # t = 0.5: halfway
    assert record["damping"] == pytest.approx(10.0)


@pytest.fixture(scope="module")
def mlp_audit(tmp_path_factory, tiny_encoder_dir):
    from rmlens.rewards import FrozenHeadTrainer

    root = tmp_path_factory.mktemp("influence")
    pairs = word_pairs()
    cfg = AuditConfig(runs=6, folds=3, n_boot=50, estimator="paired",
                      head=HeadConfig(head="mlp", hidden_dim=16, epochs=6))  # fmt: skip

    def trainer():
        return FrozenHeadTrainer(cfg.head, model=str(tiny_encoder_dir),
                                 cache_dir=root / "cache")  # fmt: skip

    out = root / "a"
    table = audit(pairs, cfg, out=out, trainer=trainer(), quiet=True)
    return pairs, cfg, trainer, out, table


def test_mlp_paired_audit_end_to_end(mlp_audit):
    pairs, cfg, trainer, out, table = mlp_audit
    summary = json.loads((out / "summary.json").read_text())
    assert summary["estimator"] == "paired" and "last-layer" in summary["estimator_note"]
    assert "exactness" not in summary  # no exact refit of an MLP head: none claimed
    damping = summary["damping"]
    scores = pd.read_parquet(out / "runs" / "000" / "scores.parquet")
    manifest = json.loads((out / "runs" / "000" / "manifest.json").read_text())
    grid = np.stack(scores.p_cf_grid.to_numpy())
    assert grid.shape == (len(scores), len(manifest["metrics"]["damping_grid"]))
    val = scores.id.isin(manifest["val_ids"]).to_numpy()
    assert np.isnan(grid[val]).all() and np.isfinite(grid[~val]).all()
    # calibrated: the mean paired CM equals brute force's over the same runs and pairs
    assert "edge" not in damping
    assert table.cm.mean() == pytest.approx(damping["brute_mean_cm"], abs=1e-9)
    check = damping["brute_check"]
    assert check["pairs"] == len(table) and -1 <= check["spearman"] <= 1
    assert summary["reliability"]["cm"]["spearman_brown"] > 0.5
    # every reader gives the same calibrated p_cf
    m = load_matrices(out)
    scores_long, members = load_runs(out)
    again = estimate(scores_long, members, n_boot=0).set_index("id")
    np.testing.assert_allclose(again.cm, table.set_index("id").cm.loc[again.index], atol=1e-12)
    assert m.damping["damping"] == pytest.approx(damping["damping"])
    # resume: nothing redone, identical tables
    stamp = (out / "runs" / "000" / "manifest.json").stat().st_mtime_ns
    pd.testing.assert_frame_equal(table, audit(pairs, cfg, out=out, trainer=trainer(), quiet=True))
    assert (out / "runs" / "000" / "manifest.json").stat().st_mtime_ns == stamp


def test_mlp_paired_counterfactuals_are_not_refitted():
    with pytest.raises(ValueError, match="`check_exact` applies to .* the convex head"):
        AuditConfig(estimator="paired", check_exact=2, head=HeadConfig(head="mlp")).check()
    with pytest.raises(ValueError, match="estimator"):
        AuditConfig(estimator="paired", head=HeadConfig(head="mlp", objective="group_dro")).check()
    with pytest.raises(ValueError, match="estimator"):
        AuditConfig(estimator="paired", mode="finetune",
                    train=TrainConfig(rm_kind="implicit")).check()
    cfg = AuditConfig(head=HeadConfig(head="mlp"))
    assert cfg.counterfactuals == "last-layer" and not cfg.pairable  # brute unless asked


def test_finetuned_explicit_rm_gives_paired_counterfactuals(tiny_causal_dir, tmp_path):
    pairs = word_pairs(24, 6)
    train = TrainConfig(epochs=1, batch_size=8, lr=5e-3, head_lr=5e-3, lr_grid=(), device="cpu")
    cfg = AuditConfig(model=str(tiny_causal_dir), mode="finetune", train=train, runs=3,
                      folds=3, n_boot=20, estimator="paired", max_length=24)  # fmt: skip
    out = tmp_path / "ft"
    table = audit(pairs, cfg, out=out, quiet=True)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["estimator"] == "paired" and "damping" in summary
    scores = pd.read_parquet(out / "runs" / "000" / "scores.parquet")
    manifest = json.loads((out / "runs" / "000" / "manifest.json").read_text())
    # p is the run's RM: sigmoid of its rewards' difference
    np.testing.assert_allclose(scores.p, expit(scores.r_chosen - scores.r_rejected), atol=1e-6)
    assert len(manifest["metrics"]["damping_l2"]) == len(manifest["metrics"]["damping_grid"])
    assert table.cm.notna().all()


def test_cli_mlp_paired_audit_says_how_it_was_calibrated(
    tmp_path, tiny_encoder_dir, monkeypatch, capsys
):
    code, _, out = cli_audit(tmp_path, tiny_encoder_dir, monkeypatch, "--head", "mlp",
                             "--hidden-dim", "16", "--estimator", "paired")  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "last-layer Gauss-Newton influence" in printed
    assert "Last-layer influence: damping" in printed and "Spearman" in printed
    page = (out / "report.html").read_text()
    assert "Last-layer influence: damping" in page
