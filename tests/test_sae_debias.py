"""Training-free debiasing through the SAE lens (`rmlens sae DIR --out DEBIASED_DIR`): the
projection's math, the rule on a constructed table, the debiased directory as an audit
that `rmlens compare` reads, and the refusals (MLP heads, options without --out)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import run_cli
from rmlens._errors import InputError, RmlensWarning
from rmlens._params import ParamError
from rmlens.sae import DebiasConfig, project_head, shortcut_latents
from rmlens.sae._debias import orthonormal_basis, projected, split_halves
from test_sae import FAST, tiny_pairs

# -- the projection ---------------------------------------------------------------------------


def reward(w, b, mean, scale, h):
    """The head before: r = w . (h - mean) / scale + b."""
    return (np.asarray(h) - mean) / scale @ w + b


def test_a_head_along_a_direction_keeps_no_weight_there():
    # w / s = (2, 0, 0) lies along u = e1: nothing is left; b' keeps r(mean) = b
    mean, scale = np.array([1.0, 2.0, 3.0]), np.array([2.0, 1.0, 1.0])
    w, b = project_head([4.0, 0.0, 0.0], 0.5, mean, scale, [[3.0, 0.0, 0.0]])
    np.testing.assert_allclose(w, 0.0)
    assert b == pytest.approx(0.5)


def test_projection_by_hand():
    # w / s = (1, 2, 3); u = (1, 1, 0) / sqrt 2: (w / s) . u = 3 / sqrt 2, so
    # w' = (1, 2, 3) - 3/2 (1, 1, 0) = (-0.5, 0.5, 3); b' = b - w' . mean
    mean, scale = np.array([1.0, 1.0, 1.0]), np.ones(3)
    w, b = project_head([1.0, 2.0, 3.0], 0.0, mean, scale, [[1.0, 1.0, 0.0]])
    np.testing.assert_allclose(w, [-0.5, 0.5, 3.0])
    assert b == pytest.approx(-3.0)


def test_mean_response_and_orthogonal_moves_keep_their_reward():
    rng = np.random.default_rng(0)
    d = 12
    w0, mean, scale = rng.normal(size=d), rng.normal(size=d), rng.uniform(0.5, 2.0, d)
    dirs = rng.normal(size=(3, d))
    dirs = np.vstack([dirs, dirs[0] + 2 * dirs[1]])  # a dependent fourth: the same span
    w, b = project_head(w0, 0.7, mean, scale, dirs)
    q = orthonormal_basis(dirs)
    assert q.shape == (d, 3)
    np.testing.assert_allclose(dirs @ w, 0.0, atol=1e-10)  # no weight along any direction
    assert w @ mean + b == pytest.approx(reward(w0, 0.7, mean, scale, mean))  # r'(mu) = r(mu)
    v = rng.normal(size=(5, d))
    v -= v @ q @ q.T  # moves orthogonal to every direction
    h = mean + v
    np.testing.assert_allclose(h @ w + b, reward(w0, 0.7, mean, scale, h), atol=1e-10)
    along = mean + 2.0 * dirs[0]  # a move along a direction no longer changes the reward
    assert along @ w + b == pytest.approx(b + w @ mean)


def test_projected_head_scores_as_the_formula():
    from rmlens.rewards._head import HeadRM, RewardHead
    from rmlens.rewards.frozen import HeadConfig

    rng = np.random.default_rng(1)
    d = 6
    head = HeadRM(HeadConfig(head="linear"))
    head.head_ = RewardHead(d, head.config).eval()
    mean, scale, w0 = rng.normal(size=d), rng.uniform(0.5, 2.0, d), rng.normal(size=d)
    with torch.no_grad():
        head.head_.mean.copy_(torch.as_tensor(mean))
        head.head_.scale.copy_(torch.as_tensor(scale))
        head.head_.net.weight.copy_(torch.as_tensor(w0).reshape(1, -1))
        head.head_.net.bias.fill_(0.3)
    dirs = rng.normal(size=(2, d))
    new = projected(head, dirs)
    w, b = project_head(w0, 0.3, mean, scale, dirs)
    h = rng.normal(size=(20, d))
    np.testing.assert_allclose(new.score_features(h), h @ w + b, atol=1e-5)
    np.testing.assert_allclose(head.score_features(h), reward(w0, 0.3, mean, scale, h), atol=1e-5)
    assert head.head_.net.weight.detach().numpy()[0] == pytest.approx(w0)  # the original kept


# -- the rule ---------------------------------------------------------------------------------


def constructed(n_runs: int = 8):
    """Four latents, their correlates and per-run head weights:

    7: tied to length (rho 0.8), heavily weighted in every run, stable   -> picked
    3: heavily weighted and stable but tied to nothing (rho 0.1)         -> not tied
    5: tied to a model (rho 0.9) but barely weighted                     -> not weighted
    9: tied to refusal (rho -0.7), weighted on average, but only in half 0 -> not stable
    """
    correlations = pd.DataFrame({
        "latent": [7, 3, 5, 9],
        "len_words": [0.8, 0.1, 0.0, 0.1],
        "model=m1": [0.0, 0.05, 0.9, 0.0],
        "refusal": [0.1, 0.0, 0.0, -0.7],
        "sentiment": [0.2, 0.95, 0.0, 0.0],  # no shortcut: 3's strong tie does not count
    })  # fmt: skip
    half = np.arange(n_runs) % 2
    weights = np.empty((n_runs, 4))
    weights[:, 0] = 2.0  # 7
    weights[:, 1] = -3.0  # 3
    weights[:, 2] = 0.05  # 5
    weights[:, 3] = np.where(half == 0, 4.0, 0.2)  # 9: mean 2.1, same sign, weak in half 1
    return correlations, weights, half


def test_rule_picks_the_planted_shortcut_latent_only():
    correlations, weights, half = constructed()
    rule = shortcut_latents(correlations, weights, half, DebiasConfig(weight_quantile=0.25))
    by = rule.set_index("latent")
    assert by.loc[7, ["tied", "weighted", "stable", "picked"]].tolist() == [True] * 4
    assert by.loc[7, "feature"] == "len_words" and by.loc[7, "spearman"] == pytest.approx(0.8)
    assert by.loc[3, "picked"] == False and by.loc[3, "tied"] == False  # noqa: E712
    assert by.loc[5, "tied"] == True and by.loc[5, "weighted"] == False  # noqa: E712
    assert by.loc[9, "tied"] == True and by.loc[9, "stable"] == False  # noqa: E712
    assert by.loc[9, "weight_mean"] == pytest.approx(2.1)
    # threshold: the 0.25 quantile of |mean| over (0.05, 2, 2.1, 3) = 0.05 + 0.75 * 1.95;
    # 9 reaches it overall (2.1) and in half 0 (4.0), not in half 1 (0.2)
    assert by.loc[7, "weight_threshold"] == pytest.approx(1.5125)
    assert rule.latent[rule.picked].tolist() == [7]
    assert rule.latent.tolist() == [3, 9, 7, 5]  # strongest weight first


def test_rule_sign_agreement_and_halves():
    correlations, weights, half = constructed()
    weights[:3, 0] = -2.0  # 7: 3 of 8 runs against the mean's sign: 62% agree
    rule = shortcut_latents(correlations, weights, half, DebiasConfig(weight_quantile=0.25))
    row = rule.set_index("latent").loc[7]
    assert row.sign_agreement == pytest.approx(5 / 8) and not row.weighted
    assert split_halves([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 5)[0].tolist() == [0] * 5 + [1] * 5
    assert split_halves([0, 1, 2], 5)[0].tolist() == [0, 1, 0]  # one repeat: alternating runs
    with pytest.raises(InputError, match="two halves"):
        shortcut_latents(correlations, weights[:1], half[:1])


def test_config_checks():
    assert DebiasConfig(suppress="12, 40,12").latents == [12, 40]
    assert DebiasConfig().latents is None
    with pytest.raises(ParamError, match="suppress"):
        DebiasConfig(suppress="12;x").check()
    with pytest.raises(ParamError, match="min_correlation.*default with latent numbers"):
        DebiasConfig(suppress="3", min_correlation=0.2).check()


# -- the debiased directory ------------------------------------------------------------------


@pytest.fixture(scope="module")
def audits(tmp_path_factory, tiny_encoder_dir):
    """A tiny frozen audit with its SAE lens, and a tiny MLP audit (no lens)."""
    from rmlens.memorization import AuditConfig, audit
    from rmlens.rewards.frozen import HeadConfig
    from rmlens.sae import fit_sae

    root = tmp_path_factory.mktemp("sae-debias")
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        warnings.simplefilter("ignore", RmlensWarning)  # tiny audits: weak, few runs
        mp.setenv("RMLENS_CACHE", str(root / "cache"))
        config = AuditConfig(model=str(tiny_encoder_dir), runs=4, folds=2, n_boot=0)
        audit(tiny_pairs(), config, out=root / "audit", quiet=True)
        lens = fit_sae(root / "audit", quiet=True, **FAST)
        mlp = config.replace(runs=2, head=HeadConfig(head="mlp", epochs=3, patience=0))
        audit(tiny_pairs(), mlp, out=root / "mlp", quiet=True)
    weighted = max(lens.cards, key=lambda c: abs(c["head_weight"]["mean"]))["latent"]
    return root, weighted


@pytest.fixture
def env(audits, monkeypatch):
    root, weighted = audits
    monkeypatch.setenv("RMLENS_CACHE", str(root / "cache"))
    return root, weighted


def test_debiased_directory_is_an_audit_that_compare_reads(env):
    root, latent = env
    audit, out = root / "audit", root / "cmp" / "sae_debias"
    fast = [f"--{k.replace('_', '-')}={v}" for k, v in FAST.items()]
    result = run_cli(["sae", audit, *fast, "--out", out, "--suppress", str(latent), "--quiet"])
    assert result.exit_code == 0, result.output
    assert f"sae_{latent}" in result.stdout and "held-out accuracy" in result.stdout
    for name in ("config.json", "plan.parquet", "memorization.parquet", "summary.json",
                 "memorization_map.png"):  # fmt: skip
        assert (out / name).is_file(), name
    record = json.loads((out / "config.json").read_text())
    assert record["audit"]["head"]["objective"] == "sae_debias"
    assert record["estimator"] == "brute" and record["debias"]["latents"] == [latent]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["estimator"] == "brute" and "brute force" in summary["estimator_note"]
    assert summary["objective"]["objective"] == "sae_debias"
    assert set(summary["debias"]["figures"]) >= {"heldout_accuracy", "margin_length_corr_abs"}
    assert summary["debias"]["figures"]["score_check_max_abs"] < 1e-4  # the audit's features
    pd.testing.assert_frame_equal(pd.read_parquet(out / "plan.parquet"),
                                  pd.read_parquet(audit / "plan.parquet"))  # fmt: skip
    for run in range(4):
        was = pd.read_parquet(audit / f"runs/{run:03d}/scores.parquet")
        now = pd.read_parquet(out / f"runs/{run:03d}/scores.parquet")
        assert list(now.columns) == ["id", "r_chosen", "r_rejected"]
        assert now.id.tolist() == was.id.tolist()
        manifest = json.loads((out / f"runs/{run:03d}/manifest.json").read_text())
        assert manifest["train_ids"] == json.loads(
            (audit / f"runs/{run:03d}/manifest.json").read_text())["train_ids"]  # fmt: skip
    table = pd.read_parquet(out / "memorization.parquet")
    assert len(table) == len(tiny_pairs()) and {"tm", "tg", "cm", "group"} <= set(table)

    # the saved RMs are the projected heads: load_rm scores as the scores file says
    from rmlens import load_rm

    rm = load_rm(out)
    pairs = tiny_pairs().set_index("id").loc[now.id].reset_index()
    r_c, _ = rm.members[3].score_pairs(pairs)
    np.testing.assert_allclose(r_c, now.r_chosen, atol=1e-4)

    result = run_cli(["compare", audit, out, "--out", root / "cmp", "--no-shap", "--no-probes",
                      "--quiet"], env={"COLUMNS": "200"})  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "sae_debias" in result.stdout
    figures = pd.read_parquet(root / "cmp" / "compare.parquet")
    assert {"audit", "sae_debias"} <= set(figures.audit)
    assert "sae_debias" in (root / "cmp" / "compare.html").read_text()
    audits = json.loads((root / "cmp" / "compare.json").read_text())["audits"]
    assert {a["label"]: a["objective"] for a in audits}["sae_debias"] == "sae_debias"


def test_mlp_heads_are_refused_before_the_sae(env):
    root, _ = env
    result = run_cli(["sae", root / "mlp", "--out", root / "mlp-debiased", "--quiet"])
    assert result.exit_code == 2
    assert "MLP" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (root / "mlp" / "sae").exists() and not (root / "mlp-debiased").exists()


def test_debias_options_need_out_and_a_known_latent(env):
    root, _ = env
    result = run_cli(["sae", root / "audit", "--suppress", "3", "--quiet"])
    assert result.exit_code == 2 and "--suppress applies with --out" in result.stderr
    fast = [f"--{k.replace('_', '-')}={v}" for k, v in FAST.items()]
    result = run_cli(["sae", root / "audit", *fast, "--out", root / "bad", "--suppress", "99",
                      "--quiet"])  # fmt: skip
    assert result.exit_code == 2 and "outside the SAE's 0..15" in result.stderr
    result = run_cli(["sae", root / "audit", *fast, "--out", root / "audit" / "x", "--quiet"])
    assert result.exit_code == 2 and "inside the audit" in result.stderr
