"""``--dedupe``: one copy of each repeated pair, or the groups that share a response joined,
so that TG is not optimistic; the data layer's functions on tiny hand-checked tables, the
audit's record and warnings, the command line end to end, and the map's ``conflict``."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from conftest import run_cli
from rmlens.data import dedupe_pairs, first_copies, join_groups
from rmlens.data._summary import duplicates_across_groups
from rmlens.memorization import AuditConfig
from rmlens.memorization._quality import duplicates_warnings


def table(rows, columns=("prompt", "chosen", "rejected", "user_id")) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(columns))
    frame.insert(0, "id", [f"r{i}" for i in range(len(frame))])
    return frame


# --- the data layer, by hand -------------------------------------------------------------


def test_a_repeated_pair_in_two_groups_drops_one_row():
    pairs = table([("q", "a", "b", "u1"), ("q", "a", "b", "u2"), ("q", "c", "d", "u2")])
    assert first_copies(pairs).tolist() == [True, False, True]
    kept, groups, record = dedupe_pairs(pairs, pairs.user_id, "pairs", group_by="user_id")
    assert kept.tolist() == [True, False, True]
    assert groups.tolist() == ["u1", "u2", "u2"], "pairs: the groups are left as they are"
    assert record["pairs_before"] == 3 and record["pairs_after"] == 2
    assert record["pairs_dropped"] == {"count": 1, "ids": ["r1"]}
    assert record["groups_before"] == record["groups_after"] == 2
    assert "1 of 3 pairs dropped" in record["note"]
    json.dumps(record)


def test_a_swapped_pair_is_kept():
    """The same two responses judged the other way are another pair: the disagreement."""
    pairs = table([("q", "a", "b", "u1"), ("q", "b", "a", "u2"), ("q", "a", "b", "u3")])
    kept, _, record = dedupe_pairs(pairs, pairs.user_id, "pairs")
    assert kept.tolist() == [True, True, False]
    assert record["pairs_dropped"]["ids"] == ["r2"]
    assert "pairs judged the other way kept" in record["note"]
    _, conflict = duplicates_across_groups(pairs[kept], pairs.user_id[kept])
    assert conflict.tolist() == [True, True], "the conflict survives the dedupe"


def test_a_pair_repeated_within_one_group_counts_too():
    pairs = table([("q", "a", "b", "u1"), ("q", "a", "b", "u1")])
    assert first_copies(pairs).tolist() == [True, False]


def test_chat_messages_compare_as_text():
    msg = [{"role": "user", "content": "q"}]
    pairs = table([(msg, "a", "b", "u1"), ([dict(m) for m in msg], "a", "b", "u2")])
    assert first_copies(pairs).tolist() == [True, False]


def test_two_groups_sharing_a_text_join_into_one():
    pairs = table([("q", "a", "b", "u1"), ("q", "a", "c", "u2"), ("r", "d", "e", "u3")])
    assert join_groups(pairs, pairs.user_id).tolist() == ["u1+u2", "u1+u2", "u3"]
    kept, groups, record = dedupe_pairs(pairs, pairs.user_id, "texts", group_by="user_id")
    assert kept.all(), "texts: every pair is kept"
    assert record["groups_before"] == 3 and record["groups_after"] == 2
    assert record["pairs_dropped"] == {"count": 0, "ids": []}
    assert record["joined"] == {"groups": 1, "largest": {"groups": 2, "pairs": 2}}
    assert "3 groups became 2" in record["note"]


def test_a_text_is_a_response_with_its_prompt():
    """The same response under another prompt is another text: no join."""
    pairs = table([("q", "a", "b", "u1"), ("r", "a", "c", "u2")])
    assert join_groups(pairs, pairs.user_id).tolist() == ["u1", "u2"]


def test_joins_are_transitive_and_use_either_side():
    """u1 and u2 share "b" (rejected in one, chosen in the other), u2 and u3 share "d":
    all three become one group, named by its members; u4 shares nothing."""
    pairs = table([("q", "a", "b", "u1"), ("q", "b", "d", "u2"), ("q", "e", "d", "u3"),
                   ("q", "f", "g", "u4")])  # fmt: skip
    assert join_groups(pairs, pairs.user_id).tolist() == ["u1+u2+u3"] * 3 + ["u4"]
    many = table([("q", "a", f"x{i}", f"u{i}") for i in range(5)])
    assert set(join_groups(many, many.user_id)) == {"u0+4 more"}


def test_none_changes_nothing_and_ids_are_capped():
    pairs = table([("q", "a", "b", f"u{i % 2}") for i in range(150)])
    kept, groups, record = dedupe_pairs(pairs, pairs.user_id, "none")
    assert kept.all() and groups.tolist() == pairs.user_id.tolist()
    assert record["note"] == "the pairs and groups as given"
    _, _, record = dedupe_pairs(pairs, pairs.user_id, "pairs")
    assert record["pairs_dropped"]["count"] == 149
    assert record["pairs_dropped"]["ids"] == [f"r{i}" for i in range(1, 101)]
    with pytest.raises(ValueError, match="'how' parameter of dedupe_pairs must be one of"):
        dedupe_pairs(pairs, pairs.user_id, "rows")


def test_the_config_takes_the_three_choices():
    assert AuditConfig().dedupe == "none"
    for how in ("none", "pairs", "texts"):
        AuditConfig(dedupe=how).check()
    with pytest.raises(ValueError, match="'dedupe' parameter of AuditConfig must be one of"):
        AuditConfig(dedupe="yes").check()


def test_the_warnings_name_the_fix():
    pairs = table([("q", "a", "b", "u1"), ("q", "a", "b", "u2"), ("q", "b", "a", "u3")])
    record, _ = duplicates_across_groups(pairs, pairs.user_id, group_by="user_id")
    found = {w["code"]: w["message"] for w in duplicates_warnings(record, None)}
    assert "`dedupe` pairs keeps one copy" in found["duplicates_across_groups"]
    assert "`dedupe` texts joins the groups" in found["duplicates_across_groups"]
    assert "`dedupe` pairs keeps them" in found["conflicts_across_groups"]
    after = duplicates_warnings(record, None, dedupe="pairs")
    assert "kept by `dedupe` pairs" in after[-1]["message"]


# --- the audit and the command line ------------------------------------------------------


def shared_pairs() -> pd.DataFrame:
    """36 pairs of 6 users, each user with their own prompts; then 4 copies of u0's pairs
    under u1 and 2 of u2's pairs judged the other way under u3."""
    good = ["good", "great", "best", "love", "yes", "certainly"]
    bad = ["bad", "worst", "hate", "never", "no", "nope"]
    rng = np.random.default_rng(0)
    rows = [
        {"id": f"p{i:02d}", "prompt": f"what is the {['cat', 'dog', 'sun'][i % 3]} {i} ?",
         "chosen": " ".join(rng.choice(good, 4)), "rejected": " ".join(rng.choice(bad, 4)),
         "user_id": f"u{i % 6}"}
        for i in range(36)
    ]  # fmt: skip
    copies = [{**rows[i], "id": f"copy{i}", "user_id": "u1"} for i in (0, 6, 12, 18)]
    swaps = [{**rows[i], "id": f"swap{i}", "user_id": "u3", "chosen": rows[i]["rejected"],
              "rejected": rows[i]["chosen"]} for i in (2, 8)]  # fmt: skip
    return pd.DataFrame(rows + copies + swaps)


