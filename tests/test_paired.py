"""The convex head and the paired estimator (issue 19): Newton/Woodbury counterfactuals
against exact refits, a planted case with known TM/TG/CM, brute force unchanged."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import brentq
from scipy.special import expit

from conftest import WORDS
from rmlens.influence import LogisticProblem, counterfactuals, fit_logistic, refit
from rmlens.memorization import audit, estimate, memorization_scores
from rmlens.memorization._config import AuditConfig
from rmlens.memorization._paired import (
    choose_estimator,
    exactness_summary,
    exactness_warning,
    group_share,
)
from rmlens.rewards import FrozenHeadTrainer, HeadConfig


def _problem(n=60, d=5, seed=0, **kw) -> LogisticProblem:
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.8, d)
    z = rng.normal(0, 1, (n, d))
    flip = rng.random(n) > expit(z @ w)
    z[flip] *= -1  # the chosen response is the first: label 1, no intercept
    c = kw.pop("c", np.ones(n))
    o = kw.pop("o", np.zeros(n))
    return LogisticProblem(z, c, o, **kw)


def _optimality(problem: LogisticProblem, w, lam) -> float:
    g, _ = problem.grad_hess(w, lam)
    return float(np.abs(g).max())


def test_fit_logistic_reaches_the_optimum():
    problem = _problem()
    w = fit_logistic(problem, 2.0)
    assert _optimality(problem, w, 2.0) < 1e-6
    # scikit-learn's L2 logistic regression without intercept: C sum(loss) + |w|^2 / 2, and
    # both orientations of each pair (z labelled 1, -z labelled 0) double the loss: C = 1/(2 lam)
    from sklearn.linear_model import LogisticRegression

    x = np.vstack([problem.z, -problem.z])
    y = np.r_[np.ones(len(problem.z)), np.zeros(len(problem.z))]
    sk = LogisticRegression(C=1 / (2 * 2.0), fit_intercept=False, tol=1e-12, max_iter=10_000)
    sk.fit(x, y)
    np.testing.assert_allclose(w, sk.coef_[0], atol=1e-5)


@pytest.mark.parametrize("size", [1, 6])
@pytest.mark.parametrize("kind", ["bt", "smoothing", "weights_offsets"])
def test_counterfactual_matches_refit(size, kind):
    """Removing (a training group) and adding (a held-out group) of 1 and of 6 pairs: the
    one Newton step is within 1e-3 of the exact refit."""
    n = 60
    rng = np.random.default_rng(size)
    extra = {}
    if kind == "smoothing":
        extra = {"t": 0.9}
    elif kind == "weights_offsets":
        extra = {"c": rng.uniform(0.5, 1.5, n), "o": -rng.uniform(0, 1, n)}
    problem = _problem(n=n, seed=size, **extra)
    groups = np.repeat(np.arange(n // size), size)[:n]
    inside = groups % 3 != 0
    lam = 3.0
    w = fit_logistic(problem.take(inside), lam)
    p_cf = counterfactuals(problem, w, lam, groups, inside, ~inside)
    one_step = counterfactuals(problem, w, lam, groups, inside, ~inside, steps=1)
    assert np.isfinite(p_cf).all()
    p = expit(problem.z @ w)
    checked = 0
    for g in (1, 2, 0, 3):  # 1, 2: in (removed); 0, 3: out (added)
        rows = np.flatnonzero(groups == g)
        truth = refit(problem, w, lam, inside, rows)
        np.testing.assert_allclose(p_cf[rows], truth, atol=1e-3)
        np.testing.assert_allclose(one_step[rows], truth, atol=1e-2)
        assert np.abs(truth - p[rows]).max() > 1e-3  # the group does move its own pairs
        checked += 1
    assert checked == 4


def test_counterfactual_of_kept_coordinates_only():
    """poe: the bias expert's coordinates train, the first ``keep`` score."""
    problem = _problem(n=40, d=6, seed=3)
    groups = np.repeat(np.arange(10), 4)
    inside = groups >= 3
    w = fit_logistic(problem.take(inside), 2.0)
    p_cf = counterfactuals(problem, w, 2.0, groups, inside, ~inside, keep=4)
    for g in (0, 5):
        rows = np.flatnonzero(groups == g)
        truth = refit(problem, w, 2.0, inside, rows, keep=4)
        np.testing.assert_allclose(p_cf[rows], truth, atol=1e-3)


