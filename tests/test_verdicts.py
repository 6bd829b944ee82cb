"""The written verdict rules (benchmarks/findings/verdict_rules.py) on hand-made intervals, and
their application to the findings' files (benchmarks/findings/verdicts.py, issue 59 item 6)."""

from __future__ import annotations

import importlib
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FINDINGS = ROOT / "docs" / "findings"


def _load(name: str):
    """A module of benchmarks/findings/, imported as the findings command imports it."""
    if str(ROOT / "benchmarks") not in sys.path:  # after the installed packages
        sys.path.append(str(ROOT / "benchmarks"))
    return importlib.import_module(f"findings.{name}")


rules = _load("verdict_rules")
verdicts = _load("verdicts")
Part, decide = rules.Part, rules.decide


@pytest.mark.parametrize(("parts", "verdict"), [
    ([Part("a", 1, 0.1, 0.3), Part("b", -1, -0.5, -0.2)], "reproduced"),
    ([Part("a", 1, 0.40, 0.60, size=0.32)], "reproduced"),
    ([Part("a", 1, -0.4, -0.1)], "not reproduced"),  # the other side of 0
    ([Part("a", 1, 0.05, 0.14, size=0.32)], "not reproduced"),  # below the claimed size
    ([Part("a", 1, -0.4, -0.1), Part("b", 1, -0.1, 0.2)], "not reproduced"),
    ([Part("a", -1, -0.54, 0.19)], "inconclusive"),  # ex-vs-im's domain shift
    ([Part("a", 1, 0.07, 0.39), Part("b", 1, -0.11, 0.26)], "inconclusive"),  # framing
    ([Part("a", 1, 0.13, 0.16), Part("b", 1, -0.06, -0.03), Part("c", 1, -0.02, 0.004)],
     "partly"),  # frequency: one RM above 0, one below, one holding 0
    ([], "not testable here"),
])  # fmt: skip
def test_each_verdict_from_hand_made_intervals(parts, verdict):
    assert decide(parts).label == verdict
    assert verdict in rules.VERDICTS


def test_outcome_of_one_setting():
    outcome = rules.outcome
    assert outcome(Part("a", 1, -0.3, 0.0)) == "not reproduced"  # no value above 0 in it
    assert outcome(Part("a", 1, 0.0, 0.3)) == "inconclusive"  # 0 itself is held
    assert outcome(Part("a", 1, -0.1, 0.5, size=0.32)) == "inconclusive"
    assert outcome(Part("a", -1, 0.48, 0.50, size=0.1, null=1.0)) == "reproduced"
    assert outcome(Part("a", -1, 0.92, 0.95, size=0.1, null=1.0)) == "not reproduced"
    assert outcome(Part("a", 1, 0.27, 0.56, null=0.1)) == "reproduced"
    assert outcome(Part("a", 0, -0.5, -0.2)) == "reproduced"  # either way
    assert outcome(Part("a", 0, -0.05, 0.05, size=0.1)) == "not reproduced"
    assert outcome(Part("a", 0, -0.2, 0.05)) == "inconclusive"
    assert outcome(Part("a", 1, None, None)) == "missing"


def test_a_missing_interval_decides_nothing_it_could_change():
    decided = decide([Part("a", 1, 0.1, 0.3), Part("b", 1, -0.3, -0.1), Part("c", 1, None, None)])
    assert decided.label == "partly"
    assert decided.record()["parts"][2] == {"figure": "c", "outcome": "missing"}
    assert decide([Part("a", 1, 0.1, 0.3), Part("c", 1, None, None)]).label is None


@pytest.mark.parametrize("kwargs", [
    {"sign": 2, "lo": 0.1, "hi": 0.2}, {"sign": 1, "lo": 0.3, "hi": 0.2},
    {"sign": 1, "lo": 0.1, "hi": 0.2, "size": -0.3}, {"sign": 1, "lo": 0.1, "hi": None},
])  # fmt: skip
def test_a_part_refuses_what_the_rules_cannot_read(kwargs):
    with pytest.raises(ValueError, match="Part 'x'"):
        Part("x", **kwargs)


def test_every_stored_finding_follows_the_rules(capsys):
    for path in sorted(FINDINGS.glob("*.json")):
        found = json.loads(path.read_text())
        assert found["verdict"] in rules.VERDICTS, path.name
        assert verdicts.text(verdicts.judged(found)) == path.read_text(), path.name
    assert verdicts.main([str(FINDINGS), "--check"]) == 0
    assert "ex-vs-im: inconclusive -> inconclusive" in capsys.readouterr().out


