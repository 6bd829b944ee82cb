"""Consoles that end with their answer (issue 39, part 5): `rmlens mitigate` and `rmlens
compare` print the page's answer and where the tables are, last and in few lines (the tables
with --verbose); a figure on too few pairs is a dash; `rmlens memorize` names the flag that
brings CM to reliability 0.8 and the one column TG rests on."""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pandas as pd
import pytest

from conftest import length_pairs, run_cli

MOST_LINES = 40  # what a default `mitigate` or `compare` may print, stdout and stderr together
OBJECTIVES = "bt,poe,label_smoothing,reweight,curate"


@pytest.fixture(scope="module")
def mitigated(tiny_encoder_dir, tmp_path_factory):
    """Five objectives audited on 120 pairs (six rows with the length-calibrated one), as
    `rmlens mitigate` prints it by default (no --quiet: status lines count too)."""
    root = tmp_path_factory.mktemp("answer")
    data = root / "pairs.jsonl"
    length_pairs(120, 24).to_json(data, orient="records", lines=True)
    env = {"RMLENS_CACHE": str(root / "cache"), "COLUMNS": "100"}
    args = ["mitigate", "--data", data, "--out", root / "mit", "--model", tiny_encoder_dir,
            "--runs", "6", "--folds", "3", "--objectives", OBJECTIVES, "--bias-features",
            "len_words", "--no-probes", "--no-shap", "--n-boot", "50"]  # fmt: skip
    result = run_cli(args, env)
    assert result.exit_code == 0, result.output
    return root, args, env, result