def test_validation_pairs_get_no_counterfactual():
    problem = _problem(n=30, seed=4)
    groups = np.repeat(np.arange(10), 3)
    inside, val = groups < 6, groups >= 8
    w = fit_logistic(problem.take(inside), 1.0)
    p_cf = counterfactuals(problem, w, 1.0, groups, inside, ~inside & ~val)
    assert np.isnan(p_cf[val]).all() and np.isfinite(p_cf[~val]).all()


def test_paired_estimator_by_hand():
    # pair 0: in, out, in; pair 1: out, out, in (run 2 scores it only under p)
    p = np.array([[0.9, 0.4, 0.8], [0.3, 0.5, 0.7]])
    p_cf = np.array([[0.5, 0.6, 0.6], [0.7, 0.9, np.nan]])
    member = np.array([[True, False, True], [False, False, True]])
    t = memorization_scores(p, member, p_cf=p_cf, n_boot=0)
    # in-side: p where in, p_cf where out; out-side: the other
    assert t.tm[0] == pytest.approx((0.9 + 0.6 + 0.8) / 3)
    assert t.tg[0] == pytest.approx((0.5 + 0.4 + 0.6) / 3)
    assert t.cm[0] == pytest.approx(t.tm[0] - t.tg[0])
    assert t.tm[1] == pytest.approx((0.7 + 0.9 + 0.7) / 3)
    assert t.tg[1] == pytest.approx((0.3 + 0.5) / 2)  # run 2's out-side is missing
    assert (t.n_in[0], t.n_out[0], t.n_in[1], t.n_out[1]) == (3, 3, 3, 2)
    # the long-table form gives the same
    rows = [{"run": r, "id": f"p{i}", "r_chosen": 0.0, "r_rejected": 0.0, "p": p[i, r],
             "p_cf": p_cf[i, r]} for i in range(2) for r in range(3)]  # fmt: skip
    mem = [{"run": r, "id": f"p{i}", "in_train": member[i, r]} for i in range(2) for r in range(3)]
    long = estimate(pd.DataFrame(rows), pd.DataFrame(mem), n_boot=0)
    np.testing.assert_allclose(long.cm.to_numpy(), t.cm.to_numpy())


def test_paired_intervals_are_of_paired_differences():
    """Run-to-run noise shared by both sides cancels in CM and its interval, not in TM's."""
    rng = np.random.default_rng(0)
    shift = rng.normal(0, 0.5, 20)  # each run's own offset, shared by p and p_cf
    p = expit(0.4 + shift[None, :] + rng.normal(0, 0.05, (30, 20)))
    member = rng.random((30, 20)) < 0.8
    p_cf = np.where(member, p - 0.05, p + 0.05)  # in-side minus out-side: 0.05 in every run
    t = memorization_scores(p, member, p_cf=p_cf, n_boot=300, seed=0)
    np.testing.assert_allclose(t.cm, 0.05, atol=1e-12)
    np.testing.assert_allclose(t.cm_hi - t.cm_lo, 0.0, atol=1e-12)
    assert (t.tm_hi - t.tm_lo).min() > 0.05
    brute = memorization_scores(p, member, n_boot=300, seed=0)  # the same runs, unpaired
    assert (brute.cm_hi - brute.cm_lo).median() > 0.1


def test_brute_force_bit_for_bit():
    """The brute-force estimator gives the tables it gave before the paired estimator:
    dyadic probabilities make every sum exact, so the hash holds on any machine. The hash
    was computed with rmlens at 725b9d9 (before issue 19)."""
    rng = np.random.default_rng(19)
    n, runs = 40, 10
    p = rng.integers(1, 64, size=(n, runs)) / 64.0
    member = rng.random((n, runs)) < 0.7
    val = rng.random((n, runs)) < 0.1
    p[3, 2] = np.nan
    table = memorization_scores(np.where(val, np.nan, p), member, n_boot=200, seed=3)
    digest = hashlib.sha256(np.ascontiguousarray(table.to_numpy(dtype=float)).tobytes())
    assert digest.hexdigest() == "41790b764565e189604a484e2725c95e531b4235d437c1cb8b4113b0736b7795"