def memorize(tmp_path, model, data, out, *extra):
    return run_cli(["memorize", "--data", data, "--out", out, "--model", model, "--runs", "5",
                    "--n-boot", "20", "--no-report", *extra],
                   env={"RMLENS_CACHE": str(tmp_path / "cache")})  # fmt: skip


@pytest.fixture(scope="module")
def audits(tiny_encoder_dir, tmp_path_factory):
    """The same data audited with --dedupe pairs and --dedupe texts (and as given)."""
    root = tmp_path_factory.mktemp("dedupe")
    data = root / "pairs.jsonl"
    shared_pairs().to_json(data, orient="records", lines=True)
    found = {}
    for how in ("none", "pairs", "texts"):
        result = memorize(root, tiny_encoder_dir, data, root / how, "--dedupe", how)
        assert result.exit_code == 0, result.output
        found[how] = (root / how, result)
    return found


def read(out, name="summary.json"):
    return json.loads((out / name).read_text())


def test_cli_dedupe_pairs_end_to_end(audits):
    out, result = audits["pairs"]
    summary = read(out)
    dedupe = summary["dedupe"]
    assert dedupe["how"] == "pairs" and dedupe["group_by"] == "user_id"
    assert dedupe["pairs_before"] == 42 and dedupe["pairs_after"] == 38
    assert dedupe["pairs_dropped"] == {"count": 4, "ids": ["copy0", "copy6", "copy12",
                                                           "copy18"]}  # fmt: skip
    assert dedupe["groups_before"] == dedupe["groups_after"] == 6
    mem = pd.read_parquet(out / "memorization.parquet")
    assert len(mem) == 38 and not mem.id.str.startswith("copy").any()
    assert summary["n_pairs"] == 38
    dup = summary["duplicates"]  # counted on the pairs audited
    assert dup["pairs_repeated_across_groups"] == 0 and dup["repeated_pairs"] == 0
    assert dup["conflicts_across_groups"] == 4, "pairs judged the other way are kept"
    assert int(mem.conflict.sum()) == 4
    codes = {w["code"] for w in summary["warnings"]}
    assert "duplicates_across_groups" not in codes and "conflicts_across_groups" in codes
    assert "Dedupe (--dedupe pairs): kept the first row of each repeated pair" in result.stdout
    assert "4 of 42 pairs dropped" in result.stdout
    config = read(out, "config.json")
    assert config["audit"]["dedupe"] == "pairs" and config["n_pairs"] == 42
    assert "`dedupe` pairs: 4 repeated pairs dropped" in config["group_note"]


