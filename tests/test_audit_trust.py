"""Audits a researcher can trust: the training regime, membership, RM quality, honest
uncertainty and categories (issue 12, items 1 to 4)."""

import json

import numpy as np
import pandas as pd
import pytest

from rmlens._errors import RmlensWarning
from rmlens.cli import main
from rmlens.memorization import AuditConfig, audit, categorize, memorization_scores
from rmlens.memorization._plans import carve_validation, make_plan, planned_runs, runs_needed
from rmlens.memorization._quality import audit_warnings, rm_quality, split_quality
from rmlens.memorization._summary import cm_significant
from rmlens.rewards import FrozenHeadTrainer, HeadConfig

GOOD = ["good", "great", "help", "answer", "sure", "yes"]
BAD = ["bad", "worst", "hate", "never", "no", "sorry"]


def make_pairs(n: int = 72, users: int = 6) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    return pd.DataFrame(
        {
            "id": [f"t{i:03d}" for i in range(n)],
            "prompt": [f"what is the {rng.choice(['cat', 'dog', 'sun'])} ?" for _ in range(n)],
            "chosen": [" ".join(rng.choice(GOOD, 4)) + f" {i % 7}" for i in range(n)],
            "rejected": [" ".join(rng.choice(BAD, 4)) + f" {i % 5}" for i in range(n)],
            "user_id": [f"u{i % users}" for i in range(n)],
        }
    )


def regime(**kw) -> AuditConfig:
    head = HeadConfig(epochs=30, patience=3, batch_size=16, lr=3e-3)
    return AuditConfig(**{"runs": 4, "folds": 2, "n_boot": 50, "head": head,
                          "val_fraction": 0.34, **kw})  # fmt: skip


@pytest.fixture()
def trainer(tiny_encoder_dir, tmp_path):
    """A frozen trainer on the tiny encoder that trains the heads ``config`` says."""

    def make(config: AuditConfig | None = None) -> FrozenHeadTrainer:
        head = (config or regime()).resolved().head
        return FrozenHeadTrainer(head, model=str(tiny_encoder_dir), cache_dir=tmp_path / "cache")

    return make


def manifests(out, runs):
    return [json.loads((out / "runs" / f"{r:03d}" / "manifest.json").read_text())
            for r in range(runs)]  # fmt: skip


# -- item 2: the training regime and membership ------------------------------------------


def test_validation_groups_come_from_the_runs_training_groups():
    groups = [f"u{i}" for i in range(10)]
    plan = make_plan(groups, n_runs=10, n_folds=5, seed=3)
    carved = carve_validation(plan, 0.25, seed=3)
    assert (carved.in_train | carved.validation).equals(plan.in_train)  # never an out-group
    assert not (carved.in_train & carved.validation).any()
    per_run = carved.groupby("run").validation.sum()
    assert (per_run == 2).all()  # round(0.25 * 8 training groups)
    pd.testing.assert_frame_equal(carved, carve_validation(plan, 0.25, seed=3))  # seeded
    assert not carve_validation(plan, 0.0).validation.any()


def test_manifest_membership_excludes_validation_pairs(trainer, tmp_path):
    pairs = make_pairs()
    out = tmp_path / "exp"
    table = audit(pairs, regime(), out=out, trainer=trainer(regime()), quiet=True)
    plan = pd.read_parquet(out / "plan.parquet")
    found = manifests(out, 4)
    for run, manifest in enumerate(found):
        part = plan[plan.run == run]
        train = set(pairs.id[pairs.user_id.isin(part.group[part.in_train])])
        val = set(pairs.id[pairs.user_id.isin(part.group[part.validation])])
        assert set(manifest["train_ids"]) == train and set(manifest["val_ids"]) == val
        assert val and not train & val and manifest["n_val"] == len(val)
        assert set(manifest["quality"]) == {"in_train", "validation", "held_out"}
        assert manifest["quality"]["validation"]["n"] == len(val)
    # the estimators count a run's validation pairs neither in nor out
    for row in table.itertuples():
        n_in = sum(row.id in m["train_ids"] for m in found)
        n_val = sum(row.id in m["val_ids"] for m in found)
        assert (row.n_in, row.n_out) == (n_in, 4 - n_in - n_val)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["validation"]["used"] and "neither in n_in nor in n_out" in (
        summary["validation"]["membership"]
    )
    record = json.loads((out / "config.json").read_text())
    assert record["audit"]["val_fraction"] == 0.34 and record["audit"]["head"]["patience"] == 3
    assert "early stopping with patience 3" in record["regime"]