def test_planted_case_known_in_closed_form():
    """Group g's k pairs all have z = a e_g (their own coordinate), so the logistic head
    separates per coordinate: a run that trains on g has w_g solving k a (1 - sigmoid(a w))
    = lambda w, and every pair of g scores p = sigmoid(a w_g); a run without g has w_g = 0
    and p = 1/2. So TM = sigmoid(a w*), TG = 1/2 and CM = TM - 1/2 for every pair, and the
    paired estimator over a grouped 5-fold plan must find them."""
    from rmlens.memorization._plans import make_plan

    k, a, lam, n_groups = 4, 1.5, 1.0, 10
    groups = np.repeat(np.arange(n_groups), k)
    z = np.zeros((len(groups), n_groups))
    z[np.arange(len(groups)), groups] = a
    problem = LogisticProblem(z, np.ones(len(groups)), np.zeros(len(groups)))
    plan = make_plan(groups.astype(str), n_runs=10, n_folds=5, seed=0)
    member = np.stack([plan[plan.run == r].set_index("group").in_train.loc[groups.astype(str)]
                       .to_numpy() for r in range(10)], axis=1)  # fmt: skip
    p, p_cf = np.zeros(member.shape), np.zeros(member.shape)
    for r in range(10):
        inside = member[:, r]
        w = fit_logistic(problem.take(inside), lam)
        p[:, r] = expit(z @ w)
        p_cf[:, r] = counterfactuals(problem, w, lam, groups, inside, ~inside)
    w_star = brentq(lambda w: k * a * expit(-a * w) - lam * w, 0, 100)
    tm_true = expit(a * w_star)
    assert tm_true - 0.5 > 0.1  # a real effect
    table = memorization_scores(p, member, p_cf=p_cf, n_boot=0)
    # removal: the coordinate's objective becomes lambda/2 w^2, the Newton step lands on 0;
    # addition moves p from 1/2 to 0.83 (its group is all its coordinate sees): a Newton and
    # two chord steps come within 1e-3 (one step alone: 2e-2)
    np.testing.assert_allclose(table.tm, tm_true, atol=1e-3)
    np.testing.assert_allclose(table.tg, 0.5, atol=1e-12)
    np.testing.assert_allclose(table.cm, tm_true - 0.5, atol=1e-3)
    assert (table.n_in == 10).all() and (table.n_out == 10).all()  # every run, both sides
    brute = memorization_scores(p, member, n_boot=0)
    np.testing.assert_allclose(brute.tm, tm_true, atol=1e-8)  # brute force: exact refits
    np.testing.assert_allclose(brute.tg, 0.5, atol=1e-12)
    assert (brute.n_in == 8).all() and (brute.n_out == 2).all()


def test_choose_estimator():
    groups = pd.Series(np.repeat([f"g{i}" for i in range(40)], 10))
    cfg = AuditConfig()
    share = group_share(groups, cfg, 5)
    assert share == pytest.approx(10 / 260)  # each run: 32 of 40 groups, 6 for validation
    assert choose_estimator(cfg, share)[0] == "paired"
    few = pd.Series(np.repeat(["a", "b", "c", "d"], 100))
    big = group_share(few, cfg, 4)
    name, note, warning = choose_estimator(cfg, big)
    assert name == "brute" and "more than 10%" in note and warning is None
    name, _, warning = choose_estimator(cfg.replace(estimator="paired"), big)
    assert name == "paired" and warning["code"] == "paired_large_groups"
    assert f"{big:.1%}" in warning["message"]
    mlp = cfg.replace(head=HeadConfig(head="mlp"))
    assert choose_estimator(mlp, share)[0] == "brute"


def test_group_share_is_of_the_pairs_a_run_trains_on():
    """The plan's own runs, not an expected count: two groups of one pair in two folds train
    each run on one pair (100%; the expected 2 x 1/2 x 0.8 = 0.8 pairs said 125%)."""
    cfg = AuditConfig()
    assert group_share(pd.Series(["a", "b"]), cfg, 2) == 1.0
    assert "holds 100.0% of a run's training pairs" in choose_estimator(cfg, 1.0)[1]
    # 4 groups in 4 folds: 3 training groups a run, 1 of them for validation; the large
    # group with a small one is 5 of 6 pairs
    uneven = pd.Series(["a"] * 5 + ["b", "c", "d"])
    assert group_share(uneven, cfg, 4) == pytest.approx(5 / 6)
    no_validation = cfg.replace(val_fraction=0.0)  # 3 training groups: a, and two of b, c, d
    assert group_share(uneven, no_validation, 4) == pytest.approx(5 / 7)
    rng = np.random.default_rng(0)
    for n in (2, 3, 5, 9):
        groups = pd.Series(rng.choice(list("abcdefgh"), n))
        if groups.nunique() >= 2:
            assert 0 < group_share(groups, cfg, min(5, groups.nunique())) <= 1