def test_cli_dedupe_texts_end_to_end(audits):
    out, result = audits["texts"]
    summary = read(out)
    dedupe = summary["dedupe"]
    assert dedupe["how"] == "texts" and dedupe["pairs_dropped"]["count"] == 0
    assert dedupe["groups_before"] == 6 and dedupe["groups_after"] == 4  # u0+u1, u2+u3
    assert dedupe["joined"] == {"groups": 2, "largest": {"groups": 2, "pairs": 16}}
    mem = pd.read_parquet(out / "memorization.parquet")
    assert len(mem) == 42
    assert set(mem.group) == {"u0+u1", "u2+u3", "u4", "u5"}
    assert set(mem.group[mem.user_id == "u1"]) == {"u0+u1"}
    plan = pd.read_parquet(out / "plan.parquet")
    assert set(plan.group) == {"u0+u1", "u2+u3", "u4", "u5"}
    dup = summary["duplicates"]  # no text is under two groups any more
    assert dup["groups"] == 4 and dup["texts"]["in_several_groups"] == 0
    assert dup["pairs_repeated_across_groups"] == dup["conflicts_across_groups"] == 0
    codes = {w["code"] for w in summary["warnings"]}
    assert not codes & {"duplicates_across_groups", "conflicts_across_groups"}
    assert "Dedupe (--dedupe texts): joined the groups ('user_id')" in result.stdout
    assert "6 groups became 4" in result.stdout


def test_cli_without_dedupe_warns_and_names_the_fix(audits):
    out, result = audits["none"]
    summary = read(out)
    assert summary["dedupe"]["how"] == "none" and summary["n_pairs"] == 42
    assert summary["duplicates"]["pairs_repeated_across_groups"] == 8
    assert "Dedupe" not in result.stdout
    assert "--dedupe pairs keeps one copy of each pair" in result.stderr
    assert "--dedupe texts joins the groups that share a response" in result.stderr


def test_resuming_with_another_dedupe_is_refused(audits, tiny_encoder_dir, tmp_path):
    out, _ = audits["pairs"]
    data = out.parent / "pairs.jsonl"
    again = memorize(out.parent, tiny_encoder_dir, data, out, "--dedupe", "pairs")
    assert again.exit_code == 0, again.output
    other = memorize(out.parent, tiny_encoder_dir, data, out, "--dedupe", "texts")
    assert other.exit_code == 2 and "dedupe" in other.stderr
    assert "other data" not in other.stderr, "the data are the same; the setting differs"


