"""Attribution at face value (issue 31, item 3): a fit that explains nothing says so, R^2 is
in the figure titles, and one stability rule judges every regressor. Hand-built fit tables."""

from __future__ import annotations

import json
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from rmlens.attribution._attribute import attribution_warnings, fit_record
from rmlens.attribution._informative import (
    R2_FLOOR,
    fit_warnings,
    informative,
    informative_column,
    not_informative,
    r2_title,
)
from rmlens.attribution._stability import (
    ABOVE_CHANCE,
    WARN_BELOW,
    stability_bar,
    stability_warnings,
)

FEATURES = ["len_chars_diff", "margin", "refusal_chosen", "sentiment_diff", "flesch_chosen",
            "overlap_jaccard"]


def fit_table(rows: list[dict]) -> pd.DataFrame:
    """A fit table as ``Attributor.fit_`` writes it (stable defaults, noise 0.5)."""
    base = {"r2": 0.3, "r2_std": 0.02, "n_pairs": 1000, "n_dropped_nan": 0, "n_folds": 5,
            "rank_spearman": 0.95, "top10_overlap": 0.9, "top10_half1": [], "top10_half2": [],
            "rank_spearman_noise": 0.5, "top10_overlap_noise": 0.5,
            "stability_note": "halves of the runs"}
    fit = pd.DataFrame([{**base, **row} for row in rows])
    fit.insert(4, "informative", informative_column(fit))
    return fit


@pytest.fixture
def hh_cm() -> pd.DataFrame:
    """HH CM as issue 31 found it: LightGBM explains a little, the MLP nothing, yet the
    MLP's ranking is perfectly 'stable' between the halves."""
    return fit_table([
        {"target": "tm", "regressor": "lightgbm", "r2": 0.41},
        {"target": "tm", "regressor": "mlp", "r2": 0.35},
        {"target": "cm", "regressor": "lightgbm", "r2": 0.08},
        {"target": "cm", "regressor": "mlp", "r2": -0.057, "rank_spearman": 1.0,
         "top10_overlap": 1.0},
    ])


def importance_of(fit: pd.DataFrame) -> pd.DataFrame:
    rows = [{"target": t, "regressor": r, "feature": f, "importance": 1.0 / (i + 1)}
            for t, r in zip(fit.target, fit.regressor) for i, f in enumerate(FEATURES)]
    imp = pd.DataFrame(rows)
    imp["rank"] = imp.groupby(["target", "regressor"]).importance.rank(ascending=False).astype(int)
    return imp


# -- the R^2 floor --

def test_negative_r2_is_not_informative_and_warned_about(hh_cm):
    assert R2_FLOOR == 0.01  # stated once, in rmlens.attribution._informative
    assert informative(0.08) and informative(R2_FLOOR)
    assert not informative(-0.057) and not informative(0.0) and not informative(np.nan)
    assert hh_cm.informative.tolist() == [True, True, True, False]
    assert not_informative(-0.057) == "not informative (held-out R² -0.057 < floor 0.01)"
    assert fit_warnings(hh_cm) == [
        "the CM mlp fit explains nothing (held-out R² -0.057 < floor 0.01): its features are "
        "not ranked, and the stability of its ranking (rank correlation 1.00) means nothing"]
    # its rank correlation of 1.00 is never judged, let alone shown as reassuring
    assert stability_warnings(hh_cm) == []
    assert attribution_warnings(hh_cm) == fit_warnings(hh_cm)
    entry = fit_record(hh_cm)[3]
    assert entry == {"target": "cm", "regressor": "mlp", "r2": -0.057, "r2_std": 0.02,
                     "informative": False, "n_pairs": 1000, "n_dropped_nan": 0, "n_folds": 5}
    json.dumps(fit_record(hh_cm))  # plain JSON: numpy bools and NaN converted


def test_no_r2_at_all_is_not_informative_either():
    fit = fit_table([{"target": "tg", "regressor": "lightgbm", "r2": np.nan,
                      "rank_spearman": np.nan, "top10_overlap": np.nan}])
    assert not fit.informative.iloc[0]
    assert fit_warnings(fit) == ["the TG lightgbm fit has no held-out R² (too few pairs, "
                                 "groups or features)"]
    assert not_informative(np.nan).startswith("not informative (no held-out R²")


# -- one stability rule --

def test_the_rule_is_stated_once():
    assert (WARN_BELOW, ABOVE_CHANCE) == (0.5, 0.25)
    assert stability_bar(0.71) == pytest.approx(0.71 + 0.25 * 0.29)  # 0.7825
    assert stability_bar(0.85) == pytest.approx(0.8875)
    assert stability_bar(0.2) == WARN_BELOW  # the bar never drops below 0.5
    assert stability_bar(np.nan) == WARN_BELOW  # no noise level: only the 0.5 bar


def test_squality_cm_rank_correlation_at_its_noise_level_is_flagged():
    # issue 31: LightGBM at rho 0.85 against noise 0.85 got no warning, the MLP at 0.82
    # against 0.71 did; one rule now flags the first and clears the second
    fit = fit_table([
        {"target": "cm", "regressor": "lightgbm", "r2": 0.12, "rank_spearman": 0.85,
         "rank_spearman_noise": 0.85},
        {"target": "cm", "regressor": "mlp", "r2": 0.09, "rank_spearman": 0.82,
         "rank_spearman_noise": 0.71},
    ])
    assert stability_warnings(fit) == [
        "the CM feature ranking is not stable between halves of the runs (lightgbm: rank "
        "correlation 0.85, needs 0.887 (noise 0.85)): treat its top features as tentative"]


