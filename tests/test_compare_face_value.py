"""compare.html at face value (issue 31, item 7): the page states which way CM goes with
margin in each audit, beside the paper's finding, without presuming it; a figure on fewer
than `min_group_pairs` pairs is greyed with its n in every table (never a bare
0.000 [0.000, 0.000]) and judged nowhere; "where each slice is won" covers every row,
reference rows included. Hand-built compare.json records, plus one compare() run."""

from __future__ import annotations

import math
import re

import pytest

from rmlens.comparison import compare
from rmlens.comparison.metrics import (
    NO_DIRECTION,
    cm_margin_direction,
    direction_floor,
    few_pairs,
    figure_text,
)
from rmlens.report._compare_glance import glance_section
from rmlens.report._compare_page import margin_direction, render_compare_page
from test_compare import config, figure, write_audit
from test_compare_margin import _row

FEW = re.compile(r'<td class="few" title="([^"]*)">([^<]*)</td>')


def _record(audits, figures, **config):
    return {"audits": [{"label": a} if isinstance(a, str) else a for a in audits],
            "figures": figures, "metrics": {r["metric"]: {"label": r["metric"]} for r in figures},
            "details": {"baseline": "bt"}, "config": {"min_group_pairs": 20, **config}}  # fmt: skip


def _margin(audit, spearman, diff, lo=None, hi=None, n=883):
    """The two figures the direction rests on: Spearman(CM, margin) and CM low - high."""
    lo = diff - 0.03 if lo is None else lo
    hi = diff + 0.03 if hi is None else hi
    return [_row(audit, "cm_margin_spearman", spearman, "margin", lo=None, hi=None, n=n),
            _row(audit, "cm_margin_low_minus_high", diff, "margin", lo=lo, hi=hi, n=n)]


def _text(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html).replace("&#x27;", "'")


# --- which way CM goes with margin ---------------------------------------------------------


def test_direction_rule_by_hand():
    assert NO_DIRECTION == 0.1
    assert cm_margin_direction(-0.27, 883, 0.06, 0.15) == "falls"
    assert cm_margin_direction(0.31, 883, -0.2, -0.1) == "rises"
    assert cm_margin_direction(0.04, 1500) == "unclear"  # under 0.1
    assert cm_margin_direction(-0.099, 10_000) == "unclear"
    # over 30 pairs a correlation's noise is 1/sqrt(29): 2/sqrt(29) = 0.371 is the floor
    assert direction_floor(30) == pytest.approx(2 / math.sqrt(29))
    assert cm_margin_direction(-0.3, 30) == "unclear"
    assert cm_margin_direction(-0.4, 30) == "falls"
    assert direction_floor(None) == NO_DIRECTION
    # a clear correlation that CM's low - high tercile difference contradicts (CM falling
    # with margin means low minus high above 0; here its interval is wholly below)
    assert cm_margin_direction(-0.2, 883, -0.08, -0.02) == "unclear"
    assert cm_margin_direction(-0.2, 883, -0.08, 0.01) == "falls"  # straddles 0: no veto
    assert cm_margin_direction(float("nan"), 883) == "unclear"


def test_cm_falling_with_margin_is_said_to_oppose_the_paper():
    record = _record(["bt"], _margin("bt", -0.27, 0.094))
    html = render_compare_page(record, {})
    text = _text(html[html.index('id="family-margin"'):])
    assert ("CM falls with margin here (Spearman -0.270; CM low \u2212 high margin +0.094): "
            "the opposite of the paper's finding that high-margin pairs are memorized "
            "most") in text  # fmt: skip
    assert "as the paper finds" not in _text(html)  # nothing presumes the paper's direction
    assert "rises" not in text.split("Which way CM goes")[1].split("</ul>")[0]


def test_cm_rising_with_margin_agrees_with_the_paper():
    text = _text(margin_direction(
        {(r["audit"], r["metric"]): r for r in _margin("poe", 0.31, -0.12)}, ["poe"]))
    assert ("CM rises with margin here (Spearman 0.310; CM low \u2212 high margin -0.120), "
            "as the paper finds: high-margin pairs are memorized most.") in text