def page_answer(out) -> list[str]:
    """The answer that opens compare.html, as plain text, one line per headline figure."""
    page = (out / "compare.html").read_text(encoding="utf-8")
    found = re.search(r"Which objective, at what cost:</p><ul>(.*?)</ul>", page, re.S)
    assert found, "the page has no answer"
    items = re.findall(r"<li>(.*?)</li>", found.group(1), re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", item)) for item in items]


def flat(text: str) -> str:
    return " ".join(text.split())  # as rich wraps it, joined


def test_mitigate_prints_few_lines_and_ends_with_the_answer(mitigated):
    root, _, _, result = mitigated
    out = root / "mit"
    lines = result.stdout.splitlines()
    assert len(lines) + len(result.stderr.splitlines()) <= MOST_LINES, result.output
    assert "Agreement between audits" not in result.stdout  # the 45-row table: --verbose
    assert "audits side by side" not in result.stdout
    assert f"results in {out}/ (compare.parquet, compare.json" in flat("\n".join(lines[-3:]))
    tail = flat("\n".join(lines[-12:]))
    assert f"full tables: {out / 'compare.parquet'}, {out / 'compare.json'}" in tail
    assert f"the page: {out / 'compare.html'}" in tail and "--verbose" in tail
    assert "Which objective, at what cost:" in tail
    # the page's answer, word for word (ties named): the console computes none of its own
    answer = page_answer(out)
    assert answer and all(f"- {line}" in flat(result.stdout) for line in answer)
    assert flat(result.stdout).index("Which objective") > flat(result.stdout).index(
        "audits compared: bt, bt + length calibration (reference), poe")  # fmt: skip


def test_warnings_and_status_lines_are_said_once(mitigated):
    _, _, _, result = mitigated
    said = [line for line in result.stderr.splitlines() if line.strip()]
    repeated = {line for line in said if said.count(line) > 1 and "━" not in line}
    assert not repeated, repeated  # (the progress bars' lines aside)
    # each audit's warnings: one line naming their codes and where their words are
    assert not any("the RMs are weak" in line for line in said)
    codes = [line for line in said if "the audits' warnings" in line]
    assert len(codes) == 1 and "summary.json" in codes[0] and "weak_rm" in codes[0]


def test_verbose_prints_the_tables_then_the_answer(mitigated):
    _, args, env, _ = mitigated
    result = run_cli([*args, "--verbose", "--quiet"], env)  # resumed: no run is redone
    assert result.exit_code == 0, result.output
    text = result.stdout
    for table in ("audits side by side", "Held-out accuracy", "Agreement between audits"):
        assert table in text, table
    assert text.index("Agreement between audits") < text.index("Which objective, at what cost")
    assert "note: " in text and "(--verbose prints the tables here)" not in flat(text)
    assert "results in" in flat("\n".join(text.splitlines()[-3:]))


def test_compare_prints_the_answer_in_few_lines_and_dashes_few_pairs(mitigated):
    root, _, env, _ = mitigated
    dirs = [root / "mit" / name for name in ("bt", "poe", "curate")]
    out = root / "cmp"
    result = run_cli(["compare", *dirs, "--out", out, "--no-shap", "--no-probes", "--n-boot",
                      "50"], env)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len(result.output.splitlines()) <= MOST_LINES, result.output
    assert "Agreement between audits" not in result.stdout
    assert all(f"- {line}" in flat(result.stdout) for line in page_answer(out))
    assert "results in" in flat("\n".join(result.stdout.splitlines()[-3:]))
    # every counted figure on fewer pairs than --min-group-pairs: a dash, never "1.000 (n 120)"
    few = run_cli(["compare", *dirs, "--out", root / "few", "--no-shap", "--no-probes",
                   "--n-boot", "50", "--min-group-pairs", "1000", "--verbose"], env)  # fmt: skip
    assert few.exit_code == 0, few.output
    assert "(n " not in few.stdout
    assert "\u2013 none, or on fewer than 1000 pairs (min_group_pairs)" in flat(few.stdout)
    row = next(line for line in few.stdout.splitlines() if line.startswith("│ poe "))
    assert row.split("│")[2].strip() == "\u2013", row  # its held-out accuracy: 120 pairs


def test_a_slice_on_too_few_pairs_is_a_dash_in_the_tables(tmp_path, monkeypatch, capsys):
    from rmlens.cli.compare import print_comparison
    from rmlens.comparison._result import Comparison

    monkeypatch.setenv("COLUMNS", "100")
    from rmlens.comparison import metrics as M

    rows = []
    for audit in ("bt", "poe"):  # poe has each slice on 1 pair, bt on 300
        few = audit == "poe"
        for metric in ("slice_chosen_refusal", "slice_low_margin"):
            rows.append({"audit": audit, "family": M.family(metric), "metric": metric,
                         "value": 0.0 if few else 0.71, "lo": 0.0, "hi": 0.0 if few else 0.74,
                         "n": 1 if few else 300, "detail": "", "near_chance": False,
                         "few_pairs": few})  # fmt: skip
    result = Comparison(figures=pd.DataFrame(rows), agreement=pd.DataFrame(),
                        audits=[{"label": "bt"}, {"label": "poe"}])  # fmt: skip
    print_comparison(result, tmp_path)
    out = capsys.readouterr().out
    assert "0.000 (n 1)" not in out and "(n 1)" not in out
    assert "0.710 [0.000, 0.740]" in out
    poe = [line.split("┃" if "┃" in line else "│") for line in out.splitlines()
           if "accuracy, chosen response a refusal" in line]  # fmt: skip
    assert poe and poe[0][-2].strip() == "\u2013", poe
    assert "fewer than 20 pairs (min_group_pairs)" in flat(out)


def shortcut_pairs() -> pd.DataFrame:
    """120 pairs whose chosen response is the longer one when a human wrote it (70%) and the
    shorter one when bart did: RMs that follow length get TG high for human, low for bart."""
    pairs = length_pairs(120, 24)
    bart = np.arange(len(pairs)) % 10 < 3
    pairs.loc[bart, ["chosen", "rejected"]] = pairs.loc[bart, ["rejected", "chosen"]].to_numpy()
    pairs["chosen_model"] = np.where(bart, "bart", "human")
    pairs["rejected_model"] = np.where(bart, "human", "bart")
    return pairs


@pytest.fixture(scope="module")
def memorized(tiny_encoder_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("memorize")
    data = root / "pairs.jsonl"
    shortcut_pairs().to_json(data, orient="records", lines=True)
    out = root / "audit"
    result = run_cli(["memorize", "--data", data, "--out", out, "--model", tiny_encoder_dir,
                      "--runs", "6", "--folds", "3", "--no-report", "--quiet"],
                     {"RMLENS_CACHE": str(root / "cache"), "COLUMNS": "100"})  # fmt: skip
    assert result.exit_code == 0, result.output
    return out, result


def test_memorize_names_the_strongest_single_shortcut(memorized):
    _, result = memorized
    text = flat(result.stdout)
    found = re.search(r"Held-out accuracy rests on chosen_model: TG (\d\.\d\d) for human "
                      r"\(84 pairs\) vs (\d\.\d\d) for bart \(36 pairs\); chosen_model alone "
                      r"explains (\d+)% of TG's variance across pairs", text)  # fmt: skip
    assert found, result.stdout
    from rmlens.memorization._quality import SHORTCUT_R2

    high, low, share = float(found[1]), float(found[2]), int(found[3])
    assert high > 0.5 > low and share >= 100 * SHORTCUT_R2
    assert sum("rests on" in line for line in result.stdout.splitlines()) == 1  # one line


def test_no_shortcut_below_the_threshold_nor_from_the_grouping_column():
    from rmlens.memorization._quality import SHORTCUT_R2, strongest_shortcut

    rng = np.random.default_rng(0)
    n = 400
    system = np.where(np.arange(n) % 2, "a", "b")
    tg = rng.uniform(0.2, 0.9, n) + np.where(system == "a", 0.03, 0.0)  # a faint lean
    users = np.where(np.arange(n) % 4 < 2, "u0", "u1")
    table = pd.DataFrame({"id": [f"p{i}" for i in range(n)], "tg": tg, "chosen_model": system,
                          "user_id": users, "margin": rng.normal(size=n)})  # fmt: skip
    assert strongest_shortcut(table, "user_id") is None
    table["tg"] = np.where(users == "u0", 0.9, 0.4) + rng.normal(0, 0.05, n)
    assert strongest_shortcut(table, "user_id") is None  # the groups' own TG: not a shortcut
    found = strongest_shortcut(table, None)
    assert found["column"] == "user_id" and found["r2"] >= SHORTCUT_R2
    assert found["high"][0] == "u0" and found["low"][0] == "u1"


@pytest.mark.parametrize(("need", "cap"), [(400, " --max-runs 400"), (30, "")])
def test_memorize_names_the_flag_that_reaches_reliability(memorized, tmp_path, need, cap,
                                                          capsys):  # fmt: skip
    from rmlens.cli.memorize import print_summary

    source, _ = memorized
    out = tmp_path / "audit"
    out.mkdir()
    for name in ("config.json", "memorization.parquet", "plan.parquet"):
        (out / name).write_bytes((source / name).read_bytes())
    summary = json.loads((source / "summary.json").read_text())
    summary["reliability"]["cm"]["runs_for_0_8"] = need  # CM short of 0.8 at 6 runs
    summary.pop("target_reliability", None)
    (out / "summary.json").write_text(json.dumps(summary))
    print_summary(out)
    text = flat(capsys.readouterr().out)
    assert (f"CM's ranking would reach reliability 0.8 at about {need} runs (now 6): start the "
            f"same command again with --target-reliability 0.8{cap} (it keeps the finished "
            f"runs and adds whole repeats), or use --runs {need} with a new --out") in text
    summary["target_reliability"] = {"message": "target reliability 0.8 not reached yet"}
    (out / "summary.json").write_text(json.dumps(summary))
    print_summary(out)  # an audit with a target: its own line says how it stands
    assert "CM's ranking would reach" not in capsys.readouterr().out