def test_early_stopping_never_reads_the_out_groups(trainer, tmp_path):
    """A signal planted only in run 0's held-out groups (their labels flipped) changes
    neither run 0's chosen epoch nor its weights."""
    pairs = make_pairs()
    head = HeadConfig(head="mlp", epochs=60, patience=3, lr=3e-2, batch_size=16)
    config = regime(runs=2, n_boot=0, head=head)
    audit(pairs, config, out=tmp_path / "a", trainer=trainer(config), quiet=True)
    plan = pd.read_parquet(tmp_path / "a" / "plan.parquet")
    held = plan[(plan.run == 0) & ~plan.in_train & ~plan.validation].group
    out_pairs = pairs.user_id.isin(held)
    assert 0 < out_pairs.sum() < len(pairs)
    flipped = pairs.copy()
    flipped.loc[out_pairs, ["chosen", "rejected"]] = pairs.loc[
        out_pairs, ["rejected", "chosen"]
    ].to_numpy()
    audit(flipped, config, out=tmp_path / "b", trainer=trainer(config), quiet=True)
    a, b = (manifests(tmp_path / x, 2)[0] for x in ("a", "b"))
    assert a["metrics"]["best_epoch"] < a["metrics"]["epochs"] < 60  # it did stop early
    assert a["metrics"]["best_epoch"] == b["metrics"]["best_epoch"]
    assert a["metrics"]["val_loss"] == b["metrics"]["val_loss"]
    assert a["train_ids"] == b["train_ids"] and a["val_ids"] == b["val_ids"]
    sa, sb = (pd.read_parquet(tmp_path / x / "runs" / "000" / "scores.parquet") for x in "ab")
    inside = ~sa.id.isin(pairs.id[out_pairs])
    np.testing.assert_array_equal(sa.r_chosen[inside], sb.r_chosen[inside])  # same weights
    np.testing.assert_array_equal(sa.r_chosen[~inside], sb.r_rejected[~inside])


def test_frozen_trainer_is_deterministic_for_a_seed(trainer):
    pairs = make_pairs()
    t = trainer()
    t.head = HeadConfig(epochs=40, patience=3, batch_size=16)
    t.prepare(pairs, quiet=True)
    train, val = np.arange(0, 48), np.arange(48, 60)
    one = t.fit_score(train, seed=7, val_index=val)
    two = t.fit_score(train, seed=7, val_index=val)
    np.testing.assert_array_equal(one.r_chosen, two.r_chosen)
    assert one.metrics == two.metrics
    assert 1 <= one.metrics["best_epoch"] <= one.metrics["epochs"] <= 40
    other = t.fit_score(train, seed=8, val_index=val)
    assert not np.array_equal(one.r_chosen, other.r_chosen)


def test_head_keeps_the_best_epoch_and_stops_early():
    rng = np.random.default_rng(0)
    w = rng.normal(size=16)
    x = rng.normal(size=(400, 16))
    xr = rng.normal(size=(400, 16))
    flip = (x - xr) @ w + rng.normal(scale=3.0, size=400) < 0  # noisy labels: overfits
    xc = np.where(flip[:, None], xr, x)
    xr = np.where(flip[:, None], x, xr)
    cfg = HeadConfig(head="mlp", epochs=200, patience=4, lr=1e-2, weight_decay=0.0)
    trainer = FrozenHeadTrainer(cfg)
    rm = trainer.fit_features(xc[:100], xr[:100], validation=(xc[100:], xr[100:])).head_
    losses = [h["val_loss"] for h in rm.history_]
    assert rm.n_epochs_ < 200 and rm.n_epochs_ == rm.best_epoch_ + 4
    assert losses[rm.best_epoch_ - 1] == min(losses)
    best = FrozenHeadTrainer(cfg.replace(epochs=rm.best_epoch_, patience=0)).fit_features(
        xc[:100], xr[:100]
    ).head_
    np.testing.assert_allclose(
        rm.score_features(xc), best.score_features(xc), rtol=1e-5, atol=1e-6
    )


