"""Bad input: one clear message naming file, line or row, field, expected and found."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rmlens._errors import InputError
from rmlens.data import find_problems, load_pairs, load_rankings, validate_pairs

GOOD = {"prompt": "Hi?", "chosen": "Hello!", "rejected": "Go away."}


def jsonl(path: Path, lines: list) -> Path:
    """Write JSON lines; str items are written verbatim (for invalid JSON and blank lines)."""
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def error(source, **kwargs) -> str:
    with pytest.raises(InputError) as info:
        load_pairs(source, **kwargs)
    return str(info.value)


@pytest.mark.parametrize(
    ("bad", "field", "found"),
    [
        ({"chosen": None}, "'chosen'", "must be a non-empty string or a list of chat messages, "
                                      "got null"),
        ({"chosen": ""}, "'chosen'", "must be a non-empty string, got an empty string"),
        ({"rejected": "   "}, "'rejected'", "must be a non-empty string, got whitespace only"),
        ({"rejected": 42}, "'rejected'", "got the number 42"),
        ({"chosen": {"text": "hi"}}, "'chosen'", "got an object with keys 'text'"),
        ({"prompt": ["a", "b"]}, "'prompt'", "message 1 is 'a'"),
        ({"chosen": [{"role": "assistant"}]}, "'chosen'", "message 1 needs a string 'content'"),
        ({"margin": float("nan")}, "'margin'", "must be a number >= 0, got NaN"),
        ({"margin": -1.5}, "'margin'", "must be a number >= 0, got the number -1.5"),
        ({"margin": "high"}, "'margin'", "must be a number >= 0, got 'high'"),
        ({"margin": None}, "'margin'", "must be a number >= 0, got null"),
        ({"user_id": {"name": "x"}}, "'user_id'", "must be a string or a number, got an object"),
    ],
)
def test_bad_value_names_file_line_field_and_found(tmp_path, bad, field, found):
    # blank line 2 and a good line 3 before the bad line 4: line numbers are physical lines
    path = jsonl(tmp_path / "prefs.jsonl", [dict(GOOD, margin=1), "", dict(GOOD, margin=2),
                                           {**GOOD, "margin": 3, **bad}])
    message = error(path)
    assert message.startswith(f"{path} line 4: {field} ")
    assert found in message


def test_missing_required_field(tmp_path):
    path = jsonl(tmp_path / "prefs.jsonl", [GOOD, {"prompt": "x", "chosen": "y"}])
    assert error(path) == f"{path} line 2: missing required field 'rejected'"


def test_mixed_string_and_message_responses(tmp_path):
    bad = dict(GOOD, chosen=[{"role": "assistant", "content": "Hello"}])
    path = jsonl(tmp_path / "prefs.jsonl", [bad])
    assert "'chosen' and 'rejected' must both be strings or both be message lists" in error(path)


def test_duplicate_id_names_both_lines(tmp_path):
    path = jsonl(tmp_path / "prefs.jsonl", [dict(GOOD, id="a"), dict(GOOD, id="b"),
                                           dict(GOOD, id="a")])
    assert error(path) == f"{path} line 3: duplicate id 'a', first used on line 1"


def test_numeric_and_string_ids_collide(tmp_path):
    path = jsonl(tmp_path / "prefs.jsonl", [dict(GOOD, id=7), dict(GOOD, id="7")])
    assert "line 2: duplicate id '7', first used on line 1" in error(path)


def test_missing_id_when_the_file_has_ids(tmp_path):
    path = jsonl(tmp_path / "prefs.jsonl", [dict(GOOD, id="a"), GOOD])
    assert error(path) == f"{path} line 2: missing required field 'id'"


def test_invalid_json_line(tmp_path):
    path = jsonl(tmp_path / "prefs.jsonl", [GOOD, GOOD, '{"prompt": "x", "chosen": '])
    message = error(path)
    assert message.startswith(f"{path} line 3: invalid JSON (")
    assert "column" in message


def test_json_line_that_is_not_an_object(tmp_path):
    path = jsonl(tmp_path / "prefs.jsonl", [GOOD, ["a", "b"]])
    assert error(path) == f"{path} line 2: expected a JSON object, got a list of 2 items"


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_jsonl_file(tmp_path, content):
    path = tmp_path / "prefs.jsonl"
    path.write_text(content)
    assert error(path) == f"{path}: empty file, no records found"


def test_empty_csv_json_and_parquet(tmp_path):
    csv = tmp_path / "p.csv"
    csv.write_text("prompt,chosen,rejected\n")
    assert "empty file" in error(csv)
    blank = tmp_path / "blank.csv"
    blank.write_text("")
    assert "empty file" in error(blank)
    js = tmp_path / "p.json"
    js.write_text("[]")
    assert "empty file" in error(js)
    pq = tmp_path / "p.parquet"
    pd.DataFrame({"prompt": pd.Series([], dtype=str)}).to_parquet(pq)
    assert "empty file" in error(pq)


def test_csv_rows_are_data_rows(tmp_path):
    path = tmp_path / "prefs.csv"
    path.write_text('prompt,chosen,rejected,margin\nHi,"Hello,\nthere",Bye,1\nHi,,Bye,2\n')
    assert error(path) == (
        f"{path} row 2: 'chosen' must be a non-empty string, got an empty string"
    )
    path.write_text("prompt,chosen,rejected,margin\nHi,Hello,Bye,1\nHi,Hello,Bye,\n")
    assert error(path) == f"{path} row 2: 'margin' must be a number >= 0, got an empty string"
    path.write_text("prompt,chosen,rejected,margin\nHi,Hello,Bye,1\nHi,Hello,Bye,lots\n")
    assert error(path) == f"{path} row 2: 'margin' must be a number >= 0, got 'lots'"


def test_parquet_rows(tmp_path):
    path = tmp_path / "prefs.parquet"
    pd.DataFrame({"prompt": ["a", "b", "c"], "chosen": ["x", "y", "z"],
                  "rejected": ["q", None, "r"]}).to_parquet(path)
    assert error(path) == (
        f"{path} row 2: 'rejected' must be a non-empty string or a list of chat messages, "
        "got null"
    )


def test_column_map_is_named_in_messages(tmp_path):
    path = jsonl(tmp_path / "prefs.jsonl", [{"q": "x", "chosen": "a", "rejected": "b"},
                                           {"q": "", "chosen": "a", "rejected": "b"}])
    assert error(path, column_map={"prompt": "q"}) == (
        f"{path} line 2: 'prompt' (field 'q') must be a non-empty string, got an empty string"
    )


def test_unknown_layout_lists_the_fields(tmp_path):
    path = jsonl(tmp_path / "prefs.jsonl", [{"question": "x", "good": "a", "bad": "b"}])
    message = error(path)
    assert message.startswith(f"{path}: cannot tell the layout")
    assert "fields: question, good, bad" in message and "--map" in message
    only = jsonl(tmp_path / "half.jsonl", [{"prompt": "x", "chosen": "a"}])
    assert "'chosen' without its counterpart" in error(only)


def test_implicit_without_shared_assistant_turn(tmp_path):
    path = jsonl(tmp_path / "hh.jsonl", [{"chosen": "\n\nHuman: a", "rejected": "\n\nHuman: b"}])
    message = error(path)
    assert message.startswith(f"{path} line 1: cannot split off the prompt: 'chosen' and ")
    assert "share no '\\n\\nAssistant:' turn" in message


@pytest.mark.parametrize(
    ("row", "found"),
    [
        ({"responses": ["a"], "ranks": [1]}, "'responses' must be a list of at least 2"),
        ({"responses": ["a", "b"], "ranks": [1]}, "'ranks' must be a list of 2 numbers"),
        ({"responses": ["a", 3], "ranks": [1, 2]}, "'responses' item 2 must be"),
        ({"responses": ["a", "b"], "ranks": [1, 0]}, "'ranks' item 2 must be a number >= 1"),
        ({"responses": ["a", "b"], "scores": [1, "x"]}, "'scores' item 2 must be a number"),
        ({"responses": ["a", "b"], "ranks": [1, 2], "models": ["m"]}, "'models' must be a list"),
    ],
)
def test_bad_rankings(tmp_path, row, found):
    path = jsonl(tmp_path / "rank.jsonl", [{"prompt": "p", **row}])
    assert error(path).startswith(f"{path} line 1: {found}")
    with pytest.raises(InputError, match=found.replace("'", "'")[:20]):
        load_rankings(path)


def test_duplicate_ranking_ids(tmp_path):
    row = {"id": "r", "prompt": "p", "responses": ["a", "b"], "ranks": [1, 2]}
    path = jsonl(tmp_path / "rank.jsonl", [row, row])
    assert error(path) == f"{path} line 2: duplicate id 'r', first used on line 1"


def test_unknown_suffix_and_unreadable_parquet(tmp_path):
    txt = tmp_path / "prefs.txt"
    txt.write_text("hello")
    assert "unknown file type '.txt'" in error(txt)
    pq = tmp_path / "prefs.parquet"
    pq.write_text("not parquet")
    assert error(pq).startswith(f"{pq}: not a readable Parquet file")


def test_find_problems_collects_all_in_file_order(tmp_path):
    path = jsonl(tmp_path / "prefs.jsonl", [
        dict(GOOD, id="a", margin=1),
        dict(GOOD, id="b", margin=1, chosen=None),
        "{not json",
        dict(GOOD, id="a", margin=1),
        dict(GOOD, id="c", margin=-2, rejected=""),
        dict(GOOD, id="d"),
    ])
    problems = find_problems(path)
    assert [p.split(": ")[0] for p in problems] == [
        f"{path} line {n}" for n in (2, 3, 4, 5, 5, 6)
    ]
    assert problems[0].startswith(f"{path} line 2: 'chosen' must be")
    assert problems[1].startswith(f"{path} line 3: invalid JSON")
    assert problems[2] == f"{path} line 4: duplicate id 'a', first used on line 1"
    assert "'rejected' must be a non-empty string" in problems[3]
    assert problems[4] == f"{path} line 5: 'margin' must be a number >= 0, got the number -2"
    assert problems[5] == f"{path} line 6: missing required field 'margin'"
    assert find_problems(jsonl(tmp_path / "ok.jsonl", [GOOD])) == []


def test_find_problems_raises_when_nothing_can_be_read(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        find_problems(tmp_path / "missing.jsonl")


def test_validate_pairs_counts_rows_from_one():
    frame = pd.DataFrame([GOOD, dict(GOOD, chosen="  ")])
    with pytest.raises(InputError, match=r"^<table> row 2: 'chosen' must be a non-empty string"):
        validate_pairs(frame)
    with pytest.raises(InputError, match=r"^mine: missing required column\(s\) 'rejected'"):
        validate_pairs(frame.drop(columns="rejected"), source="mine")
    good = validate_pairs(pd.DataFrame([dict(GOOD, id=3, margin=1)]))
    assert good.loc[0, "id"] == "3" and good.loc[0, "margin"] == 1.0


def test_drop_invalid_leaves_out_failing_rows_counted(tmp_path):
    """A whitespace-only response (as HH has) and a bad margin are left out with one warning
    naming their lines, and recorded in the table's attrs; the same-text pair as always,
    recorded beside them."""
    path = jsonl(tmp_path / "prefs.jsonl", [
        dict(GOOD, margin=1), {**GOOD, "chosen": " ", "margin": 1}, dict(GOOD, margin=2),
        {**GOOD, "margin": "high"}, {**GOOD, "rejected": "Hello!", "margin": 1},
    ])  # fmt: skip
    assert "line 2: 'chosen' must be a non-empty string, got whitespace only" in error(path)
    with pytest.warns(Warning) as caught:
        pairs = load_pairs(path, drop_invalid=True)
    assert len(pairs) == 2 and list(pairs.margin) == [1.0, 2.0]
    said = [str(w.message) for w in caught]
    assert any("2 row(s) left out" in m and "line 2:" in m and "line 4:" in m for m in said)
    assert any("line 5" in m and "same text" in m for m in said)
    dropped = pairs.attrs["dropped"]
    assert dropped["n"] == 3 and dropped["first"][0].startswith(f"{path} line 2: 'chosen'")
    assert dropped["same_text"] == 1 and "line 5" in dropped["first"][2]
    assert "dropped" not in load_pairs(jsonl(tmp_path / "ok.jsonl", [GOOD])).attrs