def test_too_few_groups_left_is_one_clear_error(tiny_encoder_dir, tmp_path):
    """Every user answered the same prompt with a shared response: --dedupe texts joins
    them all into one group, which no plan can hold out."""
    pairs = table([("q", "good answer", f"bad {w}", f"u{i}")
                   for i, w in enumerate(["cat", "dog", "sun", "moon"])])  # fmt: skip
    data = tmp_path / "pairs.jsonl"
    pairs.to_json(data, orient="records", lines=True)
    result = memorize(tmp_path, tiny_encoder_dir, data, tmp_path / "o", "--dedupe", "texts")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: --dedupe texts joined the 4 groups ('user_id') "
                                    "into 1")  # fmt: skip
    assert "1 group remains, and a plan needs at least 2" in result.stderr
    assert "--dedupe pairs" in result.stderr and "--group-by a column" in result.stderr
    assert not (tmp_path / "o" / "config.json").exists()


def test_bias_rows_follow_the_pairs_kept(tiny_encoder_dir, tmp_path):
    """The poe objective's bias features, one row per given pair (as ``rmlens mitigate``
    builds them, in the trainer and in ``bias``), lose the rows ``dedupe`` pairs drops."""
    from rmlens.attribution._bias import objective_bias
    from rmlens.memorization import audit
    from rmlens.rewards import FrozenHeadTrainer, HeadConfig

    pairs = shared_pairs()
    config = AuditConfig(runs=5, n_boot=0, dedupe="pairs", head=HeadConfig(objective="poe"))
    with pytest.warns(Warning):
        bias = objective_bias(pairs, config.head)
    assert len(bias) == 42
    trainer = FrozenHeadTrainer(config.head, model=str(tiny_encoder_dir),
                                cache_dir=tmp_path / "cache", bias=bias)  # fmt: skip
    with pytest.warns(Warning):
        table = audit(pairs, config, out=tmp_path / "o", trainer=trainer, bias=bias, quiet=True)
    assert len(table) == 38 and len(trainer.bias) == 38
    assert trainer.bias.equals(bias[~pairs.id.str.startswith("copy")].reset_index(drop=True))


def test_mitigate_takes_dedupe(monkeypatch, tmp_path):
    """mitigate audits every objective through ``audit``, with the shared config."""
    import rmlens.comparison._mitigate as mitigate_module

    seen = []
    monkeypatch.setattr(
        mitigate_module, "audit", lambda pairs, config, **kw: seen.append(config.dedupe)
    )
    monkeypatch.setattr(mitigate_module, "compare", lambda *a, **k: None)
    mitigate_module.mitigate(shared_pairs(), AuditConfig(dedupe="texts"), out=tmp_path,
                             objectives=("bt",), quiet=True)  # fmt: skip
    assert seen == ["texts"]


# --- the map: coloured by conflict, and said in the hover and details ----------------------


def test_report_map_offers_conflict_right_after_the_scores(audits):
    from rmlens.report import write_report
    from rmlens.report._map import color_options, pair_records

    out, _ = audits["pairs"]
    page = write_report(out).read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="rmlens-data">(.*?)</script>',
                      page, re.S)  # fmt: skip
    data = json.loads(found.group(1))
    names = [c["name"] for c in data["map"]["colors"]]
    assert names[:4] == ["cm", "tm", "tg", "conflict"]
    option = data["map"]["colors"][3]
    assert option["kind"] == "categorical"
    assert option["categories"] == ["judged the other way", "no"]
    points = data["map"]["points"]
    assert sum(points["conflict"]) == 4
    assert points["meta_columns"][0] == "conflict"
    assert "judged the other way" in points["meta"][0]
    assert "another group judged it the other way" in page  # the hover's words (report.js)

    mem = pd.read_parquet(out / "memorization.parquet").assign(conflict=False)
    rows = np.arange(len(mem))
    assert "conflict" not in [c["name"] for c in color_options(mem, rows)], "nothing to show"
    assert pair_records(mem, rows, text_cap=50)["conflict"] == [False] * len(mem)
