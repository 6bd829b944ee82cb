"""Loading every supported layout and format into the canonical pair table."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from rmlens._errors import InputError
from rmlens.cli._common import parse_column_map
from rmlens.data import load_pairs, load_rankings, save_pairs
from rmlens.data._layouts import split_messages, split_transcripts
from rmlens.data._schema import to_text

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
HH = SHARED / "hh-rlhf-harmless-base-test.jsonl.gz"
SQUALITY = SHARED / "squality-human-eval-pairs.jsonl"
A = "\n\nAssistant:"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


EXPLICIT = [
    {"prompt": "What is 2+2?", "chosen": "4.", "rejected": "5.", "annotator": "a1"},
    {"prompt": "Capital of France?", "chosen": "Paris.", "rejected": "Lyon.", "annotator": "a2"},
]


def test_explicit_layout_derives_stable_ids(tmp_path):
    pairs = load_pairs(write_jsonl(tmp_path / "p.jsonl", EXPLICIT))
    assert list(pairs.columns) == ["id", "prompt", "chosen", "rejected", "annotator"]
    expected = hashlib.sha1(b"What is 2+2?\x1f4.\x1f5.").hexdigest()[:16]
    assert pairs.loc[0, "id"] == expected
    assert pairs["id"].is_unique and pairs["id"].str.len().eq(16).all()
    again = load_pairs(write_jsonl(tmp_path / "q.jsonl", EXPLICIT))
    assert again["id"].tolist() == pairs["id"].tolist()


def test_numeric_ids_and_labels_become_strings(tmp_path):
    rows = [dict(r, id=i + 7, user_id=100 + i, margin=i + 1) for i, r in enumerate(EXPLICIT)]
    pairs = load_pairs(rows)
    assert pairs["id"].tolist() == ["7", "8"]
    assert pairs["user_id"].tolist() == ["100", "101"]
    assert pairs["margin"].tolist() == [1.0, 2.0] and pairs["margin"].dtype == "float64"
    assert list(pairs.columns[:5]) == ["id", "prompt", "chosen", "rejected", "user_id"]


def test_repeated_pair_without_ids_gets_distinct_ids():
    pairs = load_pairs([EXPLICIT[0], EXPLICIT[0], EXPLICIT[0]])
    base = pairs.loc[0, "id"]
    assert pairs["id"].tolist() == [base, f"{base}-2", f"{base}-3"]


def test_implicit_prompt_hh_style(tmp_path):
    rows = [
        {"chosen": "\n\nHuman: Hi there\n\nAssistant: Hello! How can I help?",
         "rejected": "\n\nHuman: Hi there\n\nAssistant: Go away."},
        {"chosen": "\n\nHuman: Name a fruit\n\nAssistant: Apple.\n\nHuman: Another?"
                   "\n\nAssistant: Banana.",
         "rejected": "\n\nHuman: Name a fruit\n\nAssistant: Apple.\n\nHuman: Another?"
                     "\n\nAssistant: Carrot."},
        {"chosen": "\n\nHuman: Help me\n\nAssistant: Sure, with what?\n\nHuman: Taxes"
                   "\n\nAssistant: Start by gathering receipts.",
         "rejected": "\n\nHuman: Help me\n\nAssistant: No."},
    ]
    pairs = load_pairs(write_jsonl(tmp_path / "hh.jsonl", rows))
    assert len(pairs) == 3
    assert pairs["prompt"].tolist() == [
        "\n\nHuman: Hi there" + A,
        "\n\nHuman: Name a fruit\n\nAssistant: Apple.\n\nHuman: Another?" + A,
        "\n\nHuman: Help me" + A,
    ]
    assert pairs["chosen"].tolist() == [
        "Hello! How can I help?",
        "Banana.",
        "Sure, with what?\n\nHuman: Taxes\n\nAssistant: Start by gathering receipts.",
    ]
    assert pairs["rejected"].tolist() == ["Go away.", "Carrot.", "No."]


def test_split_transcripts_backs_up_when_divergence_is_in_a_human_turn():
    chosen = "\n\nHuman: Q\n\nAssistant: ok\n\nHuman: more please\n\nAssistant: a"
    rejected = "\n\nHuman: Q\n\nAssistant: ok\n\nHuman: stop\n\nAssistant: b"
    prompt, c, r = split_transcripts(chosen, rejected)
    assert prompt == "\n\nHuman: Q" + A
    assert c.startswith("ok\n\nHuman: more") and r.startswith("ok\n\nHuman: stop")
    assert split_transcripts("\n\nHuman: a", "\n\nHuman: b") is None


def test_implicit_prompt_keeps_an_empty_response():
    pairs = load_pairs([{"chosen": "\n\nHuman: x\n\nAssistant: ", "rejected": "\n\nHuman: x"
                         "\n\nAssistant: y"}])
    assert (pairs.loc[0, "chosen"], pairs.loc[0, "rejected"]) == ("", "y")


def msg(role: str, content: str) -> dict:
    return {"role": role, "content": content}


def test_conversational_without_prompt(tmp_path):
    rows = [
        {"chosen": [msg("user", "Hi"), msg("assistant", "Hello!")],
         "rejected": [msg("user", "Hi"), msg("assistant", "What.")]},
        {"chosen": [msg("system", "Be kind."), msg("user", "Q1"), msg("assistant", "A1"),
                    msg("user", "Q2"), msg("assistant", "good")],
         "rejected": [msg("system", "Be kind."), msg("user", "Q1"), msg("assistant", "A1"),
                      msg("user", "Q2"), msg("assistant", "bad")]},
    ]
    pairs = load_pairs(write_jsonl(tmp_path / "chat.jsonl", rows))
    assert pairs.loc[0, "prompt"] == [msg("user", "Hi")]
    assert pairs.loc[0, "chosen"] == [msg("assistant", "Hello!")]
    assert pairs.loc[1, "prompt"] == rows[1]["chosen"][:4]
    assert pairs.loc[1, "rejected"] == [msg("assistant", "bad")]
    assert to_text(pairs.loc[1, "chosen"]) == "assistant: good"


def test_split_messages_backs_up_to_the_last_shared_assistant_turn():
    chosen = [msg("user", "Q"), msg("assistant", "A"), msg("user", "X"), msg("assistant", "1")]
    rejected = [msg("user", "Q"), msg("assistant", "A"), msg("user", "Y"), msg("assistant", "2")]
    prompt, c, r = split_messages(chosen, rejected)
    assert prompt == [msg("user", "Q")]
    assert c == chosen[1:] and r == rejected[1:]
    assert split_messages([msg("assistant", "a")], [msg("assistant", "b")]) is None


def test_conversational_with_prompt_and_repeated_prompt_stripped():
    rows = [
        {"prompt": [msg("user", "Hi")], "chosen": [msg("assistant", "Hello!")],
         "rejected": [msg("assistant", "Bye.")]},
        {"prompt": "Hi", "chosen": [msg("user", "Hi"), msg("assistant", "Hello!")],
         "rejected": [msg("user", "Hi"), msg("assistant", "Bye.")]},
    ]
    pairs = load_pairs(rows)
    assert pairs.loc[0, "chosen"] == [msg("assistant", "Hello!")]
    assert pairs.loc[1, "prompt"] == "Hi"
    assert pairs.loc[1, "chosen"] == [msg("assistant", "Hello!")]
    assert pairs.loc[1, "rejected"] == [msg("assistant", "Bye.")]


def test_explicit_transcript_prompt_repeated_in_responses_is_stripped():
    prompt = "\n\nHuman: Hi" + A
    row = {"prompt": prompt, "chosen": prompt + " Hello", "rejected": prompt + " No"}
    pairs = load_pairs([row])
    assert (pairs.loc[0, "chosen"], pairs.loc[0, "rejected"]) == ("Hello", "No")


def test_rankings_with_ranks(tmp_path):
    rows = [{"id": "r1", "prompt": "Pick", "responses": ["a", "b", "c"], "ranks": [2, 1, 2],
             "user_id": "u1"}]
    pairs = load_pairs(write_jsonl(tmp_path / "rank.jsonl", rows))
    assert pairs["id"].tolist() == ["r1:1>0", "r1:1>2"]
    assert pairs["chosen"].tolist() == ["b", "b"] and pairs["rejected"].tolist() == ["a", "c"]
    assert pairs["margin"].tolist() == [1.0, 1.0]
    assert pairs["ranking_id"].tolist() == ["r1", "r1"]
    assert pairs["user_id"].tolist() == ["u1", "u1"]


def test_rankings_with_scores_and_models():
    rows = [{"prompt": "Pick", "responses": ["a", "b", "c"], "scores": [0.5, 2.0, 1.0],
             "models": ["m0", "m1", "m2"]}]
    pairs = load_pairs(rows)
    rid = pairs.loc[0, "ranking_id"]
    assert pairs["id"].tolist() == [f"{rid}:1>0", f"{rid}:1>2", f"{rid}:2>0"]
    assert pairs["margin"].tolist() == [1.5, 1.0, 0.5]
    assert pairs["chosen_model"].tolist() == ["m1", "m1", "m2"]
    assert pairs["rejected_model"].tolist() == ["m0", "m2", "m0"]


def test_load_rankings_keeps_rankings_whole():
    rows = [
        {"id": 1, "prompt": "P", "responses": ["a", "b", "c"], "ranks": [3, 1, 2], "wave": 1},
        {"id": 2, "prompt": "Q", "responses": ["x", "y"], "scores": [1.0, 1.0], "wave": 2},
    ]
    table = load_rankings(rows)
    assert list(table.columns) == ["ranking_id", "prompt", "responses", "scores", "ranks", "wave"]
    assert table.loc[0, "scores"] == [1, 3, 2] and table.loc[0, "ranks"] == [3, 1, 2]
    assert table.loc[1, "ranks"] == [1, 1]
    assert load_pairs(rows)["ranking_id"].tolist() == ["1", "1", "1"]  # the tie gives no pair
    with pytest.raises(InputError, match="not a rankings file"):
        load_rankings([{"prompt": "p", "chosen": "a", "rejected": "b"}])


def test_column_map_renames_before_layout_detection(tmp_path):
    rows = [{"question": r["prompt"], "good": r["chosen"], "bad": r["rejected"],
             "annotator_id": f"w{i}"} for i, r in enumerate(EXPLICIT)]
    path = write_jsonl(tmp_path / "m.jsonl", rows)
    mapping = parse_column_map(["prompt=question", "chosen=good", "rejected=bad",
                                "user_id=annotator_id"])
    pairs = load_pairs(path, column_map=mapping)
    assert list(pairs.columns) == ["id", "prompt", "chosen", "rejected", "user_id"]
    assert pairs["user_id"].tolist() == ["w0", "w1"]
    with pytest.raises(InputError, match="no field 'annotator'"):
        load_pairs(path, column_map={"user_id": "annotator"})


def test_parse_column_map_rejects_bad_items():
    assert parse_column_map(["user_id=annotator_id"]) == {"user_id": "annotator_id"}
    with pytest.raises(InputError, match="expected NEW=OLD"):
        parse_column_map(["user_id"])
    with pytest.raises(InputError, match="already mapped"):
        parse_column_map(["a=b", "a=c"])


def test_csv_keeps_text_as_text(tmp_path):
    path = tmp_path / "p.csv"
    pd.DataFrame({
        "id": ["007", "008"], "prompt": ["Say NA", "Say null"], "chosen": ["NA", "null"],
        "rejected": ["None", "nan"], "margin": [0.5, 2], "wave": [1, 2],
    }).to_csv(path, index=False)
    pairs = load_pairs(path)
    assert pairs["id"].tolist() == ["007", "008"]
    assert pairs["chosen"].tolist() == ["NA", "null"]
    assert pairs["rejected"].tolist() == ["None", "nan"]
    assert pairs["margin"].tolist() == [0.5, 2.0]
    assert pairs["wave"].tolist() == [1, 2]


def test_csv_rankings_with_json_cells(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text('prompt,responses,ranks\nP,"[""a"", ""b""]","[2, 1]"\n')
    pairs = load_pairs(path)
    assert (pairs.loc[0, "chosen"], pairs.loc[0, "rejected"]) == ("b", "a")


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".json", ".csv", ".parquet"])
def test_save_and_load_round_trip(tmp_path, suffix):
    rows = [dict(r, id=f"p{i}", user_id=f"u{i}", margin=0.5 * i) for i, r in enumerate(EXPLICIT)]
    pairs = load_pairs(rows)
    back = load_pairs(save_pairs(pairs, tmp_path / f"pairs{suffix}"))
    pd.testing.assert_frame_equal(back, pairs, check_dtype=False)


@pytest.mark.parametrize("suffix", [".json", ".csv", ".parquet"])
def test_messages_round_trip(tmp_path, suffix):
    rows = [{"id": "c1", "prompt": [msg("user", "Hi")], "chosen": [msg("assistant", "Hello")],
             "rejected": [msg("assistant", "Bye")]}]
    back = load_pairs(save_pairs(load_pairs(rows), tmp_path / f"chat{suffix}"))
    assert back.loc[0, "prompt"] == [msg("user", "Hi")]
    assert back.loc[0, "chosen"] == [msg("assistant", "Hello")]


def test_gzipped_json_and_json_lines_named_json(tmp_path):
    gz = tmp_path / "p.json.gz"
    gz.write_bytes(gzip.compress(json.dumps(EXPLICIT).encode()))
    assert len(load_pairs(gz)) == 2
    lines = write_jsonl(tmp_path / "lines.json", EXPLICIT)
    assert load_pairs(lines)["chosen"].tolist() == ["4.", "Paris."]
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"data": EXPLICIT}))
    assert len(load_pairs(wrapped)) == 2


def test_huggingface_datasets_on_disk(tmp_path):
    datasets = pytest.importorskip("datasets")
    single = tmp_path / "single"
    datasets.Dataset.from_list(EXPLICIT).save_to_disk(str(single))
    assert load_pairs(single)["chosen"].tolist() == ["4.", "Paris."]
    both = tmp_path / "dict"
    datasets.DatasetDict({
        "train": datasets.Dataset.from_list(EXPLICIT),
        "test": datasets.Dataset.from_list(EXPLICIT[:1]),
    }).save_to_disk(str(both))
    assert len(load_pairs(both)) == 2
    assert len(load_pairs(both, split="test")) == 1
    with pytest.raises(InputError, match="split 'dev' not found; available splits: train, test"):
        load_pairs(both, split="dev")
    chat = datasets.Dataset.from_list([
        {"chosen": [msg("user", "Hi"), msg("assistant", "Hello")],
         "rejected": [msg("user", "Hi"), msg("assistant", "Bye")]},
    ])
    assert load_pairs(chat).loc[0, "rejected"] == [msg("assistant", "Bye")]


def test_hub_name_failure_is_a_clear_input_error(monkeypatch):
    datasets = pytest.importorskip("datasets")

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'someone/prefs' on the Hub")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(InputError, match=r"someone/prefs: no such file or folder here, and load"):
        load_pairs("someone/prefs")


def test_missing_file_with_known_suffix_is_not_sent_to_the_hub(tmp_path):
    with pytest.raises(InputError, match="no such file or folder$"):
        load_pairs(tmp_path / "nope.jsonl")


def test_shared_hh_rlhf_file_splits_all_prompts():
    if not HH.exists():
        pytest.skip(f"shared data not present: {HH}")
    with gzip.open(HH, "rt", encoding="utf-8") as f:
        raw = [json.loads(line) for line in f]
    pairs = load_pairs(HH)
    assert len(pairs) == 2312 and pairs["id"].is_unique
    assert pairs["prompt"].str.endswith(A).all()
    assert pairs["prompt"].str.startswith("\n\nHuman:").all()
    for row, (prompt, chosen, rejected) in zip(
        raw, pairs[["prompt", "chosen", "rejected"]].itertuples(index=False)
    ):
        for transcript, response in ((row["chosen"], chosen), (row["rejected"], rejected)):
            assert transcript.startswith(prompt)
            assert transcript[len(prompt):].strip() == response.strip()
            assert not response.startswith(("\n\nHuman:", "\n\nAssistant:", " "))
    inner = pairs["chosen"].str.contains(A) | pairs["rejected"].str.contains(A)
    assert inner.sum() == 5  # transcripts that diverge before their last assistant turn
    assert (pairs["chosen"] == "").sum() == 4  # empty final turns kept, not dropped


def test_shared_squality_file():
    if not SQUALITY.exists():
        pytest.skip(f"shared data not present: {SQUALITY}")
    pairs = load_pairs(SQUALITY)
    assert len(pairs) == 883
    assert pairs["user_id"].nunique() == 4
    models = set(pairs["chosen_model"]) | set(pairs["rejected_model"])
    assert models == {"human", "bart", "bart-dpr"}
    assert (pairs["margin"] > 0).all() and pairs["passage_id"].notna().all()


def test_dataframe_tsv_and_single_record_json_sources(tmp_path):
    frame = pd.DataFrame(EXPLICIT)
    assert load_pairs(frame)["annotator"].tolist() == ["a1", "a2"]
    tsv = tmp_path / "p.tsv"
    frame.to_csv(tsv, sep="\t", index=False)
    assert load_pairs(tsv)["chosen"].tolist() == ["4.", "Paris."]
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"prompt": "p", "chosen": [msg("assistant", "a")],
                               "rejected": [msg("assistant", "b")]}))
    assert load_pairs(one).loc[0, "chosen"] == [msg("assistant", "a")]


def test_ranking_extras_never_override_pair_fields():
    rows = [{"id": "r", "prompt": "p", "responses": ["a", "b"], "ranks": [2, 1],
             "chosen": "stale", "margin": 9, "wave": 3}]
    pair = load_pairs(rows).iloc[0]
    assert (pair["chosen"], pair["rejected"], pair["margin"], pair["wave"]) == ("b", "a", 1.0, 3)