def test_exactness_summary():
    checks = [{"groups": 2, "removed": 1, "p": [0.5, 0.6, 0.7], "p_cf": [0.4, 0.62, 0.9],
               "p_refit": [0.41, 0.6, 0.88]}, None]  # fmt: skip
    s = exactness_summary(checks)
    assert s["runs"] == 1 and s["pairs"] == 3 and s["groups"] == 2
    assert s["max_abs_error"] == pytest.approx(0.02)
    assert s["median_abs_error"] == pytest.approx(0.02)
    assert s["median_abs_effect"] == pytest.approx(0.09)
    assert s["effect_spearman"] == pytest.approx(1.0)
    assert exactness_summary([None, None]) is None
    assert exactness_warning(s)["code"] == "paired_inexact"  # median 0.02: above 0.01
    fine = {**s, "median_abs_error": 0.001, "max_abs_error": 0.02}
    assert exactness_warning(fine) is None
    off = {**fine, "max_abs_error": 0.5}
    assert exactness_warning(off)["code"] == "paired_inexact"
    assert "max 0.500" in exactness_warning(off)["message"]
    assert exactness_warning({**fine, "effect_spearman": 0.5})["code"] == "paired_inexact"


def test_logistic_head_objectives():
    """The logistic head trains the bias objectives too, and keeps its lambda."""
    rng = np.random.default_rng(0)
    xc, xr = rng.normal(0.3, 1, (80, 6)), rng.normal(0, 1, (80, 6))
    bias = rng.normal(0, 1, (80, 2))
    val = (xc[60:], xr[60:], None, bias[60:])
    for objective in ("bt", "label_smoothing", "poe", "reweight"):
        cfg = HeadConfig(head="logistic", objective=objective)
        rm = FrozenHeadTrainer(cfg).fit_features(
            xc[:60], xr[:60], bias=bias[:60], validation=val
        ).head_
        assert rm.l2_ in cfg.l2_grid
        assert 3 <= len(rm.history_) <= len(cfg.l2_grid)  # the path stops past the best
        best = min(h["val_loss"] for h in rm.history_)
        assert rm.history_[rm.best_step_ - 1]["val_loss"] == best
        d = rm.score_features(xc) - rm.score_features(xr)
        problem = rm.pair_problem(xc, xr, bias=bias)
        np.testing.assert_allclose(d, problem.z[:, :6] @ rm.w_[:6], atol=1e-4)
    with pytest.raises(ValueError, match="epochs"):
        HeadConfig(head="logistic", epochs=3).check()


def word_pairs(n: int = 120, users: int = 24) -> pd.DataFrame:
    """Chosen from the first half of the tiny vocabulary, rejected from the second."""
    rng = np.random.default_rng(0)
    good, bad = WORDS[:20], WORDS[20:40]
    return pd.DataFrame([{
        "id": f"p{i:03d}", "prompt": f"what is the {rng.choice(WORDS[40:])} ?",
        "chosen": " ".join(rng.choice(good, 5)), "rejected": " ".join(rng.choice(bad, 5)),
        "user_id": f"u{i % users}",
    } for i in range(n)])  # fmt: skip


