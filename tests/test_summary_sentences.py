"""The audit summary's sentences have one home (issue 41, item 5): `rmlens memorize`'s console
summary and the report print the same sentences of one summary.json, every case at once
(paired estimator, mode note, one-checkpoint damping, paired damping, exactness, reliability,
warnings, validation, significance, CM's links, conflicts, repeats across groups)."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from html import unescape

import pandas as pd

from rmlens.cli.memorize import print_summary
from rmlens.memorization import Sentence, audit_sentences
from rmlens.report._html import words
from rmlens.report._sections import quality_section, summary_section


def every_case() -> dict:
    """A summary.json with an entry for every sentence, data holding quotes, ampersands,
    angle brackets and backticked parameter names."""
    part = {"split_half": 0.6, "split_half_std": 0.1, "spearman_brown": 0.75,
            "spearman_brown_std": 0.05, "runs_for_0_8": 9}  # fmt: skip
    quality = {s: {m: {"mean": 0.8, "std": 0.02} for m in ("accuracy", "log_loss")}
               for s in ("in_train", "validation", "held_out")}  # fmt: skip
    quality["runs"] = [0, 1, 2, 3]
    return {
        "n_pairs": 40, "n_runs_finished": 4, "n_runs_planned": 4, "rm_quality": quality,
        "counts": {"memorized": 3, "generalized": 37}, "mean": {"tm": 0.7, "tg": 0.6, "cm": 0.1},
        "thresholds": {"cm_memorized": 0.1}, "most_memorized": [],
        "dropped_truncation": {"count": 1},
        "warnings": [{"code": "weak_rm", "message": "the RMs' `head` is weak <here> & there"}],
        "shortcut": {"column": "chosen_model", "high": ["human", 0.92, 20],
                     "low": ["bot", 0.4, 20], "r2": 0.5, "threshold": 0.25},
        "validation": {"used": True, "fraction": 0.2, "patience": 3,
                       "best_epoch": {"min": 2, "max": 7, "median": 4.0},
                       "membership": "a run's `val_fraction` pairs count neither in nor out"},
        "estimator": "paired", "estimator_note": "paired: a step of the head per group",
        "mode_note": "frozen audit: a head per run on fixed 'minilm' features",
        "checkpoint": {"damping": 1.3, "damping_how": "calibrated on the RM's split"},
        "check": {"n_pairs": 40, "n_groups": 8, "runs": 3,
                  "regime_from": "the RM's training record",
                  "tm": {"spearman": 0.9, "lo": 0.8, "hi": 0.95},
                  "tg": {"spearman": 0.7, "lo": 0.5, "hi": 0.8},
                  "cm": {"spearman": 0.5, "lo": 0.3, "hi": 0.6}, "reliability": 0.64,
                  "share": 0.625, "share_lo": 0.375, "share_hi": 0.75,
                  "links": {"margin": {"checkpoint": {"spearman": 0.1, "lo": -0.1, "hi": 0.3},
                                       "check": {"spearman": 0.4, "lo": 0.2, "hi": 0.6}}},
                  "memorized": {"checkpoint": 0.15, "check": 0.2}},
        "exactness": {"groups": 4, "pairs": 12, "median_abs_error": 1e-6, "p90_abs_error": 2e-5,
                      "max_abs_error": 6e-4, "median_abs_effect": 0.16, "effect_spearman": 1.0},
        "damping": {"damping": 2.0, "influence": "gauss-newton", "brute_mean_cm": 0.1,
                    "edge": "at the grid's edge"},
        "reliability": {"n_runs": 4, "split": "runs", "n_splits": 20, "note": "few `runs`",
                        **{s: part for s in ("tm", "tg", "cm")}},
        "target_reliability": {"message": "target reliability 0.8 not reached"},
        "dedupe": {"how": "pairs", "note": "kept the first of each repeated pair"},
        "cm_significant": {"count": 30, "memorized": 3, "note": "paired `estimator`: precise"},
        "memorized_conflicts": {"count": 1, "memorized": 3, "share": 1 / 3, "conflicts": 2},
        "links": {"group_size": {"spearman": 0.3, "lo": 0.1, "hi": 0.5, "n_pairs": 40,
                                 "n_groups": 4, "by_size": [{"sizes": "alone", "n_pairs": 4,
                                                             "memorized": 0.0}]},
                  "margin": {"spearman": 0.1, "lo": -0.2, "hi": 0.3, "n_pairs": 40,
                             "n_groups": 4}},
        "duplicates": {"group_by": "user_id", "groups": 4, "texts": {
            "unique": 70, "responses": 80, "in_several_groups": 5}, "unique_pairs": 38,
            "repeated_pairs": 2, "pairs_sharing_text_across_groups": 6,
            "pairs_repeated_across_groups": 2, "conflicting_pairs": 1,
            "conflicts_across_groups": 1},
    }  # fmt: skip


def flat(text: str) -> str:
    return " ".join(text.split())


def page_text(html: str) -> str:
    return flat(unescape(re.sub(r"<[^>]+>", " ", re.sub(r"</?code>", "", html))))


def test_the_console_and_the_report_say_the_same_sentences(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # a sentence on one line, but for the tables
    summary = every_case()
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "config.json").write_text(json.dumps({"group_note": "grouped by 'user_id'"}))
    print_summary(tmp_path)
    console = flat(capsys.readouterr().out)
    mem = pd.DataFrame({"id": ["a", "b"], "tm": [0.7, 0.7], "tg": [0.6, 0.6], "cm": [0.1, 0.1]})
    page = page_text(quality_section(summary).body + summary_section(mem, None, None, summary).body)

    said = audit_sentences(summary)
    sentences = list(said.sentences())
    assert all(getattr(said, f.name) for f in fields(said)), "every sentence is made"
    messages = {id(message) for _, message in said.warnings}
    for sentence in sentences:
        text = flat(str(sentence))
        assert text.replace("`", "") in page, text  # a backticked name is code on the page
        if id(sentence) not in messages:  # a warning's text went to stderr: the console names it
            assert text in console, text
    assert "1 warning(s) on stderr and in summary.json: weak_rm" in console
    for label, value in said.outcome.values():  # the report's outcome table
        assert flat(label) in page and flat(value) in page, label
    assert "Run until reliable: target reliability 0.8 not reached" in console
    assert "mean TM / TG / CM: 0.700 / 0.600 / 0.100" in console
    assert console.rstrip().endswith(f"results in {tmp_path}/ (memorization.parquet, "
                                     "memorization_map.png, summary.json)")  # the answer, last


def test_the_report_escapes_the_data_and_not_the_words():
    said = Sentence("the best epoch's weights, from {groups}.", {"groups": "each run's `runs` <3"})
    assert words(said) == ("the best epoch's weights, from each run&#x27;s <code>runs</code> "
                           "&lt;3.")  # fmt: skip
    assert str(said) == "the best epoch's weights, from each run's `runs` <3."


def test_no_reliability_verdict_without_its_figures():
    """Scores without a Spearman-Brown figure (one run, or too few to split) are never called
    reliable; a low known score is still named."""
    nan = float("nan")

    def verdict(tm, tg, cm):
        reliability = {s: {"spearman_brown": v} for s, v in zip(("tm", "tg", "cm"), (tm, tg, cm))}
        return audit_sentences({"reliability": reliability}).reliability

    assert verdict(nan, nan, nan) is None
    assert verdict(None, None, None) is None
    assert verdict(0.9, 0.9, nan) is None
    assert "CM below" in str(verdict(0.9, nan, 0.5))
    assert "the rankings are reliable" in str(verdict(0.9, 0.8, 0.75))


def test_a_regime_without_patience_keeps_the_last_epoch():
    """Validation pairs evaluated each epoch with patience 0 stop nothing: the sentence says
    so instead of an early stopping that never happened."""
    summary = {"validation": {"used": True, "patience": 0,
                              "pairs_words": "the RM's own evaluation split"}}  # fmt: skip
    text = str(audit_sentences(summary).regime)
    assert "no early stopping (patience 0)" in text and "last epoch" in text
    summary["validation"]["patience"] = 2
    assert "early stopping with patience 2" in str(audit_sentences(summary).regime)


def test_a_measured_reliability_without_notes_is_not_said_to_lack_runs(tmp_path, capsys):
    """10 runs and no reliability note: the table, never "fewer than 2 runs"."""
    summary = every_case()
    summary["reliability"] = {k: v for k, v in summary["reliability"].items() if k != "note"}
    summary["reliability"]["n_runs"] = 10
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "config.json").write_text(json.dumps({"group_note": "grouped by 'user_id'"}))
    print_summary(tmp_path)
    console = flat(capsys.readouterr().out)
    assert "CM" in console and "fewer than 2 runs" not in console
    summary["reliability"]["n_runs"] = 1
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    print_summary(tmp_path)
    assert "Reliability: fewer than 2 runs." in flat(capsys.readouterr().out)
