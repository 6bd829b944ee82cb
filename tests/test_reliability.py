"""Split-half reliability of TM, TG, CM with every audit (issue 13, item 1)."""

import json

import numpy as np
import pandas as pd
import pytest

from rmlens._errors import RmlensNote, RmlensWarning
from rmlens.memorization import AuditConfig, audit
from rmlens.memorization._plans import make_plan
from rmlens.memorization._reliability import (
    reliability_warnings,
    runs_needed,
    same_partition,
    split_half,
)
from rmlens.report._sections import quality_section
from rmlens.rewards import FrozenHeadTrainer, HeadConfig
from rmlens.stats import spearman_brown

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


def test_runs_needed_by_hand():
    # Spearman-Brown and its prophecy by hand: tests/test_stats.py
    # rel 0.54 at 25 runs: 25 * 0.8 * 0.46 / (0.54 * 0.2) = 85.19 runs
    assert runs_needed(0.54, 25) == 86
    assert runs_needed(0.54, 25, folds=5) == 90  # whole repeats of 5 folds
    assert runs_needed(0.8, 25, folds=5) == 25  # already there
    assert runs_needed(0.0, 25) is None and runs_needed(float("nan"), 25) is None


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
        config.resolved().head, model=str(tiny_encoder_dir), cache_dir=tmp_path / "cache"
    )
    out = tmp_path / "audit"
    audit(make_pairs(), config, out=out, trainer=trainer, quiet=True)
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


# --- run until reliable (issue 13, item 2) ---------------------------------------------------


class PlantedTrainer:
    """A fake RM with a known CM per pair: the margin of pair i in a run is
    base_i + (1 + 0.5 * signal_i) when the run trains on it, plus the run's own noise (seeded
    by the run's seed), so CM ranks pairs by signal_i and its reliability grows with runs."""

    def __init__(self, n: int, *, noise: float = 0.5, crash_at: int | None = None):
        rng = np.random.default_rng(21)
        self.n, self.noise, self.crash_at, self.calls = n, noise, crash_at, 0
        self.signal, self.base = rng.standard_normal(n), rng.standard_normal(n)

    def prepare(self, pairs, *, quiet=False):
        return np.ones(len(pairs), dtype=bool)

    def fit_score(self, train_index, *, seed, val_index=None):
        from rmlens.rewards._trainer_base import RunScores

        if self.calls == self.crash_at:
            raise KeyboardInterrupt  # killed mid-audit: not a run failure, the audit stops
        self.calls += 1
        inside = np.zeros(self.n, dtype=bool)
        inside[train_index] = True
        noise = self.noise * np.random.default_rng(seed).standard_normal(self.n)
        margin = self.base + inside * (1 + 0.5 * self.signal) + noise
        return RunScores(margin, np.zeros(self.n), {})


def planted_pairs(n: int = 120, users: int = 40) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": [f"q{i:03d}" for i in range(n)],
            "prompt": [f"prompt {i}" for i in range(n)],
            "chosen": ["yes"] * n,
            "rejected": ["no"] * n,
            "user_id": [f"u{i % users}" for i in range(n)],
        }
    )


def growing(**kw) -> AuditConfig:
    base = {"runs": 4, "folds": 2, "n_boot": 0, "head": HeadConfig(patience=0)}
    return AuditConfig(**{**base, "target_reliability": 0.8, "max_runs": 40, **kw})


