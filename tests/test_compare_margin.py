"""rmlens compare, measured where it matters (issue 28): held-out accuracy on the lowest-margin
tercile, CM of the low- against the high-margin tercile, each objective's cost against bt
with the interval of the difference, and the page's opening table (which objective wins
what, at what cost; low-margin columns only where the data has a margin)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from scipy.special import expit

from rmlens.comparison import compare
from rmlens.comparison._audit import load_audit
from rmlens.comparison._config import CompareConfig
from rmlens.comparison._figures import cost_figures
from rmlens.comparison._heldout import low_margin_accuracy
from rmlens.comparison._margin import METRICS, margin_figures, margin_terciles
from rmlens.comparison.metrics import DIFFERENCES, figure_text, label
from rmlens.report import write_compare_report
from rmlens.report._compare_glance import glance_section
from test_compare import D, config, figure, write_audit


def test_low_margin_accuracy_by_hand():
    # margins of 6 pairs, one unknown: ranks of the 5 finite ones 3, 1, 5, 2, 4 ->
    # tercile floor(3 (rank - 1) / 5) = 1, 0, 2, 0, 1: the low tercile is pairs 1 and 3
    margin = np.array([3.0, 0.5, 9.0, 1.0, np.nan, 7.0])
    assert margin_terciles(margin).tolist() == [1, 0, 2, 0, -1, 1]
    d = np.array([[5, 5, 5],     # high margin: never counted
                  [2, 0, 1],     # low: held out by runs 0 and 2, right both times
                  [-1, -1, -1],
                  [0, -3, 9],    # low: held out by runs 0 (a tie: 1/2) and 1 (wrong)
                  [1, 1, 1],     # no margin: in no tercile
                  [-2, -2, -2]], dtype=float)  # fmt: skip
    held = np.array([[1, 1, 1], [1, 0, 1], [1, 1, 1], [1, 1, 0], [0, 1, 0], [1, 1, 1]],
                    dtype=bool)  # fmt: skip
    # per run: run 0 (1 + 1/2) / 2 = 0.75, run 1 0 / 1, run 2 1 / 1; mean over runs
    draws = np.array([[0, 0, 0], [2, 2, 1]])  # runs drawn: (0, 0, 0) and (2, 2, 1)
    value, boot, n = low_margin_accuracy(d, held, margin, draws)
    assert value == pytest.approx((0.75 + 0 + 1) / 3) and n == 2
    assert boot == pytest.approx([0.75, (1 + 1 + 0) / 3])


def test_cm_low_minus_high_by_hand_and_per_draw():
    margin = np.array([1.0, 2, 3, 4, 5, 6])  # terciles {0, 1}, {2, 3}, {4, 5}
    terc = margin_terciles(margin)
    scores = np.zeros((6, 3))
    scores[:, 2] = [0.3, 0.1, 0.0, 0.2, 0.05, np.nan]  # CM; TG (column 1) 0
    k = METRICS.index("cm_margin_low_minus_high")
    assert margin_figures(scores, margin, terc)[k] == pytest.approx(0.2 - 0.05)
    # two draws in which both terciles move by the same amount: the difference does not,
    # so its interval is a point (a difference of the two intervals would not be)
    shifted = scores.copy()
    shifted[:, 2] += 0.4
    values = [margin_figures(s, margin, terc, correlation=False) for s in (scores, shifted)]
    assert [v[k] for v in values] == pytest.approx([0.15, 0.15])
    assert values[1][0] - values[0][0] == pytest.approx(0.4)


def test_compare_gives_the_low_margin_figures(tmp_path):
    a = write_audit(tmp_path / "a")
    result = compare([a], config(min_group_pairs=2), out=tmp_path / "out", quiet=True)
    # low tercile {p0, p1}: both held out by run 1 only, p0 right and p1 wrong
    low = figure(result, "slice_low_margin")
    assert low.value == pytest.approx(0.5) and low.n == 2 and low.family == "margin"
    assert "margin 1 to 2" in low.detail
    assert low.near_chance  # an accuracy: flagged like the others, in its own words
    assert any("weakest preferences" in f for f in result.flags)
    s = expit
    cm = np.array([0, s(1) - s(-1), 0, s(2) - s(1), s(2) - s(-1), s(2) - s(0)])
    diff = figure(result, "cm_margin_low_minus_high")
    assert diff.value == pytest.approx(cm[[0, 1]].mean() - cm[[4, 5]].mean()) and diff.n == 4
    assert diff.lo <= diff.value <= diff.hi
    wide = result.wide()
    assert wide.loc["cm_margin_low_minus_high", "a"].startswith("-0.265 [-")  # signed
    assert label("slice_low_margin") == "accuracy, low-margin tercile"


def test_cost_against_bt_paired_by_run_or_independent(tmp_path):
    a = write_audit(tmp_path / "a")
    d = D.copy()
    d[4, 0] = 2  # run 0 now right on p4: 2.5 / 3 on its held-out pairs; run 1 as a's (2/3)
    b = write_audit(tmp_path / "b", d, objective="poe")
    result = compare([b, a], config(), out=tmp_path / "out", quiet=True)
    assert result.details["baseline"] == "a"  # the bt audit, wherever it is listed
    assert "heldout_accuracy_vs_baseline" not in set(result.figures.query("audit == 'a'").metric)
    cost = figure(result, "heldout_accuracy_vs_baseline", "b")
    # paired by run (same plan): run 0 2.5/3 - 1.5/3, run 1 0; mean 1/6
    assert cost.value == pytest.approx(1 / 6) and "paired by run" in cost.detail
    assert 0 <= cost.lo <= cost.value <= cost.hi <= 1 / 3 + 1e-12
    assert any("each row against 'a'" in n for n in result.notes)
    # another plan: every run holds out the other group, so the runs are no pairs
    base, other = load_audit(a, "a"), load_audit(b, "b")
    other = dataclasses.replace(other, member=~other.member, label="b2")
    draws = {"a": np.array([[0, 0], [1, 1], [0, 1]]), "b2": np.array([[0, 1], [1, 0], [0, 0]])}
    rows = cost_figures([base, other], draws, CompareConfig(n_boot=3), {})
    # b2: run 0 holds out p0-p2 (all right), run 1 p3-p5 (all right): 1; a: 1/2 and 2/3
    (row,) = rows
    assert row["value"] == pytest.approx(1 - (0.5 + 2 / 3) / 2)
    assert "independent" in row["detail"]
    assert 1 - 2 / 3 - 1e-12 <= row["lo"] <= row["hi"] <= 1 - 0.5 + 1e-12  # 1 - a's draws


def _glance(page: str) -> str:
    start = page.index('id="glance"')
    return page[start:page.index("</section>", start)]


def test_glance_has_the_low_margin_columns_only_with_a_margin(tmp_path):
    a = write_audit(tmp_path / "a")
    b = write_audit(tmp_path / "b", D * 2 + 0.5, objective="poe")
    out = tmp_path / "out"
    result = compare([a, b], config(), out=out, quiet=True)
    glance = _glance(write_compare_report(out).read_text())
    for header in ("held-out accuracy", "vs a", "worst group", "low-margin accuracy",
                   "CM low \u2212 high margin", "TG, low margin", "Spearman(reward, words)"):
        assert f"<th>{header}</th>" in glance, header
    for metric in ("slice_low_margin", "cm_margin_low_minus_high", "tg_low_margin",
                   "heldout_accuracy_vs_baseline"):
        row = figure(result, metric, "b")
        shown = figure_text(row.value, row.lo, row.hi, row.n, row.few_pairs,
                            metric in DIFFERENCES)  # fmt: skip
        assert shown in glance, metric
    assert "gold at best-of" not in glance  # no overoptimization.json
    nan = (float("nan"),) * 6
    c = write_audit(tmp_path / "c", margin=nan)
    e = write_audit(tmp_path / "e", D * 2 + 0.5, objective="poe", margin=nan)
    out = tmp_path / "out2"
    result = compare([c, e], config(), out=out, quiet=True)
    assert not result.figures.metric.str.contains("margin").any()
    glance = _glance(write_compare_report(out).read_text())
    assert "<th>held-out accuracy</th>" in glance and "<th>vs c</th>" in glance
    for header in ("low-margin accuracy", "CM low", "TG, low margin"):
        assert header not in glance, header


def _row(audit, metric, value, family="slices", **kw):
    return {"audit": audit, "metric": metric, "family": family, "value": value, "lo": value - 0.1,
            "hi": value + 0.1, "n": 40, "few_pairs": False, "near_chance": False, **kw}


def test_a_slice_is_won_by_the_best_of_all_rows_shown():
    audits = [{"label": "bt", "objective": "bt"},
              {"label": "bt + length calibration", "objective": "bt",
               "reference": "length calibration"},
              {"label": "poe", "objective": "poe"}]  # fmt: skip
    figures = [_row("bt", "slice_chosen_shorter", 0.6),
               _row("bt + length calibration", "slice_chosen_shorter", 0.8),
               _row("poe", "slice_chosen_shorter", 0.7),
               _row("bt", "slice_low_margin", 0.55, "margin"),
               _row("bt + length calibration", "slice_low_margin", 0.52, "margin"),
               _row("poe", "slice_low_margin", 0.58, "margin"),
               *(_row(a["label"], "slice_quality", 0.9) for a in audits),  # all tie
               *(_row(a["label"], "slice_chosen_refusal", v, few_pairs=True, n=1)  # too few
                 for a, v in zip(audits, (0.1, 0.2, 0.3)))]  # fmt: skip
    metrics = {r["metric"]: {"label": r["metric"]} for r in figures}
    oo = {"ns": [1, 4, 16], "summary": [
        {"rm": "bt", "audit": "bt", "kind": "runs", "gold_at_max_n": 0.41,
         "gold_at_max_n_lo": 0.38, "gold_at_max_n_hi": 0.44},
        {"rm": "poe", "audit": "poe", "kind": "runs", "gold_at_max_n": 0.47,
         "gold_at_max_n_lo": 0.43, "gold_at_max_n_hi": 0.5}]}  # fmt: skip
    record = {"audits": audits, "figures": figures, "metrics": metrics,
              "details": {"baseline": "bt"}}  # fmt: skip
    html = glance_section(record, oo).html()
    rows = html[html.index("<tbody>"):html.index("</tbody>")].split("<tr>")[1:]
    assert rows[0].endswith("<td>0 of 3</td></tr>")  # bt wins none
    assert rows[1].endswith("<td>1 of 3</td></tr>")  # the reference row: counter-bias
    assert rows[2].endswith("<td>1 of 3</td></tr>")  # poe: low margin
    assert "<th>gold at best-of-16</th>" in html and "0.470 [0.430, 0.500]" in html
    won = html[html.index("Where each slice is won"):]
    lines = won.split("<tr>")[2:]
    assert lines[0].startswith("<td>slice_chosen_shorter</td><td>bt + length calibration</td>")
    assert "<td>poe: 0.700 [0.600, 0.800]</td>" in lines[0]  # the best audit itself
    assert lines[1].startswith("<td>slice_low_margin</td><td>poe</td>")
    assert lines[2].startswith("<td>slice_quality</td><td>all rows tie</td>")
    assert lines[3].startswith('<td>slice_chosen_refusal</td><td class="few" title="only 1 '
                               'pair (fewer than 20, min_group_pairs)')  # too few: not judged
    assert "not judged (n 1)</td>" in lines[3]


def test_compare_json_names_the_baseline(tmp_path):
    a = write_audit(tmp_path / "a", objective="poe")
    b = write_audit(tmp_path / "b")
    compare([a, b], config(), out=tmp_path / "out", quiet=True)
    record = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert record["details"]["baseline"] == "b"
    assert record["metrics"]["heldout_accuracy_vs_baseline"]["family"] == "accuracy"


def test_the_page_answers_which_objective_at_what_cost():
    audits = [{"label": "bt", "objective": "bt"},
              {"label": "bt + length calibration", "objective": "bt",
               "reference": "length calibration"},
              {"label": "poe", "objective": "poe"}, {"label": "curate", "objective": "curate"}]
    figures = [_row("bt", "heldout_accuracy", 0.73), _row("poe", "heldout_accuracy", 0.55),
               _row("curate", "heldout_accuracy", 0.7462),
               _row("bt + length calibration", "heldout_accuracy", 0.9),  # a reference: no
               _row("bt", "reward_length_spearman", 0.48, "shortcuts"),
               _row("poe", "reward_length_spearman", -0.01, "shortcuts"),
               _row("curate", "reward_length_spearman", 0.66, "shortcuts"),
               _row("poe", "heldout_accuracy_vs_baseline", -0.18, "accuracy"),
               _row("curate", "heldout_accuracy_vs_baseline", 0.016, "accuracy")]  # fmt: skip
    record = {"audits": audits, "figures": figures, "details": {"baseline": "bt"},
              "metrics": {r["metric"]: {"label": r["metric"]} for r in figures}}  # fmt: skip
    html = glance_section(record, None).html()
    answer = html[html.index("Which objective"):html.index("</ul>")]
    items = answer.split("<li>")[1:]
    assert items[0].startswith("<b>curate</b> has the highest held-out accuracy: 0.746")
    assert "against bt's 0.730" in items[0] and "against bt: +0.016" in items[0]
    assert items[1].startswith("<b>poe</b> has the least length-following rewards")
    assert "-0.010" in items[1] and "against bt: -0.180" in items[1]
    # bt's 0.730 lies inside curate's [0.646, 0.846]: no winner is claimed over it
    assert "not told apart from bt" in items[0] and "not told apart" not in items[1]
    assert len(items) == 2  # no low-margin figures, no pool: no more lines