def test_validation_is_required_for_early_stopping_and_finetune_eval_split_is_refused():
    from rmlens._params import ParamError
    from rmlens.rewards import TrainConfig

    with pytest.raises(ParamError, match="early stopping needs validation pairs"):
        AuditConfig(val_fraction=0.0, head=HeadConfig(head="linear")).check()
    with pytest.raises(ParamError, match="lambda is chosen on validation pairs"):
        AuditConfig(val_fraction=0.0).check()  # the logistic head's grid
    AuditConfig(val_fraction=0.0, head=HeadConfig(head="logistic", l2_grid=(10.0,))).check()
    AuditConfig(val_fraction=0.0, head=HeadConfig(patience=0)).check()
    assert not AuditConfig(head=HeadConfig(patience=0)).validates
    # train's evaluation share is the audit's to set: its runs validate on whole groups
    resolved = AuditConfig(mode="finetune", train=TrainConfig(eval_fraction=0.1)).resolved()
    assert resolved.train.eval_fraction == 0.0 and resolved.val_fraction == 0.2


# -- item 1: RM quality and the warnings ----------------------------------------------------


def test_rm_quality_in_the_summary(trainer, tmp_path):
    out = tmp_path / "exp"
    audit(make_pairs(), regime(), out=out, trainer=trainer(regime()), quiet=True)
    quality = json.loads((out / "summary.json").read_text())["rm_quality"]
    runs = quality["runs"]
    assert len(runs) == 4 and quality["chance_accuracy"] == 0.5
    for split in ("in_train", "validation", "held_out"):
        acc = [r[split]["accuracy"] for r in runs]
        assert quality[split]["accuracy"]["mean"] == pytest.approx(np.mean(acc))
        assert quality[split]["accuracy"]["std"] == pytest.approx(np.std(acc, ddof=1))
        assert all(0 <= a <= 1 for a in acc)
    assert runs[0] == {**runs[0], **{"run": 0, "n_val": runs[0]["validation"]["n"]}}
    assert {"epochs", "best_epoch"} <= set(runs[0])


def test_runs_that_never_stopped_early_are_warned_about(trainer, tmp_path):
    out = tmp_path / "short"
    config = regime(head=HeadConfig(epochs=2, patience=5, batch_size=16), n_boot=0)
    audit(make_pairs(), config, out=out, trainer=trainer(config), quiet=True)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["validation"]["runs_at_epoch_budget"] == 4
    warning = next(w for w in summary["warnings"] if w["code"] == "epoch_budget")
    assert warning["message"].startswith("4 of 4 runs trained all 2 epochs")


def test_quality_counts_ties_as_half():
    p = np.array([0.9, 0.5, 0.2, np.nan])
    q = split_quality(p)
    assert q["n"] == 3 and q["accuracy"] == pytest.approx(1.5 / 3)
    assert q["log_loss"] == pytest.approx(-np.mean(np.log([0.9, 0.5, 0.2])))


def test_warnings_fire_on_the_planted_cases():
    rng = np.random.default_rng(0)
    n, runs = 200, 6
    member = np.zeros((n, runs), dtype=bool)
    member[:, :4] = True
    val = np.zeros_like(member)
    # barely generalizing RMs that interpolate: p ~ 1 in training, ~ 0.5 held out
    p = np.where(member, 0.999, rng.uniform(0.4, 0.61, (n, runs)))
    table = memorization_scores(p, member, n_boot=0)
    quality = rm_quality(p, member, val, list(range(runs)), [{}] * runs)
    codes = [w["code"] for w in audit_warnings(table, quality)]
    assert codes == ["barely_generalize", "interpolate"]
    message = " ".join(w["message"] for w in audit_warnings(table, quality))
    assert "the RMs barely generalize: held-out accuracy" in message
    assert "TG is near 0.5 for most pairs, and CM mostly reflects fitting" in message
    assert "the RMs interpolate their training pairs" in message
    assert "TM carries no information" in message
    # RMs that fit without interpolating and generalize: no warning
    p = np.where(member, rng.uniform(0.6, 0.95, (n, runs)), rng.uniform(0.55, 0.9, (n, runs)))
    table = memorization_scores(p, member, n_boot=0)
    quality = rm_quality(p, member, val, list(range(runs)), [{}] * runs)
    assert audit_warnings(table, quality) == []


