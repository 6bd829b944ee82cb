"""Issue 31, items 2 and 6: tables that agree with their categories; duplicates and
conflicts across groups counted by ``data inspect`` and by every audit."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from conftest import run_cli, shared_file
from rmlens.cli.memorize import print_most_memorized
from rmlens.data import inspect_pairs, summarize
from rmlens.data._summary import duplicates_across_groups
from rmlens.memorization import AuditConfig, audit
from rmlens.memorization._summary import categorize, summarize_audit
from rmlens.report._sections import pair_table_section
from rmlens.rewards import FrozenHeadTrainer, HeadConfig


def mem_table() -> pd.DataFrame:
    """12 pairs: the 4 highest CM have TM < 0.5 (not_learned), 3 are memorized."""
    tm = [0.45, 0.40, 0.48, 0.30, 0.95, 0.90, 0.85, 0.90, 0.80, 0.70, 0.60, np.nan]
    tg = [0.05, 0.02, 0.10, 0.00, 0.70, 0.70, 0.70, 0.85, 0.78, 0.68, 0.58, np.nan]
    table = pd.DataFrame({"id": [f"p{i:02d}" for i in range(12)], "tm": tm, "tg": tg})
    table["cm"] = table.tm - table.tg
    table["n_in"], table["n_out"] = 20, 5
    table["cm_lo"], table["cm_hi"] = table.cm - 0.05, table.cm + 0.05
    table["group"] = [f"u{i % 3}" for i in range(12)]
    table["conflict"] = [False] * 5 + [True] + [False] * 6
    table["category"] = categorize(table, cm_threshold=0.1)
    return table


# --- item 2: tables agree with their categories ------------------------------------------


def test_most_memorized_ranks_memorized_pairs_only():
    table = mem_table()
    top_cm = table.sort_values("cm", ascending=False).id.head(4).tolist()
    assert (table.set_index("id").loc[top_cm, "tm"] < 0.5).all()
    summary = summarize_audit(table, cm_threshold=0.1, top=5)
    ids = [row["id"] for row in summary["most_memorized"]]
    assert ids == ["p04", "p05", "p06"], "memorized pairs only, highest CM first"
    assert not set(ids) & set(top_cm)
    assert all(row["category"] == "memorized" for row in summary["most_memorized"])
    note = "only 3 pairs are categorized memorized: all are listed"
    assert summary["most_memorized_note"] == note
    rest = summary["largest_cm_not_memorized"]
    assert [row["id"] for row in rest][:4] == top_cm
    assert {row["category"] for row in rest[:4]} == {"not_learned"}
    assert summary["memorized_conflicts"]["count"] == 1
    assert summary["memorized_conflicts"]["memorized"] == 3
    assert summary["memorized_conflicts"]["share"] == pytest.approx(1 / 3)
    assert summary["most_memorized"][1]["conflict"] is True
    json.dumps(summary)  # JSON-ready (no numpy booleans)


def test_no_note_when_enough_pairs_are_memorized():
    summary = summarize_audit(mem_table(), cm_threshold=0.1, top=2)
    assert [row["id"] for row in summary["most_memorized"]] == ["p04", "p05"]
    assert "most_memorized_note" not in summary


def test_console_tables_follow_the_categories():
    table = mem_table()
    summary = summarize_audit(table, cm_threshold=0.1)
    summary["counts"] = table.category.value_counts().to_dict()
    out = io.StringIO()
    print_most_memorized(Console(file=out, width=160), summary)
    text = out.getvalue()
    head, tail = text.split("Largest CM among pairs not categorized memorized")
    assert "Most memorized pairs (category memorized, highest CM first)" in head
    text = " ".join(text.split())
    assert "only 3 pairs are categorized memorized" in head
    assert "conflict" in head and "yes" in head
    for pair in ("p00", "p01", "p02", "p03"):  # TM < 0.5: not learned
        assert pair not in head
    assert all(pair in tail for pair in ("p00", "p01", "p02"))  # the console shows 3
    assert "not learned" in tail
    assert "1 of 3 memorized pairs (33%) were judged the other way" in text


def test_report_table_follows_the_categories():
    table = mem_table().drop(columns="category")  # the report applies the default rules
    section = pair_table_section(table, {}, section_id="memorized", title="Most memorized pairs",
                                 by="cm", ascending=False, top_k=5, note="")  # fmt: skip
    head, tail = section.body.split("Largest CM among pairs not categorized memorized")
    for pair in ("p00", "p01", "p02", "p03"):
        assert f">{pair}<" not in head and f">{pair}<" in tail
    assert head.index(">p04<") < head.index(">p05<") < head.index(">p06<")
    assert "Only 3 pairs are categorized memorized" in head
    assert "<th>conflict</th>" in head and "1 of 3 memorized pairs are such conflicts" in head
    assert "not learned" in tail


# --- item 6: duplicates and conflicts across groups --------------------------------------


def small_pairs() -> pd.DataFrame:
    rows = [
        ("q1", "a", "b", "u1"),
        ("q1", "a", "b", "u2"),  # the same pair in another group
        ("q1", "b", "a", "u3"),  # judged the other way by a third group
        ("q2", "c", "d", "u1"),
        ("q2", "d", "c", "u1"),  # judged the other way in the same group
        ("q3", "a", "e", "u2"),  # "a" again, but under another prompt: another text
        ("q1", "a", "f", "u4"),  # (q1, "a") under a fourth group
    ]
    return pd.DataFrame(rows, columns=["prompt", "chosen", "rejected", "user_id"])


def test_duplicates_across_groups_counts():
    pairs = small_pairs()
    record, conflict = duplicates_across_groups(pairs, pairs.user_id, group_by="user_id")
    assert record["groups"] == 4
    assert record["texts"] == {"responses": 14, "unique": 7, "in_several_groups": 2}
    assert record["pairs_sharing_text_across_groups"] == 4  # rows 0, 1, 2 and 6
    assert record["unique_pairs"] == 6 and record["repeated_pairs"] == 1
    assert record["pairs_repeated_across_groups"] == 2
    assert record["conflicting_pairs"] == 5  # rows 0, 1, 2, 3, 4
    assert record["conflicts_across_groups"] == 3  # rows 0, 1, 2: not u1's own swap
    assert conflict.tolist() == [True, True, True, False, False, False, False]


def test_inspect_never_says_no_problems_while_it_lists_some(tmp_path):
    path = tmp_path / "prefs.jsonl"
    pairs = small_pairs().assign(id=[f"p{i}" for i in range(7)])
    pairs.loc[5, "rejected"] = "a"  # chosen == rejected
    pairs.to_json(path, orient="records", lines=True)
    result = run_cli(["data", "inspect", path])
    assert result.exit_code == 0, result.output
    assert "no problems found" not in result.stdout
    assert "1 of 7 pairs have chosen == rejected" in result.stdout
    assert "1 of 7 pairs repeat an earlier (prompt, chosen, rejected)" in result.stdout
    assert "2 pairs occur under more than one group ('user_id')" in result.stdout
    assert "TG is then optimistic" in result.stdout
    as_json = json.loads(run_cli(["data", "inspect", path, "--json"]).stdout)
    codes = {w["code"] for w in as_json["warnings"]}
    assert codes == {"identical_responses", "repeated_pairs", "duplicates_across_groups",
                     "conflicting_pairs"}  # fmt: skip
    assert as_json["summary"]["across_groups"]["conflicts_across_groups"] == 3
    # grouped by prompt, nothing repeats across groups
    by_prompt = json.loads(run_cli(["data", "inspect", path, "--json", "--group-by",
                                    "prompt"]).stdout)  # fmt: skip
    assert by_prompt["summary"]["across_groups"]["pairs_repeated_across_groups"] == 0
    assert run_cli(["data", "inspect", path, "--group-by", "nope"]).exit_code == 2


def test_inspect_clean_data_says_no_problems(tmp_path):
    path = tmp_path / "clean.jsonl"
    rows = [{"prompt": "a", "chosen": "b", "rejected": "c", "user_id": "u"},
            {"prompt": "d", "chosen": "e", "rejected": "f", "user_id": "v"}]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = run_cli(["data", "inspect", path])
    assert result.exit_code == 0 and "no problems found" in result.stdout
    assert "warning" not in result.stdout


def test_squality_duplicates_and_conflicts():
    path = shared_file("squality-human-eval-pairs.jsonl")
    result = inspect_pairs(path)
    s = result["summary"]
    assert s["pairs"] == 883 and s["users"] == 4
    across = s["across_groups"]
    assert across["group_by"] == "user_id" and across["groups"] == 4
    assert across["texts"] == {"responses": 1766, "unique": 300, "in_several_groups": 300}
    assert s["duplicates"]["pairs"] == across["repeated_pairs"] == 532
    assert across["unique_pairs"] == 351
    assert across["pairs_repeated_across_groups"] == 827
    assert across["conflicting_pairs"] == across["conflicts_across_groups"] == 149
    codes = [w["code"] for w in result["warnings"]]
    assert codes == ["repeated_pairs", "duplicates_across_groups", "conflicting_pairs"]
    shown = run_cli(["data", "inspect", path])
    assert "no problems found" not in shown.stdout and "3 warnings" in shown.stdout


def test_hh_empty_responses_are_a_warning():
    path = shared_file("hh-rlhf-harmless-base-test.jsonl.gz")
    result = inspect_pairs(path)
    assert result["summary"]["across_groups"]["group_by"] == "prompt"
    warnings = {w["code"]: w for w in result["warnings"]}
    assert warnings["empty_responses"]["pairs"] == result["summary"]["empty_responses"] > 0
    assert "no problems found" not in run_cli(["data", "inspect", path]).stdout


def audit_pairs() -> pd.DataFrame:
    """60 pairs of 6 users; 8 copied into another user's group, 6 swapped into another's."""
    rng = np.random.default_rng(0)
    good = ["good", "great", "best", "love", "yes", "certainly"]
    bad = ["bad", "worst", "hate", "never", "no", "nope"]
    rows = [
        {"id": f"p{i:03d}", "prompt": f"what is the {rng.choice(['cat', 'dog', 'sun'])} ?",
         "chosen": " ".join(rng.choice(good, 4)) + f" {i % 7}",
         "rejected": " ".join(rng.choice(bad, 4)) + f" {i % 5}", "user_id": f"u{i % 6}"}
        for i in range(60)
    ]  # fmt: skip
    for i in range(8):
        rows.append({**rows[i], "id": f"copy{i}", "user_id": f"u{(i + 1) % 6}"})
    for i in range(10, 16):
        swap = {"chosen": rows[i]["rejected"], "rejected": rows[i]["chosen"]}
        rows.append({**rows[i], **swap, "id": f"swap{i}", "user_id": f"u{(i + 2) % 6}"})
    return pd.DataFrame(rows)


def test_audit_counts_duplicates_and_marks_conflicts(tiny_encoder_dir, tmp_path):
    pairs = audit_pairs()
    config = AuditConfig(runs=5, folds=5, n_boot=20, head=HeadConfig(epochs=3, batch_size=16))
    trainer = FrozenHeadTrainer(model=str(tiny_encoder_dir), cache_dir=tmp_path / "cache")
    out = tmp_path / "exp"
    with pytest.warns(Warning):
        audit(pairs, config, out=out, trainer=trainer, quiet=True)
    summary = json.loads((out / "summary.json").read_text())
    dup = summary["duplicates"]
    assert dup["group_by"] == "user_id" and dup["groups"] == 6
    assert dup["pairs_repeated_across_groups"] == 16 and dup["repeated_pairs"] == 8
    assert dup["conflicts_across_groups"] == dup["conflicting_pairs"] == 12
    warnings = {w["code"]: w["message"] for w in summary["warnings"]}
    assert "TG is optimistic" in warnings["duplicates_across_groups"]
    assert "another group's copy" in warnings["duplicates_across_groups"]
    assert "disagreement between groups" in warnings["conflicts_across_groups"]
    mem = pd.read_parquet(out / "memorization.parquet")
    assert mem.conflict.dtype == bool and int(mem.conflict.sum()) == 12
    swapped = {f"p{i:03d}" for i in range(10, 16)} | {f"swap{i}" for i in range(10, 16)}
    assert set(mem.id[mem.conflict]) == swapped
    memorized = mem.category == "memorized"
    conflicts = summary["memorized_conflicts"]
    assert conflicts["memorized"] == int(memorized.sum())
    assert conflicts["count"] == int((memorized & mem.conflict).sum())
    ranked = summary["most_memorized"]
    assert all(row["category"] == "memorized" for row in ranked)
    assert [row["cm"] for row in ranked] == sorted((row["cm"] for row in ranked), reverse=True)
    assert all(row["category"] != "memorized" for row in summary["largest_cm_not_memorized"])


def test_summarize_keeps_its_duplicates_record():
    table = pd.DataFrame({"id": ["a", "a", "b"], "prompt": ["p", "p", "q"],
                          "chosen": ["x", "x", "z"], "rejected": ["y", "y", "w"]})  # fmt: skip
    s = summarize(table)
    assert s["duplicates"] == {"ids": 1, "pairs": 1}
    assert s["across_groups"]["group_by"] == "prompt"
    assert s["across_groups"]["pairs_repeated_across_groups"] == 0


def test_report_summary_shows_duplicates_as_a_table():
    from rmlens.report._sections import summary_section

    table = mem_table()
    summary = summarize_audit(table, cm_threshold=0.1)
    record, _ = duplicates_across_groups(small_pairs(), small_pairs().user_id, group_by="user_id")
    summary["duplicates"] = record
    body = summary_section(table, None, None, summary).body
    assert "Duplicates and conflicts across groups (user_id, 4 groups)" in body
    assert "pairs repeated across groups" in body and "TG is optimistic" in body
    assert "1 of 3 memorized pairs (33%) were judged the other way" in body
    for key in ("largest_cm_not_memorized", "memorized_conflicts", "most_memorized_note",
                "duplicates."):  # fmt: skip
        assert key not in body, f"raw key {key} in the report"


def test_weak_rms_are_named():
    """Issue 31, item 5: a rule that catches a 0.585 RM with 30% of pairs not learned, and
    an RM that barely beats picking the longer response; a clear RM passes."""
    from rmlens.memorization._quality import audit_warnings, weak_rm_warning

    n = 100
    long, short = "a b c d e f", "a b"
    table = pd.DataFrame({
        "tm": np.r_[np.full(30, 0.4), np.full(70, 0.8)],  # 30% not learned
        "chosen": [long if i % 2 else short for i in range(n)],  # length: chance, 0.5
        "rejected": [short if i % 2 else long for i in range(n)],
    })  # fmt: skip
    weak = weak_rm_warning(table, 0.585)
    assert weak["code"] == "weak_rm" and weak["not_learned_share"] == pytest.approx(0.3)
    assert "below 0.6" in weak["message"] and "30% of pairs are not learned" in weak["message"]
    assert weak["length_rule_accuracy"] == pytest.approx(0.5)
    lengthy = table.assign(tm=0.8, chosen=long, rejected=short)  # length decides every pair
    near = weak_rm_warning(lengthy, 0.95)["message"]
    assert "-0.050 from a rule that picks the longer response (1.000" in near
    assert "mostly length" in near
    assert weak_rm_warning(table.assign(tm=0.8), 0.9) is None
    quality = {"held_out": {"accuracy": {"mean": 0.52}}}  # chance: its own warning, not both
    codes = [w["code"] for w in audit_warnings(table, quality)]
    assert codes == ["barely_generalize"]