def test_top10_overlap_follows_the_same_rule():
    fit = fit_table([
        {"target": "tm", "regressor": "lightgbm", "top10_overlap": 0.7,
         "top10_overlap_noise": 0.7},  # needs 0.775: flagged
        {"target": "tg", "regressor": "lightgbm", "top10_overlap": 0.8,
         "top10_overlap_noise": 0.7},  # clears 0.775
        {"target": "cm", "regressor": "mlp", "top10_overlap": 0.4,
         "top10_overlap_noise": 0.1},  # far above noise, yet below 0.5
    ])
    warnings = stability_warnings(fit)
    assert warnings == [
        "the TM feature ranking is not stable between halves of the runs (lightgbm: top-10 "
        "overlap 0.70, needs 0.775 (noise 0.70)): treat its top features as tentative",
        "the CM feature ranking is not stable between halves of the runs (mlp: top-10 "
        "overlap 0.40, needs 0.5 (noise 0.10)): treat its top features as tentative"]
    assert not [w for w in warnings if "TG" in w]


# -- figures --

def test_plot_titles_give_the_held_out_r2(hh_cm, monkeypatch, tmp_path):
    import shap
    from matplotlib.figure import Figure

    import rmlens.attribution._plots as plots

    assert r2_title("cm", "mlp", -0.057) == "CM - mlp (held-out R² -0.06, not informative)"
    assert r2_title("tm", "lightgbm", 0.41) == "TM - lightgbm (held-out R² 0.41)"
    figures = []

    @contextmanager
    def keep(path, size=(7.0, 4.5), layout="tight"):
        fig = Figure(figsize=size)
        figures.append(fig)
        yield fig

    monkeypatch.setattr(plots, "plot_to", keep)
    plots.plot_importance(importance_of(hh_cm), tmp_path / "imp.png", fit=hh_cm)
    rng = np.random.default_rng(0)
    explanations = {(t, "mlp"): shap.Explanation(rng.normal(size=(30, len(FEATURES))),
                                                 base_values=np.zeros(30),
                                                 data=rng.normal(size=(30, len(FEATURES))),
                                                 feature_names=FEATURES)
                    for t in ("tm", "cm")}
    plots.plot_beeswarm(explanations, "mlp", tmp_path / "bees.png", fit=hh_cm)
    bars, bees = ({ax.get_title() for ax in fig.axes} for fig in figures)
    assert {"TM - lightgbm (held-out R² 0.41)", "CM - lightgbm (held-out R² 0.08)",
            "CM - mlp (held-out R² -0.06, not informative)"} <= bars
    assert {"TM - mlp (held-out R² 0.35)", "CM - mlp (held-out R² -0.06, not informative)"} \
        <= bees


# -- console and report --

def fake_attributor(fit: pd.DataFrame) -> SimpleNamespace:
    imp = importance_of(fit)
    return SimpleNamespace(fit_=fit, importance_=imp, diff_=pd.DataFrame(), notes_=[],
                           left_out_={}, halves_=None)


def test_console_says_not_informative_instead_of_listing_features(hh_cm, capsys, tmp_path):
    from rmlens.cli.attribute import _print_result

    _print_result(fake_attributor(hh_cm), tmp_path, as_json=False)
    captured = capsys.readouterr()
    cells = [line.split("│") for line in captured.out.splitlines() if line.startswith("│")]
    top, stable = (" ".join(" ".join(c[i] for c in cells).split()) for i in (4, 5))  # wrapped
    assert "not informative (held-out R² -0.057 < floor 0.01)" in top
    assert "means nothing: the fit is not informative" in stable
    assert top.count("len_chars_diff") == 3  # the three informative fits list it, CM mlp not
    assert "warning: the CM mlp fit explains nothing (held-out R² -0.057" in captured.err

    _print_result(fake_attributor(hh_cm), tmp_path, as_json=True)
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["r2_floor"] == R2_FLOOR
    assert [f["informative"] for f in out["fit"]] == [True, True, True, False]
    assert out["top"]["cm/mlp"] == [] and len(out["top"]["cm/lightgbm"]) == 5
    assert out["warnings"] == attribution_warnings(hh_cm)


def test_report_warns_and_does_not_rank_an_uninformative_fit(hh_cm):
    from rmlens.report._sections import attribution_section

    old = hh_cm.drop(columns="informative")  # directories written before the column
    section = attribution_section(importance_of(hh_cm), old)
    html = section.html()
    assert "The CM mlp fit explains nothing (held-out R² -0.057 &lt; floor 0.01)" in html
    assert "not informative (held-out R² -0.057 &lt; floor 0.01)" in html  # its top features
    assert "len_chars_diff, margin, refusal_chosen" in html  # the others' top features
    assert "<th>informative</th>" in html
    assert "means nothing: the fit is not informative" in html  # its stability cells
    assert "Not shown, not informative: CM - mlp." in html
    mlp = [f["figure"] for f in section.figures if "mlp" in f["figure"]["layout"]["title"]["text"]]
    assert [t["name"] for t in mlp[0]["data"]] == ["TM (R\u00b2 0.350)"]