def test_rows_going_different_ways_each_get_their_sentence():
    figures = [*_margin("bt", -0.15, 0.094), *_margin("bt + length calibration", -0.12, 0.08),
               *_margin("poe", 0.04, 0.002), *_margin("curate", -0.2, -0.05, -0.08, -0.02),
               *_margin("reweight", -0.5, 0.1, n=10)]  # fmt: skip
    for r in figures[-2:]:
        r["few_pairs"] = True
    labels = ["bt", "bt + length calibration", "poe", "curate", "reweight"]
    html = margin_direction({(r["audit"], r["metric"]): r for r in figures}, labels)
    items = [_text(i) for i in html.split("<li>")[1:]]
    assert items[0].startswith("CM falls with margin in bt, bt + length calibration (Spearman "
                               "-0.150 to -0.120; CM low \u2212 high margin +0.080 to +0.094)")
    assert items[1].startswith("No clear direction of CM with margin in poe (Spearman 0.040")
    assert "|Spearman| under 0.10): neither confirms nor contradicts the paper's finding" in (
        items[1])  # fmt: skip
    assert items[2].startswith("No clear direction of CM with margin in curate: the Spearman "
                               "correlation and CM's low \u2212 high margin difference point "
                               "opposite ways")
    assert items[3].startswith("Too few pairs to tell which way CM goes with margin in reweight")
    assert len(items) == 4


# --- figures on too few pairs --------------------------------------------------------------

AUDITS = ["bt", {"label": "bt + length calibration", "objective": "bt",
                 "reference": "length calibration"}, "poe"]  # fmt: skip
LABELS = ["bt", "bt + length calibration", "poe"]


def test_a_slice_of_one_pair_is_greyed_in_every_table_and_never_a_bare_zero():
    figures = [_row(a, "heldout_accuracy", v, "accuracy") for a, v in zip(LABELS, (.7, .8, .6))]
    figures += [_row(a, "slice_chosen_refusal", 0.0, lo=0.0, hi=0.0, n=1, few_pairs=True)
                for a in LABELS]  # fmt: skip
    figures += [_row(a, "slice_chosen_shorter", v) for a, v in zip(LABELS, (.5, .9, .7))]
    figures += [_row(a, "slice_low_margin", 0.52, "margin", n=297, near_chance=True)
                for a in LABELS]  # fmt: skip
    page = render_compare_page(_record(AUDITS, figures), {})
    assert "0.000 [0.000, 0.000]" not in page
    assert "td.few {" in page  # the style that greys them
    slices = page[page.index('id="family-slices"'):]
    slices = slices[:slices.index("</section>")]
    row = slices[slices.index("<td>slice_chosen_refusal</td>"):]
    row = row[:row.index("</tr>")]
    cells = FEW.findall(row)
    assert cells == [("only 1 pair (fewer than 20, min_group_pairs): not judged, no interval",
                      "0.000 (n 1)")] * 3  # fmt: skip
    assert "(fewer than 20 pairs (min_group_pairs)" not in slices
    assert "Greyed: a figure on fewer than 20 pairs (min_group_pairs)" in slices
    details = slices[slices.index("What each figure rests on"):]
    assert details.count('<td class="few" title="only 1 pair') == 3  # its pairs, greyed
    # "where each slice is won": the refusal slice is not judged, greyed, with its n
    glance = page[page.index('id="glance"'):]
    won = glance[glance.index("Where each slice is won"):glance.index("</section>")]
    (line,) = [x for x in won.split("<tr>") if "slice_chosen_refusal" in x]
    assert FEW.findall(line) == [("only 1 pair (fewer than 20, min_group_pairs): not judged, "
                                  "no interval", "not judged (n 1)")]  # fmt: skip
    # no winner counts it: 2 figures judged (shorter; low margin, where all tie), the
    # reference row wins one
    rows = glance[glance.index("<tbody>"):glance.index("</tbody>")].split("<tr>")[1:]
    assert [r.rsplit("<td>", 1)[1] for r in rows] == ["0 of 2</td></tr>", "1 of 2</td></tr>",
                                                      "0 of 2</td></tr>"]  # fmt: skip