def cm_reliability_at(out, runs: int) -> float:
    """CM's Spearman-Brown reliability from the first ``runs`` runs on disk (K = 2)."""
    from rmlens.memorization._run_folders import load_matrices

    m = load_matrices(out, runs)
    rel = split_half(m.p, m.member, m.val, np.asarray(m.runs) // K, folds=K, seed=0)
    return rel["cm"]["spearman_brown"]


def test_target_stops_at_the_first_repeat_that_reaches_it(tmp_path, caplog):
    pairs, out = planted_pairs(), tmp_path / "grow"
    trainer = PlantedTrainer(len(pairs))
    with caplog.at_level("INFO", logger="rmlens"):  # status lines: the rmlens logger
        audit(pairs, growing(), out=out, trainer=trainer, quiet=False)
    summary = json.loads((out / "summary.json").read_text())
    status = summary["target_reliability"]
    n = status["runs"]
    assert status["reached"] and status["stopped_because"] == "target_reached"
    assert 4 < n < 40 and n % K == 0  # it grew, by whole repeats, and stopped before the cap
    assert trainer.calls == n and len(list((out / "runs").iterdir())) == n
    # the score is the one summary.json reports, and one repeat earlier it was below target
    assert status["reliability"] == summary["reliability"]["cm"]["spearman_brown"] >= 0.8
    assert status["reliability"] == pytest.approx(cm_reliability_at(out, n))
    assert cm_reliability_at(out, n - K) < 0.8
    # the real run count is recorded, and the tables use every run
    assert json.loads((out / "config.json").read_text())["audit"]["runs"] == n
    assert summary["n_runs_finished"] == summary["n_runs_planned"] == n
    assert summary["reliability"]["n_runs"] == n
    table = pd.read_parquet(out / "memorization.parquet")
    assert (table.n_in + table.n_out == n).all()
    assert pd.read_parquet(out / "plan.parquet").run.max() == n - 1
    err = "\n".join(r.getMessage() for r in caplog.records if r.name == "rmlens")
    assert err.count("adding repeat") == (n - 4) // K
    assert "target reliability 0.8 reached: CM reliability (Spearman-Brown) " in err
    assert f"at {n} runs; no more runs added" in err


def test_target_out_of_reach_stops_at_the_cap_and_says_so(tmp_path):
    pairs, out = planted_pairs(), tmp_path / "cap"
    trainer = PlantedTrainer(len(pairs), noise=1.0)
    with pytest.warns(RmlensWarning) as caught:
        audit(pairs, growing(target_reliability=0.95, max_runs=9), out=out, trainer=trainer,
              quiet=True)  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    status = summary["target_reliability"]
    assert trainer.calls == 8  # --max-runs 9 with 2 runs per repeat: 4 whole repeats
    assert status["runs"] == 8 and not status["reached"]
    assert status["stopped_because"] == "max_runs" and status["reliability"] < 0.95
    predicted = runs_needed(status["reliability"], 8, 0.95, folds=K)
    assert status["runs_predicted"] == predicted and predicted > 9
    message = status["message"]
    assert message.startswith("target reliability 0.95 cannot be reached within `max_runs` 9 ")
    assert f"the Spearman-Brown prophecy formula predicts about {predicted} runs" in message
    assert [w["code"] for w in summary["warnings"]].count("target_not_reached") == 1
    assert message in [str(w.message) for w in caught]


def test_runs_round_up_to_whole_repeats_and_the_cap_is_checked(tmp_path):
    from rmlens._errors import InputError
    from rmlens._params import ParamError

    pairs = planted_pairs()
    trainer = PlantedTrainer(len(pairs), noise=1.0)
    with pytest.warns(RmlensNote) as caught:
        audit(pairs, growing(runs=5, max_runs=6, target_reliability=0.95), out=tmp_path / "r",
              trainer=trainer, quiet=True)  # fmt: skip
    assert trainer.calls == 6
    assert "`runs` 5 is not a whole number of repeats of 2 runs: starting from 6 runs" in [
        str(w.message) for w in caught if w.category is RmlensNote
    ]
    with pytest.raises(InputError, match=r"`max_runs` 5 holds 2 whole repeat\(s\) of 2 runs"):
        audit(pairs, growing(runs=5, max_runs=5), out=tmp_path / "s", trainer=trainer, quiet=True)
    assert not (tmp_path / "s").exists()
    with pytest.raises(ParamError, match="`max_runs` 10 is below `runs` 25"):
        AuditConfig(target_reliability=0.8, max_runs=10).check()
    with pytest.raises(ParamError, match="applies with target_reliability only"):
        AuditConfig(max_runs=50).check()
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ParamError, match="target_reliability"):
            AuditConfig(target_reliability=bad).check()