def test_paired_audit_end_to_end(tmp_path, tiny_encoder_dir):
    from rmlens.rewards import FrozenHeadTrainer

    pairs = word_pairs()
    cfg = AuditConfig(runs=6, folds=3, n_boot=50, check_exact=3)

    def trainer():
        return FrozenHeadTrainer(cfg.head, model=str(tiny_encoder_dir),
                                 cache_dir=tmp_path / "cache")  # the audit's check_exact

    out = tmp_path / "a"
    table = audit(pairs, cfg, out=out, trainer=trainer(), quiet=True)
    summary = json.loads((out / "summary.json").read_text())
    record = json.loads((out / "config.json").read_text())
    assert summary["estimator"] == record["estimator"] == "paired"
    assert "estimator paired" in record["regime"]
    scores = pd.read_parquet(out / "runs" / "000" / "scores.parquet")
    assert {"p", "p_cf"} <= set(scores.columns)
    manifest = json.loads((out / "runs" / "000" / "manifest.json").read_text())
    val = scores.id.isin(manifest["val_ids"])
    assert scores.p_cf[val].isna().all() and scores.p_cf[~val].notna().all()
    assert scores.p.notna().all()  # validation pairs are scored: their quality is shown
    assert summary["rm_quality"]["validation"]["accuracy"]["mean"] > 0
    assert manifest["metrics"]["l2"] in cfg.head.l2_grid
    assert summary["exactness"]["groups"] == 18
    assert summary["exactness"]["median_abs_error"] < 0.01
    assert "says the estimate is precise" in summary["cm_significant"]["note"]
    assert table.cm.notna().all()
    # resume: nothing redone, identical tables
    stamp = (out / "runs" / "000" / "manifest.json").stat().st_mtime_ns
    again = audit(pairs, cfg, out=out, trainer=trainer(), quiet=True)
    assert (out / "runs" / "000" / "manifest.json").stat().st_mtime_ns == stamp
    pd.testing.assert_frame_equal(table, again)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--estimator", "paired", "--head", "mlp", "--objective", "group_dro"],
         "--estimator must be brute or unset"),
        (["--estimator", "paired", "--mode", "finetune", "--rm-kind", "implicit"],
         "--estimator must be brute or unset"),
        (["--check-exact", "2", "--head", "mlp"], "--check-exact must be 0"),
        (["--check-exact", "3", "--estimator", "brute"], "--check-exact must be 0"),
        (["--epochs", "3"], "--epochs"),
        (["--l2-grid", "1,10", "--val-fraction", "0"], "--val-fraction"),
        (["--estimator", "exact"], "--estimator"),
    ],
)
def test_cli_refuses_what_cannot_apply(tmp_path, capsys, flags, named):
    from rmlens.cli import main

    data = tmp_path / "pairs.jsonl"
    word_pairs(20, 4).to_json(data, orient="records", lines=True)
    code = main(["memorize", "--data", str(data), "--out", str(tmp_path / "o"), *flags])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and named in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def cli_audit(tmp_path, encoder, monkeypatch, *flags: str):
    """``rmlens memorize`` of ``word_pairs()`` with the tiny encoder, 6 runs of 3 folds:
    its exit code, data file and experiment directory."""
    from rmlens.cli import main

    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "pairs.jsonl"
    word_pairs().to_json(data, orient="records", lines=True)
    out = tmp_path / "cli"
    code = main(["memorize", "--data", str(data), "--out", str(out), "--model", str(encoder),
                 "--runs", "6", "--folds", "3", "--quiet", *flags])  # fmt: skip
    return code, data, out


def test_cli_paired_audit_and_its_summary(tmp_path, tiny_encoder_dir, monkeypatch, capsys):
    from rmlens.cli import main

    code, data, out = cli_audit(tmp_path, tiny_encoder_dir, monkeypatch, "--check-exact", "2",
                                "--l2-grid", "10,100")  # fmt: skip
    assert code == 0
    printed = capsys.readouterr()
    flat_out = " ".join(printed.out.split())  # as rich wraps it, joined
    assert "Estimator: paired" in printed.out
    assert "Exactness of the paired counterfactuals against exact refits of 12 groups" in flat_out
    record = json.loads((out / "config.json").read_text())
    assert record["audit"]["head"]["l2_grid"] == [10.0, 100.0]
    assert record["estimator"] == "paired"
    page = (out / "report.html").read_text()
    assert "Estimator: paired" in page and "Exactness of the paired counterfactuals" in page
    # resumed from its saved settings: nothing to redo
    assert main(["memorize", "--data", str(data), "--out", str(out), "--config",
                 str(out / "config.toml"), "--quiet", "--no-report"]) == 0  # fmt: skip