def test_reverdict_rewrites_the_verdict_and_nothing_else(tmp_path):
    stored = json.loads((FINDINGS / "ex-vs-im.json").read_text())
    old = {k: v for k, v in stored.items() if k != "verdict_rule"} | {"verdict": "partly"}
    (tmp_path / "ex-vs-im.json").write_text(verdicts.text(old))
    shutil.copy(FINDINGS / "overoptimization.json", tmp_path)
    assert verdicts.main([str(tmp_path)]) == 0
    new = json.loads((tmp_path / "ex-vs-im.json").read_text())
    assert new["verdict"] == "inconclusive"
    keys = list(new)
    assert keys[keys.index("verdict") + 1] == "verdict_rule"
    assert {k: v for k, v in new.items() if k not in ("verdict", "verdict_rule")} == {
        k: v for k, v in old.items() if k != "verdict"}
    domain = next(p for p in new["verdict_rule"]["parts"] if p["figure"] == "hh:domain_shift:gap")
    assert domain == {"figure": "hh:domain_shift:gap", "sign": -1, "outcome": "inconclusive"}
    assert verdicts.main([str(tmp_path), "--check"]) == 0


def test_a_verdict_a_missing_figure_could_change_stays_with_a_note():
    fig = {"key": "top", "label": "top tenth shared", "value": 0.43, "lo": 0.27, "hi": 0.56,
           "n": 883, "unit": "share", "claimed": None}  # fmt: skip
    found = {"name": "memorization-modes", "figures": [fig], "verdict": "partly",
             "reading": "r", "tables": []}  # no reliabilities: no ceiling to reach
    judged = verdicts.judged(found)
    assert judged["verdict"] == "partly" and list(judged)[3] == "verdict_rule"
    assert judged["verdict_rule"]["rule"] == "kept"
    assert "cm over the ceiling" in judged["verdict_rule"]["note"]
    assert verdicts.judged({**found, "verdict": None})["verdict"] == "inconclusive"


def test_each_kind_of_data_gets_its_own_verdict_and_one_not_measured_is_named():
    def fig(key, lo, hi):
        return {"key": key, "label": key, "value": (lo + hi) / 2, "lo": lo, "hi": hi,
                "n": 100, "unit": "Spearman", "claimed": None}

    ratings = [fig("question_margin", -0.10, 0.07), fig("pair_margin", -0.57, -0.47)]
    found = {"name": "memorization-margin", "figures": ratings, "verdict": None,
             "not_measured": {"ranked conversations": "no such pairs here"}}
    record = verdicts.judged(found)["verdict_rule"]
    assert record["by_data"] == {"ratings": "not reproduced",
                                 "ranked conversations": "not testable here"}
    assert [p["data"] for p in record["parts"]] == ["ratings", "ratings"]
    both = {"name": "memorization-margin", "verdict": None,
            "figures": [*ratings, fig("ranked_margin", 0.41, 0.59)]}
    judged = verdicts.judged(both)
    assert judged["verdict_rule"]["by_data"] == {"ratings": "not reproduced",
                                                 "ranked conversations": "reproduced"}
    assert judged["verdict"] == "partly"  # holds on one kind of data, not on the other
    assert "by_data" not in verdicts.judged({"name": "overoptimization", "figures": [],
                                             "verdict": None})["verdict_rule"]


def test_caveats_and_unknown_findings():
    users = json.loads((FINDINGS / "memorization-users.json").read_text())
    assert "forced by construction" in users["verdict_rule"]["caveat"]
    with pytest.raises(ValueError, match="'someone-else' has no claim"):
        verdicts.judged({"name": "someone-else", "figures": [], "verdict": None})


def test_the_scripts_give_the_rules_verdict():
    """The findings scripts call ``judged``: rebuilt from their stored figures, the tokens
    findings and the checkpoint finding (read from benchmarks/results) carry the verdict
    and record of the stored files."""
    pytest.importorskip("rmlens.tokens")
    tokens = _load("tokens")
    stored = {n: json.loads((FINDINGS / f"tokens-{n}.json").read_text())
              for n in ("framing", "frequency")}  # fmt: skip
    built = [tokens.framing_finding(stored["framing"]["figures"],
                                    stored["framing"]["tables"][0]["rows"], "data"),
             tokens.frequency_finding(stored["frequency"]["figures"], [], "data")]
    checkpoint = json.loads((FINDINGS / "memorization-checkpoint.json").read_text())
    built.append(_load("checkpoint").checkpoint_regime(Path("unused")))
    for new, old in zip(built, [*stored.values(), checkpoint]):
        assert (new["verdict"], new["verdict_rule"]) == (old["verdict"], old["verdict_rule"])