def test_cli_target_reliability(tmp_path, monkeypatch, capsys):
    from rmlens.cli import main

    pairs = planted_pairs()
    data = tmp_path / "pairs.jsonl"
    pairs.to_json(data, orient="records", lines=True)
    monkeypatch.setattr(
        "rmlens.memorization._execute.default_trainer", lambda *a, **k: PlantedTrainer(len(pairs))
    )
    out = tmp_path / "cli"
    args = ["memorize", "--data", str(data), "--out", str(out), "--folds", "2", "--runs", "4",
            "--head", "linear", "--patience", "0", "--n-boot", "0", "--quiet",
            "--no-report"]  # fmt: skip
    assert main([*args, "--target-reliability", "0.8", "--max-runs", "40"]) == 0
    status = json.loads((out / "summary.json").read_text())["target_reliability"]
    printed = capsys.readouterr().out
    assert "Run until reliable: target reliability 0.8 reached" in printed
    assert f"Memorization audit: 120 pairs, {status['runs']} runs" in printed
    # a cap below --runs: one line naming both flags, exit 2, nothing written
    no = tmp_path / "no"
    args[4] = str(no)
    assert main([*args, "--runs", "30", "--target-reliability", "0.8", "--max-runs", "10"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-runs" in err and "--runs (30)" in err
    assert main([*args, "--runs", "300", "--target-reliability", "0.8"]) == 2  # cap by default
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-runs 200 is below --runs 300" in err
    assert not no.exists()


def test_an_interrupted_growing_audit_resumes_from_its_last_finished_run(tmp_path):
    from rmlens.experiment import AuditDir

    pairs = planted_pairs()
    whole = audit(pairs, growing(), out=tmp_path / "whole", trainer=PlantedTrainer(120), quiet=True)
    n = json.loads((tmp_path / "whole" / "summary.json").read_text())["target_reliability"]["runs"]
    out = tmp_path / "killed"
    with pytest.raises(KeyboardInterrupt):  # killed during the fourth repeat (runs 6 and 7)
        audit(pairs, growing(), out=out, trainer=PlantedTrainer(120, crash_at=7), quiet=True)
    assert [AuditDir(out).run_done(r) for r in range(8)] == [True] * 7 + [False]
    assert json.loads((out / "config.json").read_text())["audit"]["runs"] == 8  # grown
    half = out / "runs" / "007"  # a half-written run: scores without a manifest
    half.mkdir(parents=True, exist_ok=True)
    (half / "scores.parquet").write_bytes(b"PAR1 truncated")
    before = (out / "runs" / "003" / "scores.parquet").stat().st_mtime_ns
    counting = PlantedTrainer(120)
    resumed = audit(pairs, growing(), out=out, trainer=counting, quiet=True)
    assert counting.calls == n - 7  # run 7 redone, runs 0..6 never
    assert (out / "runs" / "003" / "scores.parquet").stat().st_mtime_ns == before
    pd.testing.assert_frame_equal(resumed, whole)
    again = PlantedTrainer(120)  # finished: started again, nothing is trained
    pd.testing.assert_frame_equal(
        audit(pairs, growing(), out=out, trainer=again, quiet=True), whole
    )
    assert again.calls == 0


def test_a_higher_target_or_cap_continues_the_same_audit(tmp_path):
    from rmlens._errors import InputError

    pairs, out = planted_pairs(), tmp_path / "x"
    trainer = PlantedTrainer(120)
    audit(pairs, growing(target_reliability=0.6), out=out, trainer=trainer, quiet=True)
    low = json.loads((out / "summary.json").read_text())["target_reliability"]
    assert low["reached"] and trainer.calls == low["runs"]
    # capped below what 0.8 needs: stops at the cap, then a higher cap goes on
    capped = growing(max_runs=low["runs"] + 2)
    audit(pairs, capped, out=out, trainer=trainer, quiet=True)
    mid = json.loads((out / "summary.json").read_text())["target_reliability"]
    assert (mid["runs"], mid["stopped_because"]) == (low["runs"] + 2, "max_runs")
    audit(pairs, growing(), out=out, trainer=trainer, quiet=True)
    high = json.loads((out / "summary.json").read_text())["target_reliability"]
    assert high["reached"] and high["runs"] > mid["runs"] and trainer.calls == high["runs"]
    fresh = PlantedTrainer(120)  # the same tables as an audit run at 0.8 from the start
    audit(pairs, growing(), out=tmp_path / "fresh", trainer=fresh, quiet=True)
    assert fresh.calls == high["runs"]
    pd.testing.assert_frame_equal(
        pd.read_parquet(out / "memorization.parquet"),
        pd.read_parquet(tmp_path / "fresh" / "memorization.parquet"),
    )
    # without a target, --runs must be the grown count; the refusal says how to resume
    with pytest.raises(InputError, match=rf"it grew to {high['runs']} runs towards"):
        audit(pairs, growing(target_reliability=None, max_runs=200), out=out, trainer=trainer)
    plain = growing(target_reliability=None, max_runs=200, runs=high["runs"])
    audit(pairs, plain, out=out, trainer=trainer, quiet=True)
    assert trainer.calls == high["runs"]  # nothing redone
    assert "target_reliability" not in json.loads((out / "summary.json").read_text())


def test_paired_runs_are_split_themselves():
    """One repeat of a 5-fold plan: brute force has no split (it needs whole repeats), the
    paired estimator splits the 5 runs (3 against 2) and reports CM's reliability with its
    spread; a planted per-pair effect seen by every run makes it high."""
    rng = np.random.default_rng(4)
    n, runs = 600, 5
    effect = rng.standard_normal(n)  # each pair's own CM, the same in every run
    member = (np.arange(n)[:, None] % runs) != np.arange(runs)[None, :]  # 5-fold, one repeat
    base = 0.5 + 0.05 * rng.standard_normal((n, runs))
    inside, outside = base + 0.02 * effect[:, None], base
    p = np.where(member, inside, outside)
    p_cf = np.where(member, outside, inside)  # the other side of the same run
    val = np.zeros_like(member)
    repeat = np.zeros(runs, dtype=int)
    brute = split_half(p, member, val, repeat, folds=runs)
    assert np.isnan(brute["cm"]["spearman_brown"]) and brute["split"] == "repeats"
    paired = split_half(p, member, val, repeat, folds=runs, p_cf=p_cf, n_splits=10)
    assert paired["split"] == "runs" and paired["n_runs"] == 5 and paired["n_splits"] == 10
    cm = paired["cm"]
    assert cm["split_half"] > 0.95 and cm["spearman_brown"] > 0.95  # the planted effect
    assert np.isfinite(cm["split_half_std"])
    assert cm["runs_for_0_8"] == 5  # already above 0.8: one whole repeat
    # noise only: about 0, and Spearman-Brown with halves of 2 and 3 runs uses 5 / 2
    noise = split_half(base, member, val, repeat, folds=runs, p_cf=base[:, ::-1], n_splits=1)
    r = noise["cm"]["split_half"]
    assert abs(r) < 0.15
    assert noise["cm"]["spearman_brown"] == pytest.approx(spearman_brown(r, 2.5))


def test_the_reliability_caption_follows_its_numbers():
    from rmlens.memorization import audit_sentences

    def _reliability_caption(reliability: dict) -> str:
        return str(audit_sentences({"reliability": reliability}).reliability)

    high = {s: {"spearman_brown": 0.99} for s in ("tm", "tg", "cm")}
    assert "the rankings are reliable" in _reliability_caption(high)
    low = {**high, "cm": {"spearman_brown": 0.54}}
    assert _reliability_caption(low).startswith("CM below 0.7")