def test_compare_and_attribute_read_paired_audits(tmp_path, tiny_encoder_dir):
    from rmlens.attribution import AttributeConfig, attribute
    from rmlens.comparison import CompareConfig, compare
    from rmlens.memorization._run_folders import load_matrices
    from rmlens.rewards import FrozenHeadTrainer

    pairs = word_pairs()
    cfg = AuditConfig(runs=6, folds=3, n_boot=30)

    def trainer(head):
        return FrozenHeadTrainer(head, model=str(tiny_encoder_dir),
                                 cache_dir=tmp_path / "cache")  # fmt: skip

    paired = audit(pairs, cfg, out=tmp_path / "paired", trainer=trainer(cfg.head), quiet=True)
    brute_cfg = cfg.replace(estimator="brute")
    audit(pairs, brute_cfg, out=tmp_path / "brute", trainer=trainer(cfg.head), quiet=True)
    result = compare([tmp_path / "paired", tmp_path / "brute"],
                     CompareConfig(probes=False, shap=False, n_boot=20), out=tmp_path / "cmp",
                     quiet=True)  # fmt: skip
    estimators = {a["label"]: a["estimator"] for a in result.audits}
    assert estimators["paired"] == "paired" and estimators["brute"] == "brute"
    assert estimators["paired + length calibration"] == "paired"  # its p_cf moves with it
    # compare recomputes each audit's CM from its runs with the audit's own estimator
    from rmlens.comparison._audit import load_audit
    from rmlens.comparison._margin import pair_scores

    a = load_audit(tmp_path / "paired", "paired")
    p, p_cf = a.probabilities()
    again = pair_scores(p, a.member, a.val, p_cf)[:, 2]
    table = paired.set_index("id").loc[a.ids]
    np.testing.assert_allclose(again, table.cm.to_numpy(), atol=1e-6)
    assert load_matrices(tmp_path / "paired").estimator == "paired"
    # attribution and its stability halves read the paired sides
    attribute(tmp_path / "paired", config=AttributeConfig(regressors=("lightgbm",)), quiet=True)
    stability = json.loads((tmp_path / "paired" / "attribution.json").read_text())["stability"]
    assert stability


@pytest.mark.parametrize("size", [1, 2])
def test_small_groups_take_the_newton_step_alone(size):
    """Groups under 1% of a run's training pairs (prompt-grouped data) skip the chord steps:
    one pair (vectorized) or two, against exact refits."""
    n = 400
    problem = _problem(n=n, d=8, seed=7 + size)
    groups = np.repeat(np.arange(n // size), size)
    inside = groups % 4 != 0
    w = fit_logistic(problem.take(inside), 1.0)
    p_cf = counterfactuals(problem, w, 1.0, groups, inside, ~inside)
    refined = counterfactuals(problem, w, 1.0, groups, inside, ~inside, refine_share=0.0)
    for g in (0, 1, 4, 5):
        rows = np.flatnonzero(groups == g)
        truth = refit(problem, w, 1.0, inside, rows)
        np.testing.assert_allclose(p_cf[rows], truth, atol=1e-3)
        np.testing.assert_allclose(refined[rows], truth, atol=1e-5)
        assert np.abs(refined[rows] - truth).max() < np.abs(p_cf[rows] - truth).max() + 1e-12


def test_target_reliability_reads_the_paired_scores(tmp_path, tiny_encoder_dir):
    from rmlens.rewards import FrozenHeadTrainer

    cfg = AuditConfig(runs=6, folds=3, n_boot=0, target_reliability=0.9, max_runs=30)
    trainer = FrozenHeadTrainer(cfg.head, model=str(tiny_encoder_dir),
                                cache_dir=tmp_path / "cache")  # fmt: skip
    audit(word_pairs(), cfg, out=tmp_path / "a", trainer=trainer, quiet=True)
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    status = summary["target_reliability"]
    assert summary["estimator"] == "paired"
    assert status["reached"] and status["runs"] == 6  # paired CM: reliable from 2 repeats
    assert summary["reliability"]["cm"]["spearman_brown"] >= 0.9


def test_lambda_at_the_grid_edge_is_warned_when_common():
    from rmlens.memorization._quality import budget_warning

    note = {"l2": {"grid": [1.0, 10.0, 100.0]}, "runs_at_grid_edge": {"smallest": 3, "largest": 0}}
    warning = budget_warning(note, 25)
    assert warning["code"] == "l2_grid_edge" and "3 at the smallest (1)" in warning["message"]
    one = {**note, "runs_at_grid_edge": {"smallest": 0, "largest": 1}}
    assert budget_warning(one, 200) is None  # one run of 200: the validation loss's noise