# -- item 3: honest uncertainty -------------------------------------------------------------


def test_intervals_are_nan_with_fewer_than_two_runs():
    rng = np.random.default_rng(1)
    p = rng.uniform(0.2, 0.9, (3, 6))
    member = np.array(
        [
            [True, True, True, True, True, False],  # 1 out-run: TG and CM intervals NaN
            [True, False, False, False, False, False],  # 1 in-run: TM and CM intervals NaN
            [True, True, True, False, False, False],  # 3 and 3: every interval
        ]
    )
    t = memorization_scores(p, member, n_boot=200)
    assert t.loc[0, ["tm_lo", "tm_hi"]].notna().all()
    assert t.loc[0, ["tg_lo", "tg_hi", "cm_lo", "cm_hi"]].isna().all()
    assert t.loc[1, ["tm_lo", "tm_hi", "cm_lo", "cm_hi"]].isna().all()
    assert t.loc[1, ["tg_lo", "tg_hi"]].notna().all()
    assert t.loc[2, ["tm_lo", "tm_hi", "tg_lo", "tg_hi", "cm_lo", "cm_hi"]].notna().all()
    assert t[["tm", "tg", "cm"]].notna().all().all()  # the estimates themselves stay


def test_runs_needed_comes_from_the_plan():
    groups = [f"u{i}" for i in range(30)]
    fix = runs_needed(groups, n_runs=5, n_folds=5, kind="kfold", seed=0)
    assert fix == 15  # three whole repeats: every group out 3 times
    _, n_in, n_out = planned_runs(groups, n_runs=fix - 1, n_folds=5, kind="kfold", seed=0)
    assert min(n_in.min(), n_out.min()) < 3
    fix = runs_needed(groups, n_runs=2, n_folds=5, kind="halves", seed=0, val_fraction=0.2)
    _, n_in, n_out = planned_runs(
        groups, n_runs=fix, n_folds=5, kind="halves", seed=0, val_fraction=0.2
    )
    assert n_in.min() >= 3 and n_out.min() >= 3
    _, n_in, n_out = planned_runs(
        groups, n_runs=fix - 1, n_folds=5, kind="halves", seed=0, val_fraction=0.2
    )
    assert min(n_in.min(), n_out.min()) < 3


def test_a_thin_plan_is_warned_about_with_the_runs_that_fix_it(trainer, tmp_path):
    out = tmp_path / "thin"
    with pytest.warns(RmlensWarning) as caught:  # quiet or not: a Python warning
        audit(make_pairs(), regime(runs=2), out=out, trainer=trainer(regime()), quiet=True)
    summary = json.loads((out / "summary.json").read_text())
    warning = next(w for w in summary["warnings"] if w["code"] == "few_runs")
    assert warning["pairs"] == 72
    fix = runs_needed([f"u{i}" for i in range(6)], n_runs=2, n_folds=2, kind="kfold", seed=0,
                      val_fraction=0.34)  # fmt: skip
    assert warning["runs_that_fix_it"] == fix and f"`runs` {fix} gives every pair" in (
        warning["message"]
    )
    assert summary["intervals"]["nan"]["cm"] == 72  # one in-run and one out-run per pair
    assert any(w["code"] == "nan_intervals" for w in summary["warnings"])
    said = [str(w.message) for w in caught if w.category is RmlensWarning]
    assert any(m.startswith("the plan of 2 runs leaves 72 of 72 pairs") for m in said)


