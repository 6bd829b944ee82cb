"""Console tables at 80 and 120 columns: every name whole (the _chosen, _rejected and _diff
variants of a feature told apart, never "chars_per_word_di…"), no interval or mean +- std
broken over lines, nothing wider than the console."""

from __future__ import annotations

import io
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from rmlens.cli._talk import Console

# the longest names list_features gives: a response feature with its longest suffix
LONG = ["emotion_anticipation_rejected", "chars_per_word_diff", "chars_per_word_rejected",
        "chars_per_word_chosen", "type_token_ratio_diff", "words_per_sentence_rejected",
        "emotion_surprise_rejected", "type_token_ratio_rejected", "len_chars_prompt",
        "overlap_jaccard"]
NUMBER = r"[-+]?\d+\.\d+"
INTERVAL = re.compile(rf"{NUMBER} (?:\+-|±) {NUMBER}|{NUMBER} \[{NUMBER}, {NUMBER}\]")


def console(width: int) -> Console:
    return Console(width=width, record=True, file=io.StringIO(), color_system=None)


class Screen:
    """What the command line prints at ``width`` columns: every console a command opens
    (``rmlens.cli._talk.Console``) records into this one's text, at this width unless the
    command asks for another."""

    def __init__(self, width: int, monkeypatch):
        self.width, self.file = width, io.StringIO()
        screen = self

        class Recording(Console):
            def __init__(self, *args, **kwargs):
                kwargs.setdefault("width", screen.width)
                super().__init__(*args, file=screen.file, color_system=None, **kwargs)

        monkeypatch.setattr("rmlens.cli._talk.Console", Recording)

    def text(self) -> str:
        return checked(self.file.getvalue(), self.width)


def shown(con: Console, width: int) -> str:
    return checked(con.export_text(), width)


def checked(text: str, width: int) -> str:
    """``text``, checked for what no table may do at any width: a line wider than the
    console, a cell cut with an ellipsis."""
    assert max(map(len, text.splitlines())) <= width
    assert "\u2026" not in text  # …
    return text


def whole(name: str, text: str) -> bool:
    """``name`` on one line of ``text``, not the start or end of a longer name."""
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text) is not None


def cells(text: str) -> list[str]:
    """Every line of every cell of the tables' bodies, stripped (headers wrap between words)."""
    return [c.strip() for line in text.splitlines() if line[:1] == "│"
            for c in line.split("│")[1:-1]]  # fmt: skip


def no_broken_interval(text: str) -> None:
    """No cell line ends inside an interval: an unclosed ``[``, a dangling ``±`` or ``+-``, or
    a closing ``]`` whose ``[`` is on another line."""
    for cell in cells(text):
        assert cell.count("[") == cell.count("]"), cell
        assert not cell.endswith(("±", "+-", ",")), cell
        assert not re.match(r"^[-+]?\d+\.\d+\]", cell), cell


# -- rmlens attribute --

def attributor(names: list[str]) -> SimpleNamespace:
    """Four informative fits whose top five are the longest names, and one that explains
    nothing (a negative R^2, to show the prose that wraps)."""
    fits = [("tm", "lightgbm", 0.65), ("tm", "mlp", 0.59), ("cm", "lightgbm", 0.43),
            ("cm", "mlp", 0.29), ("tg", "mlp", -0.057)]
    fit = pd.DataFrame([{"target": t, "regressor": r, "r2": r2, "r2_std": 0.037,
                         "informative": r2 > 0.01, "n_pairs": 1500, "n_dropped_nan": 0,
                         "n_folds": 5, "rank_spearman": 0.98, "top10_overlap": 0.8,
                         "top10_half1": [], "top10_half2": [], "rank_spearman_noise": 0.81,
                         "top10_overlap_noise": 0.33, "stability_note": "halves of the runs"}
                        for t, r, r2 in fits])  # fmt: skip
    imp = pd.DataFrame([{"target": t, "regressor": r, "feature": f, "importance": 0.0385 / (i + 1),
                         "rank": i + 1, "informative": r2 > 0.01}
                        for k, (t, r, r2) in enumerate(fits)
                        for i, f in enumerate(names[k % 2 * 5:][:5] + names[:5])])  # fmt: skip
    imp = imp.drop_duplicates(["target", "regressor", "feature"])
    return SimpleNamespace(fit_=fit, importance_=imp, diff_=pd.DataFrame(), notes_=[],
                           left_out_={}, halves_=None)