def test_a_record_without_the_flag_is_greyed_by_its_n():
    """compare.json written before every counted figure had ``few_pairs``: the page greys
    by ``n`` against the comparison's ``min_group_pairs``."""
    figures = [_row(a, "worst_group_accuracy", 0.7, "accuracy", n=8, few_pairs=False)
               for a in ("bt", "poe")]  # fmt: skip
    figures += [_row(a, "cm_margin_low", 0.05, "margin", n=9) for a in ("bt", "poe")]
    for r in figures:
        del r["few_pairs"]
    page = render_compare_page(_record(["bt", "poe"], figures, min_group_pairs=10), {})
    # 2 rows, each in the opening table and the accuracy table
    assert FEW.findall(page).count(("only 8 pairs (fewer than 10, min_group_pairs): not "
                                    "judged, no interval", "0.700 (n 8)")) == 4  # fmt: skip
    assert ("only 9 pairs (fewer than 10, min_group_pairs): not judged, no interval",
            "0.050 (n 9)") in FEW.findall(page)  # fmt: skip
    assert few_pairs("cm_margin_low", 9, 10) and not few_pairs("cm_margin_low", 10, 10)
    assert not few_pairs("probe_flip_refusal", 1, 10)  # edits, not pairs: not counted
    assert not few_pairs("shap_shortcut_share_cm", 1, 10)


def test_compare_flags_every_accuracy_and_margin_figure_on_too_few_pairs(tmp_path):
    a = write_audit(tmp_path / "a")  # 6 pairs, 3 held out per run; margin terciles of 2
    result = compare([a], config(min_group_pairs=4), out=tmp_path / "out", quiet=True)
    few = dict(zip(result.figures.metric, result.figures.few_pairs))
    assert not few["heldout_accuracy"]  # 6 held-out pairs
    assert few["slice_low_margin"] and few["cm_margin_low"] and few["tg_low_margin"]  # n 2
    assert not few["cm_margin_low_minus_high"] and not few["cm_margin_spearman"]  # n 4, 6
    assert few["slice_chosen_refusal"]  # one pair
    low = figure(result, "slice_low_margin")
    assert not low.near_chance  # 0.5 on 2 pairs: too few to flag
    assert not any("weakest preferences" in f for f in result.flags)
    assert result.wide().loc["slice_low_margin", "a"] == figure_text(low.value, n=2, few=True)
    assert result.wide().loc["slice_low_margin", "a"] == "0.500 (n 2)"


# --- where each slice is won ---------------------------------------------------------------


def test_a_reference_row_at_0899_beats_bt_at_0873():
    """The finding: "where each slice is won" named bt (0.873) while the length-calibration
    row showed 0.899. Every row competes; the best audit itself stands beside it."""
    figures = [_row("bt", "slice_chosen_shorter", 0.873),
               _row("bt + length calibration", "slice_chosen_shorter", 0.899),
               _row("poe", "slice_chosen_shorter", 0.61)]  # fmt: skip
    html = glance_section(_record(AUDITS, figures), None).html()
    won = html[html.index("Where each slice is won"):]
    head, line = won.split("<tr>")[1:3]
    assert head.startswith("<th>figure</th><th>best</th><th>value</th>"
                           "<th>best audit (no reference)</th><th>bt</th>")
    assert line == ("<td>slice_chosen_shorter</td><td>bt + length calibration</td>"
                    "<td>0.899 [0.799, 0.999]</td><td>bt: 0.873 [0.773, 0.973]</td>"
                    "<td>0.873 [0.773, 0.973]</td></tr></tbody></table></div></section>")
    rows = html[html.index("<tbody>"):html.index("</tbody>")].split("<tr>")[1:]
    assert [r.rsplit("<td>", 1)[1] for r in rows] == ["0 of 1</td></tr>", "1 of 1</td></tr>",
                                                      "0 of 1</td></tr>"]  # fmt: skip


def test_a_figure_on_too_few_pairs_answers_nothing():
    """The page's answer (which objective, at what cost) skips a figure on too few pairs."""
    audits = ["bt", {"label": "poe", "objective": "poe"}, {"label": "curate"}]
    figures = [_row("bt", "heldout_accuracy", 0.7, "accuracy"),
               _row("poe", "heldout_accuracy", 0.9, "accuracy", n=5, few_pairs=True),
               _row("curate", "heldout_accuracy", 0.72, "accuracy")]  # fmt: skip
    html = glance_section(_record(audits, figures), None).html()
    answer = html[html.index("Which objective"):html.index("</ul>")]
    assert "<b>curate</b> has the highest held-out accuracy: 0.720" in answer
    assert "poe" not in answer
    assert FEW.findall(html) == [("only 5 pairs (fewer than 20, min_group_pairs): not judged, "
                                  "no interval", "0.900 (n 5)")]  # fmt: skip
