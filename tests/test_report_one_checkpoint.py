"""The pages of a one-checkpoint audit (issue 47): ``rmlens memorize --rm`` audits one RM that
trained on every pair, so its report and console word TG for what was done (each group
removed by a Gauss-Newton step), say nothing of validation pairs it had none of, open the
standing sentence with a capital, and show the summary's entries as words; the pair tables
fit a laptop's screen."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

from rmlens.memorization import audit_sentences
from rmlens.report._sections import summary_section
from test_paired import word_pairs
from test_report import Browser, _need_chromium, make_experiment, memorization_table, page_data
from test_report_consistent import _section, _text


def _notes(html: str) -> list[str]:
    """The text of each note paragraph."""
    return [_text(p) for p in re.findall(r'<p class="note">(.*?)</p>', html, re.S)]


@pytest.fixture(scope="module")
def audited(tiny_encoder_dir, tmp_path_factory) -> tuple[Path, Path, str]:
    """A one-checkpoint audit of an RM trained without an evaluation split (`rmlens train
    --eval-fraction 0 --patience 0`), its report, and the page."""
    from rmlens.hub import train
    from rmlens.memorization import audit_rm
    from rmlens.report import write_report
    from rmlens.rewards import TrainConfig

    root = tmp_path_factory.mktemp("one-checkpoint")
    pairs = word_pairs(24, 6)
    cfg = TrainConfig(model=str(tiny_encoder_dir), epochs=1, batch_size=8, lr=5e-3,
                      head_lr=5e-3, device="cpu", max_length=24, eval_fraction=0.0,
                      patience=0)  # fmt: skip
    out = root / "audit"
    with warnings.catch_warnings():  # a tiny RM's: weak, barely learned
        warnings.simplefilter("ignore")
        train(pairs, cfg, out=root / "rm", quiet=True)
        audit_rm(pairs, root / "rm", out=out, quiet=True)
    page = write_report(out).read_text(encoding="utf-8")
    return out, root / "rm", page


def test_the_map_says_what_a_one_checkpoint_audit_did(audited) -> None:
    _, _, page = audited
    section = _text(_section(page, "map"))
    assert "held it out" not in section and "never saw" not in section
    assert ("y: TG, the same with the pair's group removed from its training by a "
            "Gauss-Newton step (its one training run held no group out)") in section
    layout = page_data(page)["map"]["figure"]["layout"]
    assert layout["yaxis"]["title"]["text"] == (
        "TG: P(chosen wins) with its group removed (Gauss-Newton step)")
    assert "runs" not in layout["xaxis"]["title"]["text"]
    memorized = _text(_section(page, "memorized")) + _text(_section(page, "generalized"))
    assert "when they did not" not in memorized and "never saw" not in memorized
    quality = _text(_section(page, "quality"))
    assert "TM averages the first kind of run" not in quality
    assert "TG the same with the pair's group removed from its training" in quality


def test_no_validation_paragraph_without_validation_pairs(audited) -> None:
    out, _, page = audited
    assert json.loads((out / "summary.json").read_text())["validation"]["used"] is False
    text = _text(page)
    assert "Validation pairs come from" not in text and "val_ids" not in text


def test_the_standing_sentence_opens_with_a_capital(audited) -> None:
    _, _, page = audited
    standing = [n for n in _notes(_section(page, "quality")) if "its standing instead" in n]
    assert len(standing) == 1
    assert standing[0].startswith("Reliability: one training run, so no split-half")
    assert "(without one, on the benchmark's damping); on real pairs" in standing[0]
    assert standing[0].endswith("one training draw's noise, which check_runs measures on yours.")


def test_the_summary_and_settings_show_words_not_keys(audited) -> None:
    _, rm, page = audited
    outcome = _text(_section(page, "summary"))
    assert "checkpoint:" not in outcome and "mode note" not in outcome
    assert f"RM audited (one checkpoint) | {rm} |" in outcome
    assert "its training pairs | the pairs of its train.json (sha1 " in outcome
    assert "input format | pair |" in outcome
    settings = _text(_section(page, "config"))
    assert "checkpoint:" not in settings and "<details>" not in _section(page, "config")
    assert f"RM audited (one checkpoint) | {rm} | --rm" in settings
    assert ("damping of its Gauss-Newton step, x tr(G)/min(q, n) | 2.2 (left unset: no "
            "evaluation split to calibrate on: the benchmark's value) | --checkpoint-damping"
            ) in settings  # fmt: skip


def test_the_console_says_the_same(audited, capsys, monkeypatch) -> None:
    from rmlens.cli.memorize import print_summary

    monkeypatch.setenv("COLUMNS", "400")
    out, _, _ = audited
    print_summary(out)
    console = " ".join(capsys.readouterr().out.split())
    assert "Reliability: one training run, so no split-half reliability" in console
    assert "Validation pairs come from" not in console


def test_truncation_reads_as_words() -> None:
    mem = memorization_table(4)
    summary = {"n_pairs": 40, "format": "chat", "mode_note": None,
               "truncation": {"max_length": 512, "sequences_cut": 4, "pairs_cut": 3,
                              "tokens_cut_median": 9.0, "tokens_cut_max": 14}}  # fmt: skip
    text = _text(summary_section(mem, None, None, summary).body)
    assert "truncation:" not in text and "mode note" not in text
    assert ("pairs cut to the token limit | 3 of 40 (at most 512 tokens per prompt + "
            "response): 4 sequences lost a median 9 and at most 14 tokens, the prompt's start "
            "first |") in text  # fmt: skip
    assert "input format | chat |" in text
    summary["truncation"] = {"max_length": 512, "sequences_cut": 0, "pairs_cut": 0,
                             "tokens_cut_median": 0.0, "tokens_cut_max": 0}  # fmt: skip
    text = _text(summary_section(mem, None, None, summary).body)
    assert "pairs cut to the token limit | 0 of 40 (at most 512 tokens per prompt + response) |" \
        in text  # fmt: skip


def test_membership_follows_the_validation_pairs_there_were() -> None:
    from rmlens.memorization._sentences import CHECKPOINT_VALIDATION, NO_VALIDATION

    stored = "A pair is in a run only if the run's RM took gradients on it. Validation pairs ..."
    checkpoint = {"checkpoint": {"rm": "rm"}}
    # one checkpoint: only what becomes of its evaluation split, when it had one
    said = audit_sentences({**checkpoint, "validation": {"used": True, "membership": stored}})
    assert said.membership is CHECKPOINT_VALIDATION
    said = audit_sentences({**checkpoint, "validation": {"used": False, "membership": stored}})
    assert said.membership is None
    # R runs without validation pairs: membership, and that none were set aside
    said = audit_sentences({"validation": {"used": False, "membership": stored}})
    assert said.membership is NO_VALIDATION
    # R runs with them (early stopping, or the logistic head's lambda): the stored note
    for validation in ({"used": True}, {"used": False, "l2": {"min": 1.0}}, {}):
        said = audit_sentences({"validation": {**validation, "membership": stored}})
        assert str(said.membership) == stored


def test_a_normal_audit_keeps_its_runs_words(tmp_path) -> None:
    from rmlens.report import write_report

    page = write_report(make_experiment(tmp_path / "exp", full=False)).read_text()
    layout = page_data(page)["map"]["figure"]["layout"]
    assert layout["yaxis"]["title"]["text"] == "TG: P(chosen wins) in runs that held it out"
    assert "y: TG, the same for models that never saw it." in _text(_section(page, "map"))


def test_pair_tables_fit_a_laptop_screen(tmp_path) -> None:
    """At 1280 pixels every pair table, the largest CM among pairs not categorized memorized
    with its category column too, wraps within its box instead of running past it."""
    from rmlens.report import write_report

    _need_chromium()
    report = write_report(make_experiment(tmp_path / "exp", full=False))
    browser = Browser(width=1280)
    try:
        browser.open(report)
        widths = browser.js(
            "return Array.from(document.querySelectorAll('table.pairs')).map(function (t) {"
            "  return [t.parentElement.scrollWidth, t.parentElement.clientWidth]; });"
        )
    finally:
        browser.close()
    assert len(widths) == 3, widths  # memorized, the others for comparison, least generalized
    for scroll, client in widths:
        assert scroll <= client, widths


def test_the_regime_and_estimator_are_the_checkpoints(audited) -> None:
    """The settings describe the one RM's training and the checkpoint estimator, not an
    audit's runs: "per run", "validation pairs" and "each run scores" would describe runs a
    checkpoint never had."""
    out, _, page = audited
    record = json.loads((out / "config.json").read_text())
    regime = record["regime"]
    assert regime.startswith("one RM: ") and "once" in regime
    assert "per run" not in regime and "validation pairs" not in regime
    assert "on every pair (no evaluation split)" in regime
    text = _text(page)
    assert "paired, from one checkpoint" in text
    assert "each run scores every pair" not in text


def test_the_settings_list_only_what_a_checkpoint_audit_reads(audited) -> None:
    """No validation share, folds, plan, bootstrap or target: one RM, one training."""
    _, _, page = audited
    settings = _text(_section(page, "config"))
    for option in ("--val-fraction", "--folds", "--plan", "--n-boot", "--target-reliability",
                   "--check-exact"):
        assert option not in settings, option
    assert "--cm-threshold" in settings and "--group-by" in settings


@pytest.mark.parametrize("checkpoint", [False, True])
def test_the_map_png_names_tg_for_what_was_done(checkpoint, tmp_path, monkeypatch) -> None:
    """memorization_map.png's TG axis: runs that held the pair out, or (one checkpoint) its
    group removed by a Gauss-Newton step."""
    import matplotlib.axes
    import pandas as pd

    from rmlens.memorization import plot_memorization_map

    labels = []
    real_set = matplotlib.axes.Axes.set

    def spy(self, **kwargs):
        labels.append(kwargs.get("ylabel"))
        return real_set(self, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "set", spy)
    plot_memorization_map(pd.DataFrame({"tm": [0.9, 0.6], "tg": [0.5, 0.6]}),
                          tmp_path / "map.png", checkpoint=checkpoint)  # fmt: skip
    expected = ("TG (its group removed by a Gauss-Newton step)" if checkpoint
                else "TG (held out from the pair)")  # fmt: skip
    assert expected in labels