@pytest.mark.parametrize("width", [80, 120])
def test_attribution_keeps_feature_names_and_r2_whole(width, tmp_path, monkeypatch):
    from rmlens.cli.attribute import _print_result

    screen = Screen(width, monkeypatch)
    _print_result(attributor(LONG), tmp_path, as_json=False)
    text = screen.text()
    for name in LONG:
        assert whole(name, text), name
    assert text.count("chars_per_word_") == 3 * 2  # three variants, each in two fits' top 5
    no_broken_interval(text)
    assert "not informative (held-out R²" in " ".join(" ".join(cells(text)).split())
    head = next(line for line in text.splitlines() if "stability" in line)
    if width == 120:  # room for a column each, R^2's mean and std on one line
        assert "target" in head and "regressor" in head and "R^2" in head
        assert len(INTERVAL.findall(text)) == 5
    else:  # the fit stacked over its R^2 in the first column
        assert "TM lightgbm" in text and "CM mlp" in text
        assert len(INTERVAL.findall(text)) == 5


def test_attribution_r2_std_goes_under_its_mean_before_the_columns_stack(tmp_path,
                                                                          monkeypatch):
    from rmlens.cli.attribute import _print_result

    screen = Screen(94, monkeypatch)  # too narrow for "0.650 ± 0.037" beside the long names
    _print_result(attributor(LONG), tmp_path, as_json=False)
    text = screen.text()
    assert "┃ target ┃ regressor ┃ R^2" in text
    assert re.search(r"│ 0\.650 +│", text) and re.search(r"│ ± 0\.037 +│", text)
    for name in LONG:
        assert whole(name, text), name


def test_feature_list_keeps_names_whole(monkeypatch):
    from rmlens.attribution import list_features
    from rmlens.cli.attribute import _print_features

    screen = Screen(80, monkeypatch)
    _print_features(False)
    text = screen.text()
    for name in list_features().name:
        assert whole(name, text), name


# -- rmlens memorize --

def test_memorize_tables_keep_mean_and_std_on_a_line():
    from rmlens.cli.memorize import pair_rows_table, quality_table, reliability_table

    quality = {split: {m: {"mean": 0.835, "std": 0.011} for m in ("accuracy", "log_loss")}
               for split in ("in_train", "validation", "held_out")}  # fmt: skip
    quality["runs"] = list(range(25))
    part = {"split_half": 0.99, "split_half_std": 0.0, "spearman_brown": 0.99,
            "spearman_brown_std": 0.01, "runs_for_0_8": 5}
    reliability = {"n_runs": 25, "split": "runs", "n_splits": 20,
                   **{s: part for s in ("tm", "tg", "cm")}}  # fmt: skip
    rows = [{"id": f"squality-6352{i}-3-6-bart-bart-dpr", "tm": 0.464, "tg": 0.042, "cm": 0.422,
             "category": "not_learned", "conflict": True} for i in range(3)]
    for width in (80, 50):  # at 50 the row names wrap, the figures do not
        con = console(width)
        con.print(quality_table(quality))
        con.print(reliability_table(reliability))
        con.print(pair_rows_table("Largest CM", rows, category=True, conflict=True))
        text = shown(con, width)
        assert text.count("0.835 +- 0.011") == 6 and text.count("0.99 +- 0.00") == 3, text
        assert text.count("0.464") == 3 and text.count("0.422") == 3
        no_broken_interval(text)


def test_a_one_run_audit_shows_its_accuracy_with_an_interval():
    from rmlens.cli.memorize import quality_table
    from rmlens.memorization import accuracy_interval

    run = {"run": 0, "in_train": {"n": 77, "accuracy": 0.83, "log_loss": 0.45},
           "validation": {"n": 19, "accuracy": 9 / 19, "log_loss": 0.71}}  # fmt: skip
    quality = {split: {m: {"mean": run[split][m], "std": 0.0} for m in ("accuracy", "log_loss")}
               for split in ("in_train", "validation")}  # fmt: skip
    quality["runs"] = [run]
    lo, hi = accuracy_interval(quality, "validation")  # Wilson, 9 of 19, by hand
    assert abs(lo - 0.2733) < 1e-3 and abs(hi - 0.6829) < 1e-3
    assert accuracy_interval({**quality, "runs": [run, run]}, "validation") is None
    for width in (80, 50):
        con = console(width)
        con.print(quality_table(quality))
        text = shown(con, width)
        assert "0.474 [0.27, 0.68]" in text and "Wilson" in text, text
        assert width < 80 or "validation (neither), 19 pairs" in text, text


