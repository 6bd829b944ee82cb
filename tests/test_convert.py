"""``rmlens.data.convert`` on the native-layout fixtures of shared/data/schemas (SCHEMAS.md).

Every expected pair below is listed by hand from the fixture and the dataset's rules.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rmlens._errors import InputError
from rmlens.data import load_pairs
from rmlens.data.converters import convert, convert_with_report, converter_names

SCHEMAS = Path(__file__).resolve().parents[2] / "shared" / "data" / "schemas"


def fixture(name: str) -> Path:
    path = SCHEMAS / name
    if not path.exists():
        pytest.skip(f"schema fixture {name} not found under {SCHEMAS}")
    return path


def rows(name: str) -> list[dict]:
    return [json.loads(line) for line in fixture(name).read_text().splitlines() if line.strip()]


def write(tmp_path: Path, name: str, records: list[dict]) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def triples(pairs, *cols: str) -> list[tuple]:
    return [tuple(r) for r in pairs[["id", *cols]].itertuples(index=False)]


def test_registry_lists_the_six_datasets():
    assert converter_names() == [
        "chatbot-arena",
        "community-alignment",
        "helpsteer2",
        "prism",
        "shp",
        "ultrafeedback",
    ]
    with pytest.raises(InputError, match="unknown dataset 'hh'; known: chatbot-arena"):
        convert("hh", [])


# --- PRISM -------------------------------------------------------------------------------

PRISM_PAIRS = [  # (id, chosen_model, rejected_model, margin, same_model)
    ("c901:0:1>0", "gpt-4", "command", 47.0, False),
    ("c901:0:2>0", "HuggingFaceH4/zephyr-7b-beta", "command", 22.0, False),
    ("c901:0:1>2", "gpt-4", "HuggingFaceH4/zephyr-7b-beta", 25.0, False),
    ("c901:1:1>0", "gpt-4", "gpt-4", 9.0, True),
    ("c902:0:0>2", "claude-2.1", "models/chat-bison-001", 45.0, False),
    ("c902:0:0>3", "claude-2.1", "luminous-supreme-control", 23.0, False),
    ("c902:0:1>2", "meta-llama/Llama-2-70b-chat-hf", "models/chat-bison-001", 45.0, False),
    ("c902:0:1>3", "meta-llama/Llama-2-70b-chat-hf", "luminous-supreme-control", 23.0, False),
    ("c902:0:3>2", "luminous-supreme-control", "models/chat-bison-001", 22.0, False),
    ("c902:1:0>1", "meta-llama/Llama-2-70b-chat-hf", "meta-llama/Llama-2-70b-chat-hf", 38.0, True),
    ("c903:0:0>1", "claude-instant-1", "mistralai/Mistral-7B-Instruct-v0.1", 35.0, False),
    ("c903:0:0>2", "claude-instant-1", "gpt-3.5-turbo", 9.0, False),
    ("c903:0:0>3", "claude-instant-1", "command-nightly", 43.0, False),
    ("c903:0:2>1", "gpt-3.5-turbo", "mistralai/Mistral-7B-Instruct-v0.1", 26.0, False),
    ("c903:0:1>3", "mistralai/Mistral-7B-Instruct-v0.1", "command-nightly", 8.0, False),
    ("c903:0:2>3", "gpt-3.5-turbo", "command-nightly", 34.0, False),
    ("c903:1:0>1", "claude-instant-1", "claude-instant-1", 19.0, True),
    ("c903:2:1>0", "claude-instant-1", "claude-instant-1", 8.0, True),
]


def test_prism_conversations_pairs_and_report():
    pairs, report = convert_with_report("prism", fixture("prism_conversations.jsonl"))
    cols = ("chosen_model", "rejected_model", "margin", "same_model")
    assert triples(pairs, *cols) == PRISM_PAIRS
    assert set(pairs["user_id"]) == {"user901", "user902"}
    assert pairs.loc[pairs.id == "c903:0:0>1", "conversation_type"].item() == "values guided"
    assert pairs["turn"].tolist() == [0, 0, 0, 1] + [0] * 5 + [1] + [0] * 6 + [1, 2]
    assert report["records_read"] == 3 and report["pairs_written"] == 18
    assert report["dropped"] == {"empty response": 3, "tie (equal scores)": 1}
    assert report["skipped"] == {"empty responses ('EMPTY STRING')": 1}
    assert report["users"] == 2 and report["models"] == 11


def test_prism_history_follows_the_chosen_path():
    pairs = convert("prism", fixture("prism_conversations.jsonl")).set_index("id")
    assert pairs.loc["c903:2:1>0", "prompt"] == [
        {"role": "user", "content": "Fixture prompt: what matters most in a friendship?"},
        {"role": "assistant", "content": "Fixture reply: trust."},
        {"role": "user", "content": "Fixture follow-up: how do you rebuild trust?"},
        {"role": "assistant", "content": "Fixture reply t1-a: apologise and be consistent."},
        {"role": "user", "content": "Fixture follow-up: thanks, any book?"},
    ]
    # c902 turn 0 is a 75 = 75 tie: the conversation went on with the if_chosen response
    assert pairs.loc["c902:1:0>1", "prompt"][1] == {
        "role": "assistant",
        "content": "Fixture reply: yes, with caveats.",
    }
    assert all(m["role"] != "model" for p in pairs["prompt"] for m in p)


def test_prism_utterances_give_the_same_pairs():
    long = convert("prism", fixture("prism_utterances.jsonl"))
    wide = convert("prism", fixture("prism_conversations.jsonl"))
    wide = wide[wide.conversation_id == "c901"].reset_index(drop=True)
    shared = [c for c in wide.columns if c in long.columns]
    assert shared == list(wide.columns)
    assert long[shared].equals(wide)
    assert long["interaction_id"].tolist() == ["int2000"] * 3 + ["int2001"]
    assert long.loc[0, ["chosen_utterance_id", "rejected_utterance_id"]].tolist() == [
        "ut5001",
        "ut5000",
    ]


def test_prism_ties_keep_with_margin_zero():
    pairs, report = convert_with_report("prism", fixture("prism_conversations.jsonl"), ties="keep")
    tie = pairs.set_index("id").loc["c902:0:1>0"]  # the if_chosen side is chosen
    assert tie["margin"] == 0 and tie["chosen_model"] == "meta-llama/Llama-2-70b-chat-hf"
    assert len(pairs) == 19 and report["dropped"] == {"empty response": 3}


def test_prism_empty_string_is_dropped_never_paired():
    pairs = convert("prism", fixture("prism_utterances.jsonl"))
    assert "EMPTY STRING" not in set(pairs.chosen) | set(pairs.rejected)
    assert "google/flan-t5-xxl" not in set(pairs.chosen_model) | set(pairs.rejected_model)


def test_prism_repeated_chosen_text_is_one_path(tmp_path):
    records = rows("prism_conversations.jsonl")
    turn1 = [m for m in records[2]["conversation_history"] if m.get("turn") == 1][1:]
    turn1[1].update(content=turn1[0]["content"], if_chosen=True)  # both rows chosen, same text
    pairs, report = convert_with_report("prism", write(tmp_path, "c.jsonl", records))
    assert "c903:1:0>1" not in set(pairs.id) and "c903:2:1>0" in set(pairs.id)
    assert report["dropped"]["identical responses"] == 1


def test_prism_ambiguous_chosen_path_drops_later_turns(tmp_path):
    records = rows("prism_utterances.jsonl")
    records[0]["if_chosen"] = True  # two different chosen responses in turn 0
    pairs, report = convert_with_report("prism", write(tmp_path, "u.jsonl", records))
    assert pairs["turn"].tolist() == [0, 0, 0]
    assert (
        report["dropped"][
            "prompt not rebuilt: several different chosen responses in an earlier turn"
        ]
        == 1
    )


# --- Community Alignment -------------------------------------------------------------------

CA_PAIRS = [  # (id, user_id, turn, chosen_position, rejected_position)
    ("910001:0:b>a", "7001", 0, "b", "a"),
    ("910001:0:b>c", "7001", 0, "b", "c"),
    ("910001:0:b>d", "7001", 0, "b", "d"),
    ("910001:1:b>a", "7001", 1, "b", "a"),
    ("910001:1:b>c", "7001", 1, "b", "c"),
    ("910001:1:b>d", "7001", 1, "b", "d"),
    ("910002:0:a>b", "7002", 0, "a", "b"),
    ("910002:0:a>c", "7002", 0, "a", "c"),
    ("910002:0:a>d", "7002", 0, "a", "d"),
    ("910003:0:d>a", "7003", 0, "d", "a"),
    ("910003:0:d>b", "7003", 0, "d", "b"),
    ("910003:0:d>c", "7003", 0, "d", "c"),
]


def test_community_alignment_pairs_csv_equals_jsonl():
    pairs, report = convert_with_report("community-alignment", fixture("community_alignment.jsonl"))
    cols = ("user_id", "turn", "chosen_position", "rejected_position")
    assert triples(pairs, *cols) == CA_PAIRS
    assert pairs.loc[3, "chosen"] == "Fixture t2 B: talk to your parents first."
    assert pairs.loc[3, "prompt"][1] == {
        "role": "assistant",
        "content": "Fixture cand B: choose what makes you happy.",
    }
    assert "margin" not in pairs and "chosen_model" not in pairs
    assert pairs["is_pregenerated_first_prompt"].tolist() == [True] * 9 + [False] * 3
    assert report["users"] == 3 and report["dropped"] == {} and report["margin"] is None
    assert convert("community-alignment", fixture("community_alignment.csv")).equals(pairs)


def test_community_alignment_traps(tmp_path):
    records = rows("community_alignment.jsonl")
    records[1]["first_turn_response_c"] = records[1]["first_turn_response_a"]  # picked: a
    records[2]["first_turn_response_b"] = "Fixture fr B <|end_of_text|>"
    records[2]["third_turn_prompt"] = "Fixture orphan third turn"  # after a missing second
    pairs, report = convert_with_report("community-alignment", write(tmp_path, "ca.jsonl", records))
    assert len(pairs) == 11 and "910002:0:a>c" not in set(pairs.id)
    assert report["dropped"] == {"identical responses": 1}
    assert report["skipped"] == {"turns after a missing turn": 1}
    assert "Fixture fr B" in set(pairs.rejected)
    assert report["notes"] == {"responses with <|end_of_text|> removed": 1}

    records[0]["second_turn_preferred_response"] = "B"
    with pytest.raises(
        InputError,
        match=r"line 1: field 'second_turn_preferred_response' must "
        r"be one of 'response_a'.*got 'B'",
    ):
        convert("community-alignment", write(tmp_path, "bad.jsonl", records))


# --- UltraFeedback -------------------------------------------------------------------------


def test_ultrafeedback_binarized_and_the_model_join():
    source = fixture("ultrafeedback_binarized.jsonl")
    pairs, report = convert_with_report("ultrafeedback", source)
    assert triples(pairs, "margin") == [
        ("4d79da496ccbb93cb643153dc7db44258df8348f22f8f5348a387158cdc74d0c", 5.0),
        ("95214fc083d1de13126aba973bed4b0ab8994a699934aa6dc222a1b88f0c394c", 7.5),
    ]
    assert "chosen_model" not in pairs and "user_id" not in pairs
    assert report["dropped"] == {"tie (equal scores)": 1}
    joined, report = convert_with_report(
        "ultrafeedback",
        source,
        ties="keep",
        models_from=str(fixture("openbmb_ultrafeedback.jsonl")),
    )
    assert [
        tuple(r)
        for r in joined[["chosen_model", "rejected_model", "margin"]].itertuples(index=False)
    ] == [
        ("gpt-4", "alpaca-7b", 5.0),
        ("vicuna-33b", "wizardlm-13b", 0.0),
        ("gpt-3.5-turbo", "pythia-12b", 7.5),
    ]
    assert joined["source"].tolist() == ["evol_instruct", "sharegpt", "false_qa"]
    assert report["notes"] == {"model names joined (responses)": 6}


def test_ultrafeedback_join_reports_what_it_cannot_name(tmp_path):
    raw = rows("openbmb_ultrafeedback.jsonl")
    raw[0]["completions"][1]["response"] += " "  # alpaca's text no longer matches exactly
    del raw[2]
    pairs, report = convert_with_report(
        "ultrafeedback",
        fixture("ultrafeedback_binarized.jsonl"),
        models_from=str(write(tmp_path, "raw.jsonl", raw)),
    )
    assert pairs.loc[0, "chosen_model"] == "gpt-4" and pairs.loc[1:, "chosen_model"].isna().all()
    assert pairs["rejected_model"].isna().all()
    assert report["notes"] == {
        "model names joined (responses)": 1,
        "model names missing: instruction not in --models-from": 2,
        "model names missing: response text not in --models-from": 1,
    }


def test_ultrafeedback_raw_pairs_and_na_ratings():
    source = fixture("openbmb_ultrafeedback.jsonl")
    pairs, report = convert_with_report("ultrafeedback", source)
    assert len(pairs) == 17 and report["dropped"] == {"tie (equal scores)": 1}
    first = pairs[pairs.source == "evol_instruct"]
    assert triples(first, "chosen_model", "rejected_model", "margin") == [
        ("4d79da496ccbb93c:0>1", "gpt-4", "alpaca-7b", 5.0),
        ("4d79da496ccbb93c:0>2", "gpt-4", "llama-2-13b-chat", 1.5),
        ("4d79da496ccbb93c:0>3", "gpt-4", "starchat", 3.0),
        ("4d79da496ccbb93c:2>1", "llama-2-13b-chat", "alpaca-7b", 3.5),
        ("4d79da496ccbb93c:3>1", "starchat", "alpaca-7b", 2.0),
        ("4d79da496ccbb93c:2>3", "llama-2-13b-chat", "starchat", 1.5),
    ]
    assert "695d68e4c236cecb:0>1" not in set(pairs.id)  # vicuna 7.0 = wizardlm 7.0
    assert set(pairs.chosen_principle) >= {"honesty", "verbalized_calibration"}
    honesty, report = convert_with_report("ultrafeedback", source, score="honesty")
    assert "bard" not in set(honesty.chosen_model) | set(honesty.rejected_model)
    assert report["dropped"]["honesty score not a number ('N/A')"] == 3
    with pytest.raises(InputError, match="`score` honesty: applies to the raw release only"):
        convert("ultrafeedback", fixture("ultrafeedback_binarized.jsonl"), score="honesty")


# --- HelpSteer2 ----------------------------------------------------------------------------


def test_helpsteer2_preference_and_ratings():
    pairs, report = convert_with_report("helpsteer2", fixture("helpsteer2_preference.jsonl"))
    assert triples(pairs, "chosen", "margin", "split") == [
        ("preference:1", "Fixture response one: a short poem with 5-7-5 syllables.", 2.0, "train"),
        ("preference:3", "Fixture val response two.", 3.0, "val"),
    ]
    assert report["dropped"] == {"tie (preference_strength 0)": 1}
    kept = convert("helpsteer2", fixture("helpsteer2_preference.jsonl"), ties="keep")
    assert kept.loc[1, "margin"] == 0 and kept.loc[1, "prompt"] == [
        {"role": "user", "content": "Fixture user turn 1"},
        {"role": "assistant", "content": "Fixture assistant turn 1"},
        {"role": "user", "content": "Fixture user turn 2"},
    ]
    rated, report = convert_with_report("helpsteer2", fixture("helpsteer2_train.jsonl"))
    assert triples(rated, "chosen_score", "rejected_score", "margin") == [
        ("ratings:1>2", 4.0, 1.0, 3.0)
    ]
    assert report["dropped"] == {"tie (equal helpfulness)": 1}
    verbose = convert("helpsteer2", fixture("helpsteer2_train.jsonl"), attribute="verbosity")
    assert verbose["id"].tolist() == ["ratings:2>1", "ratings:3>4"]
    with pytest.raises(InputError, match="the disagreements subset .* has no pairs"):
        convert("helpsteer2", fixture("helpsteer2_disagreements.jsonl"))


# --- Chatbot Arena -------------------------------------------------------------------------


def test_chatbot_arena_wins_ties_and_bothbad():
    source = fixture("chatbot_arena_conversations.jsonl")
    pairs, report = convert_with_report("chatbot-arena", source)
    assert triples(pairs, "user_id", "chosen_model", "rejected_model", "margin") == [
        ("0f1e2d3c4b5a69788796a5b4c3d2e1f0", "arena_user_9001", "vicuna-13b", "koala-13b", 1.0),
        ("11112222333344445555666677778888", "arena_user_9002", "claude-v1", "gpt-3.5-turbo", 1.0),
    ]
    assert report["dropped"] == {"tie": 1, "tie (bothbad)": 1}
    assert pairs.loc[0, "prompt"] == [
        {"role": "user", "content": "Fixture question: name a colour."}
    ]
    assert pairs.loc[0, "chosen"] == [{"role": "assistant", "content": "Fixture A: blue."}]
    assert pairs.loc[1, "chosen"] == [
        {"role": "assistant", "content": "Fixture a1-B"},
        {"role": "user", "content": "Fixture q2"},
        {"role": "assistant", "content": "Fixture a2-B"},
    ]
    ties = convert("chatbot-arena", source, ties="keep")
    assert ties["winner"].tolist() == ["model_a", "model_b", "tie"]
    both = convert_with_report("chatbot-arena", source, bothbad="keep")
    assert both[0]["winner"].tolist() == ["model_a", "model_b", "tie (bothbad)"]
    assert both[0]["margin"].tolist() == [1.0, 1.0, 0.0] and both[1]["dropped"] == {"tie": 1}
    single, report = convert_with_report("chatbot-arena", source, multi_turn="drop")
    assert len(single) == 1 and report["dropped"]["multi-turn battle"] == 1


# --- SHP -----------------------------------------------------------------------------------


def test_shp_pairs_margins_and_posts():
    pairs, report = convert_with_report("shp", fixture("shp.jsonl"))
    assert triples(pairs, "chosen", "post_id", "subreddit") == [
        ("fx1a2b:fxc0001>fxc0002", "Fixture comment: rinse it first.", "fx1a2b", "askculinary"),
        ("fx1a2b:fxc0001>fxc0003", "Fixture comment: rinse it first.", "fx1a2b", "askculinary"),
        (
            "fx9z8y:fxc0100>fxc0101",
            "Fixture comment: expansion of the universe.",
            "fx9z8y",
            "askphysics",
        ),
    ]
    # score_ratio is preferred / other, whichever side won: B won row 2 with 120 vs 30
    assert pairs["margin"].tolist() == pytest.approx([math.log(3), math.log(4), math.log(2)])
    assert report["group_by"] == "post_id" and report["users"] is None
    capped, report = convert_with_report("shp", fixture("shp.jsonl"), max_per_post=1)
    assert capped["id"].tolist() == ["fx1a2b:fxc0001>fxc0003", "fx9z8y:fxc0100>fxc0101"]
    assert report["dropped"] == {"over --max-per-post": 1}
    ratio = convert("shp", fixture("shp.jsonl"), margin_from="ratio", min_ratio=2.5)
    assert ratio["margin"].tolist() == [3.0, 4.0]


def test_shp_score_ratio_read_the_wrong_way_fails(tmp_path):
    records = rows("shp.jsonl")
    records[1]["score_ratio"] = 0.25  # score_A / score_B instead of preferred / other
    with pytest.raises(
        InputError,
        match=r"line 2: field 'score_ratio' must be the preferred "
        r"comment's score over the other's \(>= 1\), got the "
        r"number 0.25",
    ):
        convert("shp", write(tmp_path, "shp.jsonl", records))


# --- across datasets -----------------------------------------------------------------------

CASES = [
    ("prism", "prism_conversations.jsonl"),
    ("community-alignment", "community_alignment.csv"),
    ("ultrafeedback", "ultrafeedback_binarized.jsonl"),
    ("ultrafeedback", "openbmb_ultrafeedback.jsonl"),
    ("helpsteer2", "helpsteer2_preference.jsonl"),
    ("helpsteer2", "helpsteer2_train.jsonl"),
    ("chatbot-arena", "chatbot_arena_conversations.jsonl"),
    ("shp", "shp.jsonl"),
]


@pytest.mark.parametrize(("name", "file"), CASES)
@pytest.mark.parametrize("suffix", [".jsonl", ".parquet", ".csv"])
def test_converted_pairs_round_trip_through_load_pairs(tmp_path, name, file, suffix):
    from rmlens.data import find_problems, save_pairs

    pairs = (
        convert(name, fixture(file), ties="keep")
        if name != "shp" and "community" not in name
        else convert(name, fixture(file))
    )
    assert pairs["id"].is_unique and len(pairs) > 0
    assert pairs.attrs["convert_report"]["pairs_written"] == len(pairs)
    out = save_pairs(pairs, tmp_path / f"pairs{suffix}")
    assert find_problems(out) == []
    again = load_pairs(out)
    assert again["id"].tolist() == pairs["id"].tolist()
    assert again["chosen"].tolist() == pairs["chosen"].tolist()


def test_records_and_dataframes_are_sources():
    records = rows("shp.jsonl")
    import pandas as pd

    assert (
        convert("shp", pd.DataFrame(records))["id"].tolist()
        == convert("shp", records)["id"].tolist()
    )


def test_datasets_objects_and_the_public_name():
    datasets = pytest.importorskip("datasets")
    import rmlens.data

    records = rows("ultrafeedback_binarized.jsonl")
    splits = datasets.DatasetDict(
        {
            "test_prefs": datasets.Dataset.from_list(records[:1]),
            "train_prefs": datasets.Dataset.from_list(records),
        }
    )
    pairs = rmlens.data.convert("ultrafeedback", splits)  # train_prefs, the usual split
    assert len(pairs) == 2
    assert len(rmlens.data.convert("ultrafeedback", splits, split="test_prefs")) == 1


def test_unknown_option_and_bad_value():
    with pytest.raises(InputError, match="unknown ShpOptions setting"):
        convert("shp", rows("shp.jsonl"), ties="keep")
    with pytest.raises(InputError, match="The 'ties' parameter of PrismOptions must be one of"):
        convert("prism", rows("prism_utterances.jsonl"), ties="maybe")
