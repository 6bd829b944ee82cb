"""What CM follows besides memory (issue 49): CM's Spearman with group size and margin, with a
bootstrap over groups, and the share memorized by group size, against values by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rmlens.memorization import audit_sentences, cm_links


def table() -> pd.DataFrame:
    """Groups of 1, 2 and 3 pairs; CM rises along the pairs, the margin falls."""
    return pd.DataFrame({
        "cm": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, np.nan],
        "group": ["a", "b", "b", "c", "c", "c", "c"],
        "category": ["other", "memorized", "other", "memorized", "memorized", "other",
                     "undefined"],
        "margin": [6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0],
    })  # fmt: skip


def test_links_match_the_hand_computed_spearman():
    links = cm_links(table(), min_groups=3)
    # sizes 1, 2, 2, 3, 3, 3 (the NaN-CM pair left out): ranks 1, 2.5, 2.5, 5, 5, 5, centred
    # -2.5, -1, -1, 1.5, 1.5, 1.5 (sum of squares 15); CM ranks centred -2.5 .. 2.5 (17.5);
    # their products sum to 6.25 + 1.5 + 0.5 + 0.75 + 2.25 + 3.75 = 15
    size = links["group_size"]
    assert size["spearman"] == pytest.approx(15 / np.sqrt(15 * 17.5))
    assert (size["n_pairs"], size["n_groups"]) == (6, 3)
    assert links["margin"]["spearman"] == pytest.approx(-1.0)
    for link in (size, links["margin"]):
        assert link["lo"] <= link["spearman"] <= link["hi"]
    assert links["margin"]["hi"] == pytest.approx(-1.0)  # every resample is monotone


def test_the_share_memorized_by_group_size():
    by_size = {b["sizes"]: b for b in cm_links(table(), min_groups=3)["group_size"]["by_size"]}
    assert by_size["alone"] == {"sizes": "alone", "n_pairs": 1, "mean_cm": 0.0,
                                "memorized": 0.0}  # fmt: skip
    assert by_size["in groups of 2 to 5"]["n_pairs"] == 5
    assert by_size["in groups of 2 to 5"]["mean_cm"] == pytest.approx(0.3)
    assert by_size["in groups of 2 to 5"]["memorized"] == pytest.approx(3 / 5)
    assert by_size["in groups of 6 or more"] == {
        "sizes": "in groups of 6 or more", "n_pairs": 0, "mean_cm": None, "memorized": None
    }


def test_the_bootstrap_resamples_groups_not_pairs():
    """Two groups of 50 pairs, CM following the margin in one and against it in the other: a
    resample holds whole groups, so half the draws take one group twice (Spearman +1 or -1)
    and the interval spans -1 to 1, where resampling pairs would keep it near 0."""
    cm = np.r_[np.linspace(0, 1, 50), np.linspace(0, 1, 50)]
    frame = pd.DataFrame({"cm": cm, "group": ["a"] * 50 + ["b"] * 50, "category": "other",
                          "margin": np.r_[np.linspace(0, 1, 50), -np.linspace(0, 1, 50)]})
    link = cm_links(frame, min_groups=2, n_boot=200)["margin"]
    assert link["spearman"] == pytest.approx(0.0, abs=1e-12)
    assert link["lo"] == pytest.approx(-1.0) and link["hi"] == pytest.approx(1.0)
    assert "group_size" not in cm_links(frame, min_groups=2)  # sizes equal: nothing to follow


def test_no_links_without_groups_or_with_too_few():
    assert cm_links(table().drop(columns="group"), min_groups=1) == {}
    assert cm_links(table()) == {}  # 3 groups, under the default 10


def test_a_link_is_said_with_its_interval_and_meaning_only_where_it_excludes_0():
    bins = [{"sizes": "alone", "n_pairs": 120, "mean_cm": 0.0, "memorized": 0.0},
            {"sizes": "in groups of 2 to 5", "n_pairs": 0, "mean_cm": None, "memorized": None},
            {"sizes": "in groups of 6 or more", "n_pairs": 300, "mean_cm": 0.2,
             "memorized": 0.41}]  # fmt: skip
    links = {"group_size": {"spearman": 0.32, "lo": 0.2, "hi": 0.44, "by_size": bins},
             "margin": {"spearman": 0.05, "lo": -0.05, "hi": 0.15}}  # fmt: skip
    size, margin = (str(s) for s in audit_sentences({"links": links}).links)
    assert size.startswith(
        "CM rises with the size of a pair's group (Spearman 0.32, 95% interval over groups "
        "0.20 to 0.44; memorized: 0% of 120 pairs alone, 41% of 300 pairs in groups of 6 or "
        "more). A run holds a group out whole"
    )
    assert margin == ("CM does not follow the pair's margin (Spearman 0.05, 95% interval over "
                      "groups -0.05 to 0.15).")  # fmt: skip
    links["margin"].update(spearman=-0.52, lo=-0.57, hi=-0.49)
    assert str(audit_sentences({"links": links}).links[1]).startswith(
        "CM falls with the pair's margin (Spearman -0.52, 95% interval over groups -0.57 to "
        "-0.49). Which way depends on the data"
    )