# -- rmlens evaluate, generalize, compare --

def test_evaluate_keeps_probe_names_whole(monkeypatch):
    from rmlens.cli.evaluate import print_table

    names = ["signature_synth", "pad_repeat_long_probe_name", "politeness"]
    metrics = {"n_pairs": 2312, "accuracy": 0.583, "ece": 0.033, "brier": 0.24,
               "log_loss": 0.674, "warnings": [], "files": ["metrics.json"],
               "probes": [{"probe": p, "side": s, "mean_shift": -0.094, "flip_rate": 0.17,
                           "n": 1000} for p in names for s in ("chosen", "rejected")]}
    screen = Screen(80, monkeypatch)
    print_table(metrics, Path("out"))
    text = screen.text()
    for name in names:
        assert whole(name, text), name


@pytest.mark.parametrize("width", [80, 120])
def test_generalize_fits_the_console_and_keeps_split_names_whole(width, monkeypatch):
    from rmlens.cli.generalize import _print

    splits = ["train", "in_distribution", "token_shift:synonyms",
              "domain_shift:customer_support"]  # too long beside one-line headers
    table = pd.DataFrame([{"rm": rm, "split": s, "accuracy": 0.71234, "norm_margin": 0.5,
                           "n": 1234} for rm in ("explicit", "implicit") for s in splits])
    screen = Screen(width, monkeypatch)
    _print(table, Path("out"))
    text = screen.text()
    for name in splits:
        assert whole(name, text), name
    assert text.count("0.712") == 2 * len(splits)


def test_compare_agreement_keeps_figures_and_labels_whole(tmp_path, monkeypatch):
    from rmlens.cli.compare import print_comparison
    from rmlens.comparison._result import Comparison

    labels = ["label_smoothing", "complementary + length calibration"]
    figures = pd.DataFrame([{"audit": a, "family": "heldout", "metric": "heldout_accuracy",
                             "value": 0.73, "lo": 0.704, "hi": 0.756, "n": 500, "detail": "",
                             "near_chance": False, "few_pairs": False} for a in labels])
    agreement = pd.DataFrame([{"audit_a": labels[0], "audit_b": labels[1], "score": s,
                               "spearman": 0.997, "ceiling": 0.95, "reliability_a": 0.9,
                               "reliability_b": 0.91, "n": 1500, "above_ceiling": True}
                              for s in ("tm", "tg", "cm")])
    result = Comparison(figures=figures, agreement=agreement,
                        audits=[{"label": a} for a in labels])  # fmt: skip
    screen = Screen(80, monkeypatch)
    print_comparison(result, tmp_path)
    text = screen.text()
    assert text.count("0.730 [0.704, 0.756]") == 2
    no_broken_interval(text)
    assert text.count("0.950") == 3 and text.count("1500") == 3


@pytest.mark.parametrize("width", [80, 120])
def test_overoptimize_keeps_rm_names_and_intervals_whole(width, tmp_path, monkeypatch):
    from rmlens.cli.overoptimize import print_overoptimization

    rms = [("oracle", "oracle")] + [(f"{o}{e}", "runs" if not e else "ensemble")
                                    for o in ("bt", "label_smoothing", "poe")
                                    for e in ("", " ensemble mean", " ensemble min")]
    figures = ("gold_at_max_n", "gold_drop", "oracle_gap_area", "spearman")
    summary = pd.DataFrame([{"rm": rm, "kind": kind, "peak_n": 2, "words_at_max_n": 38.6,
                             **{f: 0.01 for f in figures}, **{f"{f}_lo": -0.06 for f in figures},
                             **{f"{f}_hi": 0.09 for f in figures}} for rm, kind in rms])
    found = SimpleNamespace(summary=summary, curves=pd.DataFrame({"n": [1, 64]}),
                            hacking={"across_runs": []}, notes=[], files=[])
    screen = Screen(width, monkeypatch)
    print_overoptimization(found, tmp_path)
    text = screen.text()
    no_broken_interval(text)
    assert " ".join(text.split()).count("[-0.06, 0.09]") == 4 * len(rms)
    for word in ("label_smoothing", "ensemble", "oracle"):
        assert whole(word, text)
