"""Every number at face value in report.html: readable tables instead of key/JSON dumps,
integers as integers, captions that follow their numbers, validation groups counted."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rmlens.evaluation import evaluate
from rmlens.memorization import AuditConfig, audit_sentences
from rmlens.memorization._config import regime_words
from rmlens.memorization._plans import carve_validation, make_plan
from rmlens.memorization._regime import (
    plan_validation,
    planned_validation,
    validation_words,
)
from rmlens.report import write_report
from rmlens.report._html import table, whole_counts
from rmlens.report._sections import evaluation_section, quality_section, summary_section
from test_report import make_experiment, memorization_table


def _text(html: str) -> str:
    """Visible text of an HTML fragment, cells separated by ' | '."""
    html = re.sub(r"</t[dh]>", " | ", html)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def _section(page: str, section_id: str) -> str:
    start = page.index(f'<section id="{section_id}">')
    return page[start : page.index("</section>", start)]


class LengthRM:
    """Longer responses score higher, with a little text-dependent jitter."""

    def score(self, prompts, responses):
        return np.array([len(r) + (sum(map(ord, r)) % 7) * 0.1 for r in responses], float)


@pytest.fixture(scope="module")
def metrics() -> dict:
    """A real ``evaluate`` metrics.json: by subset, RewardBench, margins, temperature and
    post-hoc length calibration."""
    rng = np.random.default_rng(0)
    n = 60
    subsets = ["alpacaeval-easy", "mt-bench-hard", "donotanswer", "mine"]
    pairs = pd.DataFrame(
        {
            "prompt": [f"q{i}" for i in range(n)],
            "chosen": ["a " * int(rng.integers(1, 20)) + str(i) for i in range(n)],
            "rejected": ["b " * int(rng.integers(1, 20)) + str(i) for i in range(n)],
            "subset": [subsets[i % 4] for i in range(n)],
            "margin": rng.uniform(0, 3, n),
        }
    )
    out = evaluate(pairs, rm=LengthRM(), probes="none", quiet=True, calibrate_frac=0.5,
                   calibrate="length")  # fmt: skip
    return json.loads(json.dumps(out, default=str))  # as read back from metrics.json


# --- item 1: the evaluation section -------------------------------------------------------


def test_report_evaluation_is_tables_not_json(metrics, tmp_path: Path) -> None:
    root = make_experiment(tmp_path / "exp", full=False)
    (root / "metrics.json").write_text(json.dumps(metrics))
    section = _section(write_report(root).read_text(encoding="utf-8"), "evaluation")
    text = _text(section)
    for raw in ('"confidence":', "calibration.bins", "config.", "reward_distribution.",
                "[{", '{"', "dropped_truncation", "margin_spearman"):  # fmt: skip
        assert raw not in text, f"raw metrics.json text {raw!r} in the evaluation section"
    assert "bin | confidence range | mean confidence | accuracy | pairs" in text
    assert len(re.findall(r"\| \[0\.\d{3}, [01]\.\d{3}\] \|", text)) == 10, "10 bins"
    assert "all pairs | 60 |" in text
    assert "rewards | mean | std | min | 1% | median | 99% | max" in text
    assert "120 |" in text, "the reward count is an integer"
    assert "Accuracy by subset" in text and "mt-bench-hard | 15 |" in text
    assert re.search(r"RewardBench score 0\.\d{3}: the mean", text) and "Chat Hard | 15 |" in text
    assert "Spearman with the data's margin | \u03c1" in text
    assert "temperature scaling | T = " in text and "fitted on 30 pairs" in text
    assert "Post-hoc length calibration" in text and "length-calibrated reward" in text
    assert "RM: LengthRM" in text


def _cross_fitted(metrics: dict, left_out: int) -> dict:
    m = {k: v for k, v in metrics.items() if k not in ("posthoc_calibration", "temperature")}
    m["cross_fitted"] = {
        "n_pairs": 60,
        "runs_per_pair": 1.0,
        "left_out": {"count": left_out, "ids": ["x"] * left_out},
        "note": "cross-fitted: each pair is scored only by the runs that held it out; "
        "in_train gives the in-sample figures",
    }
    m["held_out"] = {"accuracy": 0.58, "brier": 0.24, "ece": 0.03, "members_per_pair": 1.0,
                     "n_pairs": 60}  # fmt: skip
    m["in_train"] = {"accuracy": 0.69, "brier": 0.21, "ece": 0.12,
                     "members_per_pair": 3.2007, "n_pairs": 59}  # fmt: skip
    m["rm"] = {"class": "EnsembleRM", "members": 5, "source": "runs/hh"}
    m["files"] = ["metrics.json", "scores.parquet"]
    return m


def test_evaluation_headline_rows(metrics) -> None:
    text = _text(evaluation_section(_cross_fitted(metrics, 3), None).body)
    assert "pairs scored | pairs | accuracy | log-loss | Brier | ECE | RMs per pair" in text
    assert "held out (cross-fitted) | 60 |" in text and "| 1 |" in text
    assert "trained on (in-sample) | 59 | 0.690 | \u2013 | 0.210 | 0.120 | 3.20" in text
    assert "Cross-fitted: each pair" in text and "the in-sample row gives" in text
    assert "3 pairs that no run held out left out." in text
    assert "RM: EnsembleRM, 5 members, from runs/hh" in text
    assert "Files of the evaluation: metrics.json, scores.parquet." in text
    assert "left out." not in _text(evaluation_section(_cross_fitted(metrics, 0), None).body)

    split = _cross_fitted(metrics, 0)
    del split["cross_fitted"]
    text = _text(evaluation_section(split, None).body)
    assert "held out (members that did not train on the pair) | 60 |" in text
    assert "trained on (in-sample) | 59 |" in text
    assert "all pairs (members mixed) | 60 |" in text and "| 5 |" in text


def test_evaluation_unknown_keys_and_nested_metrics(metrics) -> None:
    ensemble = {"n_members": 3, "member_accuracy_mean": 0.6, "member_accuracy_min": 0.5,
                "member_accuracy_max": 0.7, "n_wrong": 12, "disagreement_wrong": 0.3}  # fmt: skip
    m = {**metrics, "extra_figure": 2.0, "odd_block": {"n_things": 4, "rows": [{"a": 1}]},
         "warnings": ["rewards look collapsed"], "dropped_truncation": {"count": 2, "ids": []},
         "ensemble": ensemble}  # fmt: skip
    body = evaluation_section(m, None).body
    text = _text(body)
    assert "extra figure | 2" in text and "odd block: n things | 4" in text
    assert "odd block: rows | 1 entry (in metrics.json)" in text
    assert '<p class="warning">Rewards look collapsed</p>' in body
    assert "2 pairs were left out: chosen and rejected were the same text" in text
    assert "members | 3" in text and "on the 12 pairs it gets wrong" in text
    nested = {"train": {"accuracy": 0.9, "margin": 1.2}, "test": {"accuracy": 0.7}}
    text = _text(evaluation_section(nested, None).body)
    assert "split | accuracy | margin" in text and "test | 0.700 | \u2013" in text


# --- item 2: the audit outcome --------------------------------------------------------------


def audit_summary() -> dict:
    return {
        "n_pairs": 30,
        "n_runs_finished": 23,
        "n_runs_planned": 25,
        "complete": False,
        "failed_runs": [{"run": 3, "error": "CUDA out of memory"}, {"run": 7, "error": "killed"}],
        "pairs_lacking_runs": {"count": 4, "no_in_run": 1, "no_out_run": 3, "ids": ["p1"]},
        "dropped_truncation": {"count": 0, "ids": []},
        "mean": {"tm": 0.7, "tg": 0.6, "cm": 0.1},
        "objective": {"n_runs": 23, "objective": "curate",
                      "runs_inactive": [{"run": 1, "why": "no pair"}]},  # fmt: skip
        "estimator": "paired",
        "estimator_note": "paired: each run also scores every pair",
        "exactness": {"method": "exact refits", "groups": 3},
        "thresholds": {"cm_memorized": 0.1, "learned": 0.5},
        "category_rules": {"memorized": "CM >= 0.1"},
        "counts": {"memorized": 3, "generalized": 27},
        "new_count": 5,
        "new_list": [{"a": 1}, {"a": 2}],
    }


def test_audit_outcome_is_labelled_rows() -> None:
    body = summary_section(memorization_table(30), None, None, audit_summary()).body
    text = _text(body)
    assert "<h3>Audit outcome</h3>" in body and "(summary.json)" not in body
    for raw in ("dropped_truncation.ids", "exactness.method", "objective.runs_inactive",
                "failed_runs", "pairs_lacking_runs", "[{", '{"', "estimator_note"):  # fmt: skip
        assert raw not in text, f"raw summary.json text {raw!r} in the outcome"
    assert "runs finished | 23 of 25 (2 failed: run 3: CUDA out of memory; run 7: killed)" in text
    assert "pairs | 30 |" in text
    assert "pairs lacking an in- or out-run | 4 (1 with no in-run, 3 with no out-run" in text
    assert "pairs dropped as the same tokens | 0 |" in text
    assert "mean TM / TG / CM | 0.700 / 0.600 / 0.100" in text
    assert "objective | curate (its mechanism inactive in 1 of 23 runs)" in text
    assert "estimator | paired" in text
    assert "new count | 5" in text and "new list | 2 entries (in summary.json)" in text
    assert "cm memorized" not in text, "the thresholds are in the category rules"


# --- item 3: integers as integers -----------------------------------------------------------


def test_counts_stay_integers(tmp_path: Path) -> None:
    root = make_experiment(tmp_path / "exp", full=False)
    mem = pd.read_parquet(root / "memorization.parquet")
    mem["n_in"], mem["n_out"] = mem["n_in"].astype(float), mem["n_out"].astype(float)
    mem.to_parquet(root / "memorization.parquet", index=False)
    for run, n_train in enumerate((956, 947, 950)):
        folder = root / "runs" / f"{run:03d}"
        folder.mkdir(parents=True)
        metrics = {"l2": 100.0, "loss": 0.5 + run / 10, "exactness": {"groups": 1}}
        if run:
            metrics["epochs"] = 3
        manifest = {"run": run, "n_train": n_train, "metrics": metrics}
        (folder / "manifest.json").write_text(json.dumps(manifest))
    page = write_report(root).read_text(encoding="utf-8")
    runs = _text(_section(page, "config").split("Training runs", 1)[1])
    assert not re.search(r"\b\d+\.000\b", runs), runs
    assert "run | pairs trained on | lambda kept | epochs trained |" in runs
    assert "| 0 | 956 | 100 | \u2013 |" in runs, "per run: integers, missing kept"
    assert "mean | 951 | \u2013 | 3 |" in runs, "a whole mean stays an integer"
    assert "20 / 5" in _text(_section(page, "memorized")), "run counts read as float"
    frame = whole_counts(pd.DataFrame({"n": [999.0, np.nan], "flip_rate": [1.0, 0.5]}))
    assert _text(table(frame)) == "n | flip_rate | 999 | 1.000 | \u2013 | 0.500 |"


# --- item 4: captions that follow their numbers ---------------------------------------------


def _quality_summary(held: float) -> dict:
    quality = {
        "in_train": {"accuracy": {"mean": 0.95, "std": 0.01}, "log_loss": {"mean": 0.2, "std": 0}},
        "held_out": {"accuracy": {"mean": held, "std": 0.01}, "log_loss": {"mean": 0.6, "std": 0}},
    }
    return {"rm_quality": quality, "intervals": {"method": "bootstrap", "nan": {"cm": 0}}}


def test_quality_caption_follows_held_out_accuracy() -> None:
    near = _text(quality_section(_quality_summary(0.52)).body)
    assert "Held-out accuracy 0.520 is within 0.05 of chance (0.5)" in near
    assert "CM mostly measures fitting" in near
    clear = _text(quality_section(_quality_summary(0.89)).body)
    assert "mostly measures fitting" not in clear and "near chance" not in clear
    assert "0.390 above chance (0.5): the RMs generalize, so TG" in clear
    weak = _text(quality_section(_quality_summary(0.58)).body)
    assert "0.080 above chance (0.5) but under 0.6: the RMs are weak" in weak
    assert "the RMs generalize" not in weak
    below = _text(quality_section(_quality_summary(0.40)).body)
    assert "below chance (0.5)" in below and "mostly measures fitting" not in below
    assert "Intervals: bootstrap; none is NaN." in clear


def test_reliability_caption_names_seed_only_halves() -> None:
    part = {"split_half": 0.9, "spearman_brown": 0.95}
    rel = {"tm": part, "tg": part, "cm": part, "n_runs": 8}
    summary = {**_quality_summary(0.8), "reliability": rel}
    assert "the rankings are reliable" in quality_section(summary).body
    rel["note"] = "every repeat of the plan draws the same partition of groups, so the halves " \
        "differ only in seeds: the figure measures seed noise, not the plan's"  # fmt: skip
    body = quality_section(summary).body
    assert "the rankings are reliable" not in body and "measure seed noise" in body


# --- item 5: the validation groups, counted --------------------------------------------------


def four_user_plan() -> pd.DataFrame:
    groups = [f"u{i}" for i in range(4)]
    return carve_validation(make_plan(groups, n_runs=8, n_folds=4, seed=0), 0.2, seed=0)


def test_validation_sentence_counts_whole_groups() -> None:
    plan = four_user_plan()
    assert plan_validation(plan) == [(1, 3)] * 8
    assert planned_validation(4, kind="kfold", folds=4, fraction=0.2) == [(1, 3)] * 4
    words = "1 of each run's 3 training groups (share 0.2, whole groups)"
    assert validation_words(0.2, plan_validation(plan)) == words
    assert words in regime_words(AuditConfig(), n_groups=4, folds=4)
    assert "0.2 of each run's training groups" not in regime_words(AuditConfig())
    lam = {"min": 10.0, "median": 30.0, "max": 100.0}
    summary = {**_quality_summary(0.7), "validation": {"used": True, "fraction": 0.2, "l2": lam}}
    body = _text(quality_section(summary, plan).body)
    assert f"lambda chosen per run on validation pairs from {words}" in body
    assert "0.2 of each run's" not in body
    regime = audit_sentences(summary, plan_validation(plan)).regime  # what the console prints
    assert f"lambda chosen per run on validation pairs from {words}" in str(regime)
    # ranges when runs differ: 7 groups in halves train on 3 or 4
    assert validation_words(0.2, planned_validation(7, kind="halves", folds=5, fraction=0.2)) \
        == "1 of each run's 3 to 4 training groups (share 0.2, whole groups)"  # fmt: skip