def test_runs_1_is_refused_in_one_line(tmp_path, capsys):
    data = tmp_path / "pairs.jsonl"
    make_pairs().to_json(data, orient="records", lines=True)
    out = tmp_path / "o"
    code = main(["memorize", "--data", str(data), "--out", str(out), "--runs", "1", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: --runs must be")
    assert not out.exists()  # refused before anything is written


@pytest.mark.parametrize(
    "tm, tg",
    [([np.nan] * 6, [np.nan] * 6), ([0.7] * 6, list(np.linspace(0, 1, 6))), ([0.5] * 6, [0.5] * 6)],
    ids=["all-nan", "constant-tm", "constant-both"],
)
def test_report_survives_degenerate_tables(tmp_path, tm, tg):
    from rmlens.memorization import plot_memorization_map
    from rmlens.report import write_report

    tm, tg = np.array(tm), np.array(tg)
    n = len(tm)
    mem = pd.DataFrame({"id": [f"p{i}" for i in range(n)], "tm": tm, "tg": tg, "cm": tm - tg,
                        "n_in": 1, "n_out": 1, "prompt": "q", "chosen": "a", "rejected": "b",
                        "group": "g"})  # fmt: skip
    for k in ("tm", "tg", "cm"):
        mem[f"{k}_lo"] = mem[f"{k}_hi"] = np.nan
    mem["category"] = categorize(mem)
    mem["cm_significant"] = cm_significant(mem)
    mem.to_parquet(tmp_path / "memorization.parquet")
    plot_memorization_map(mem, tmp_path / "memorization_map.png")
    nan = {"mean": float("nan"), "std": float("nan")}
    summary = {
        "rm_quality": {"chance_accuracy": 0.5, "runs": [],
                       "in_train": {"accuracy": nan, "log_loss": nan}},
        "warnings": [{"code": "x", "message": "planted warning"}],
        "counts": mem.category.value_counts().to_dict(),
    }  # fmt: skip
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    page = write_report(tmp_path).read_text()
    assert '<section id="quality">' in page and "planted warning" in page


# -- item 4: categories ---------------------------------------------------------------------


def test_categories_follow_the_stated_order():
    rows = pd.DataFrame(
        [
            # tm,  tg,  n_in, n_out, cm_lo, expected
            (0.9, np.nan, 4, 0, np.nan, "undefined"),  # no out-run
            (0.10, 0.00, 4, 1, 0.05, "not_learned"),  # CM 0.1, but never learned
            (0.40, 0.90, 4, 1, -0.6, "not_learned"),  # TM < 0.5 comes before TG >= 0.5
            (0.90, 0.60, 4, 1, 0.20, "memorized"),  # CM 0.3 >= 0.1, TG >= 0.5 too
            (0.60, 0.45, 4, 1, 0.01, "memorized"),
            (0.90, 0.85, 4, 1, -0.02, "generalized"),
            (0.55, 0.48, 4, 1, -0.01, "other"),  # learned, CM 0.07, TG < 0.5
        ],
        columns=["tm", "tg", "n_in", "n_out", "cm_lo", "expected"],
    )
    rows["cm"] = rows.tm - rows.tg
    assert categorize(rows, cm_threshold=0.1).tolist() == rows.expected.tolist()
    assert cm_significant(rows).tolist() == [False, True, False, True, True, False, False]


def test_category_counts_and_significance_in_the_summary(trainer, tmp_path):
    out = tmp_path / "exp"
    config = regime(runs=8, folds=4)
    table = audit(make_pairs(), config, out=out, trainer=trainer(config), quiet=True)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["category_order"] == [
        "undefined", "not_learned", "memorized", "generalized", "other"
    ]  # fmt: skip
    assert sum(summary["counts"].values()) == len(table)
    assert summary["cm_significant"]["count"] == int((table.cm_lo > 0).sum())
    assert "Frozen and fine-tuned" in summary["mode_note"]  # a frozen audit cites the table
    assert table.cm_significant.dtype == bool
    assert (table.category[table.tm < 0.5] == "not_learned").all()
