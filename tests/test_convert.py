"""``rmlens.data.convert`` on the native-layout fixtures of tests/fixtures/convert.

The fixtures are small invented records in each dataset's published layout (field names,
nesting and types as in shared/data/schemas/SCHEMAS.md; the README beside them lists what
each file holds). Every expected pair below is listed by hand from the fixture and the
dataset's rules.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rmlens._errors import InputError
from rmlens.data import load_pairs
from rmlens.data.converters import convert, convert_with_report, converter_names

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "convert"


def fixture(name: str) -> Path:
    path = FIXTURES / name
    assert path.is_file(), f"converter fixture {name} missing from {FIXTURES}"
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

LLAMA13, MISTRAL = "meta-llama/Llama-2-13b-chat-hf", "mistralai/Mistral-7B-Instruct-v0.1"
LLAMA7, LUMINOUS = "meta-llama/Llama-2-7b-chat-hf", "luminous-extended-control"
PRISM_PAIRS = [  # (id, chosen_model, rejected_model, margin, same_model)
    # c4101 turn 0: within 1 (falcon) is 'EMPTY STRING', so its three pairs are dropped
    ("c4101:0:2>0", "gpt-4-1106-preview", "claude-2", 57.0, False),  # 91 - 34
    ("c4101:0:3>0", "command-light", "claude-2", 23.0, False),  # 57 - 34
    ("c4101:0:2>3", "gpt-4-1106-preview", "command-light", 34.0, False),  # 91 - 57
    ("c4101:1:0>1", "gpt-4-1106-preview", "gpt-4-1106-preview", 18.0, True),  # 80 - 62
    # c4102 turn 0: within 0 and 2 tie at 64 (dropped); within 2 is the if_chosen one
    ("c4102:0:0>1", LLAMA13, "models/chat-bison-001", 45.0, False),  # 64 - 19
    ("c4102:0:0>3", LLAMA13, MISTRAL, 16.0, False),  # 64 - 48
    ("c4102:0:2>1", LUMINOUS, "models/chat-bison-001", 45.0, False),  # 64 - 19
    ("c4102:0:3>1", MISTRAL, "models/chat-bison-001", 29.0, False),  # 48 - 19
    ("c4102:0:2>3", LUMINOUS, MISTRAL, 16.0, False),  # 64 - 48
    ("c4102:1:1>0", LUMINOUS, LUMINOUS, 36.0, True),  # 77 - 41
    # c4103: scores 72, 93, 38, 60 in turn 0; 45, 70 in turn 1; 88, 59 in turn 2
    ("c4103:0:1>0", "command-nightly", "gpt-3.5-turbo", 21.0, False),
    ("c4103:0:0>2", "gpt-3.5-turbo", LLAMA7, 34.0, False),
    ("c4103:0:0>3", "gpt-3.5-turbo", "claude-2.1", 12.0, False),
    ("c4103:0:1>2", "command-nightly", LLAMA7, 55.0, False),
    ("c4103:0:1>3", "command-nightly", "claude-2.1", 33.0, False),
    ("c4103:0:3>2", "claude-2.1", LLAMA7, 22.0, False),
    ("c4103:1:1>0", "command-nightly", "command-nightly", 25.0, True),
    ("c4103:2:0>1", "command-nightly", "command-nightly", 29.0, True),
]


def test_prism_conversations_pairs_and_report():
    pairs, report = convert_with_report("prism", fixture("prism_conversations.jsonl"))
    cols = ("chosen_model", "rejected_model", "margin", "same_model")
    assert triples(pairs, *cols) == PRISM_PAIRS
    assert set(pairs["user_id"]) == {"user4101", "user4102"}
    assert pairs.loc[pairs.id == "c4103:0:1>0", "conversation_type"].item() == "values guided"
    assert pairs["turn"].tolist() == [0, 0, 0, 1] + [0] * 5 + [1] + [0] * 6 + [1, 2]
    assert report["records_read"] == 3 and report["pairs_written"] == 18
    assert report["dropped"] == {"empty response": 3, "tie (equal scores)": 1}
    assert report["skipped"] == {"empty responses ('EMPTY STRING')": 1}
    assert report["users"] == 2 and report["models"] == 11


def test_prism_history_follows_the_chosen_path():
    pairs = convert("prism", fixture("prism_conversations.jsonl")).set_index("id")
    assert pairs.loc["c4103:2:0>1", "prompt"] == [
        {"role": "user", "content": "Is it ever right to break a promise?"},
        {
            "role": "assistant",
            "content": "Yes, if circumstances change so much that the promise no longer "
            "serves its purpose.",
        },
        {"role": "user", "content": "What if keeping it would hurt someone else?"},
        {
            "role": "assistant",
            "content": "Then explain the change to the person you promised, and look for "
            "another way.",
        },
        {"role": "user", "content": "Can you suggest a short exercise to think it through?"},
    ]
    # c4102 turn 0 is a 64 = 64 tie: the conversation went on with the if_chosen response
    assert pairs.loc["c4102:1:1>0", "prompt"][1] == {
        "role": "assistant",
        "content": "Several cities saw cleaner air after a charge, though shops often worry "
        "at first.",
    }
    assert all(m["role"] != "model" for p in pairs["prompt"] for m in p)


def test_prism_utterances_give_the_same_pairs():
    long = convert("prism", fixture("prism_utterances.jsonl"))
    wide = convert("prism", fixture("prism_conversations.jsonl"))
    wide = wide[wide.conversation_id == "c4101"].reset_index(drop=True)
    shared = [c for c in wide.columns if c in long.columns]
    assert shared == list(wide.columns)
    assert long[shared].equals(wide)
    assert long["interaction_id"].tolist() == ["int7300"] * 3 + ["int7301"]
    assert long.loc[0, ["chosen_utterance_id", "rejected_utterance_id"]].tolist() == [
        "ut8802",
        "ut8800",
    ]


def test_prism_ties_keep_with_margin_zero():
    pairs, report = convert_with_report("prism", fixture("prism_conversations.jsonl"), ties="keep")
    tie = pairs.set_index("id").loc["c4102:0:2>0"]  # the if_chosen side is chosen
    assert tie["margin"] == 0 and tie["chosen_model"] == "luminous-extended-control"
    assert len(pairs) == 19 and report["dropped"] == {"empty response": 3}


def test_prism_empty_string_is_dropped_never_paired():
    pairs = convert("prism", fixture("prism_utterances.jsonl"))
    assert "EMPTY STRING" not in set(pairs.chosen) | set(pairs.rejected)
    assert "tiiuae/falcon-7b-instruct" not in set(pairs.chosen_model) | set(pairs.rejected_model)


def test_prism_repeated_chosen_text_is_one_path(tmp_path):
    records = rows("prism_conversations.jsonl")
    turn1 = [m for m in records[2]["conversation_history"] if m.get("turn") == 1][1:]
    turn1[1].update(content=turn1[0]["content"], if_chosen=True)  # both rows chosen, same text
    pairs, report = convert_with_report("prism", write(tmp_path, "c.jsonl", records))
    assert "c4103:1:1>0" not in set(pairs.id) and "c4103:2:0>1" in set(pairs.id)
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
    ("530017:0:c>a", "1184", 0, "c", "a"),  # picks: c, then a in the second turn
    ("530017:0:c>b", "1184", 0, "c", "b"),
    ("530017:0:c>d", "1184", 0, "c", "d"),
    ("530017:1:a>b", "1184", 1, "a", "b"),
    ("530017:1:a>c", "1184", 1, "a", "c"),
    ("530017:1:a>d", "1184", 1, "a", "d"),
    ("530018:0:d>a", "2291", 0, "d", "a"),  # the same prompt and candidates, pick d
    ("530018:0:d>b", "2291", 0, "d", "b"),
    ("530018:0:d>c", "2291", 0, "d", "c"),
    ("530019:0:b>a", "3307", 0, "b", "a"),  # the annotator's own prompt (Portuguese)
    ("530019:0:b>c", "3307", 0, "b", "c"),
    ("530019:0:b>d", "3307", 0, "b", "d"),
]


def test_community_alignment_pairs_csv_equals_jsonl():
    pairs, report = convert_with_report("community-alignment", fixture("community_alignment.jsonl"))
    cols = ("user_id", "turn", "chosen_position", "rejected_position")
    assert triples(pairs, *cols) == CA_PAIRS
    assert pairs.loc[3, "chosen"] == "Try one-pan meals like stir-fries and omelettes."
    assert pairs.loc[3, "prompt"] == [
        {"role": "user", "content": "What is a good way to start learning to cook?"},
        {
            "role": "assistant",
            "content": "Cook one new recipe every weekend and note what went wrong.",
        },
        {"role": "user", "content": "I only have twenty minutes on weekdays."},
    ]
    assert "margin" not in pairs and "chosen_model" not in pairs
    assert pairs["is_pregenerated_first_prompt"].tolist() == [True] * 9 + [False] * 3
    assert report["users"] == 3 and report["dropped"] == {} and report["margin"] is None
    assert convert("community-alignment", fixture("community_alignment.csv")).equals(pairs)


def test_community_alignment_traps(tmp_path):
    records = rows("community_alignment.jsonl")
    records[1]["first_turn_response_b"] = records[1]["first_turn_response_d"]  # picked: d
    records[2]["first_turn_response_a"] = "Na primavera. <|end_of_text|>"
    records[2]["third_turn_prompt"] = "E no inverno?"  # after a missing second turn
    pairs, report = convert_with_report("community-alignment", write(tmp_path, "ca.jsonl", records))
    assert len(pairs) == 11 and "530018:0:d>b" not in set(pairs.id)
    assert report["dropped"] == {"identical responses": 1}
    assert report["skipped"] == {"turns after a missing turn": 1}
    assert "Na primavera." in set(pairs.rejected)
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
    assert triples(pairs, "margin") == [  # 8.5 - 3.0, then 9.0 - 1.5; 8.0 = 8.0 between
        ("632ffe440145608c25f1e6e19a6b7b96e7b59d052da606b9b289d374f1499a32", 5.5),
        ("9b447db05bba2087a76c84545e4c0315eef63ec760a6b8a5c0278cbfd6b57f75", 7.5),
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
        ("gpt-4", "pythia-12b", 5.5),
        ("vicuna-33b", "wizardlm-13b", 0.0),
        ("gpt-3.5-turbo", "falcon-40b-instruct", 7.5),
    ]
    assert joined["source"].tolist() == ["evol_instruct", "sharegpt", "false_qa"]
    assert report["notes"] == {"model names joined (responses)": 6}


def test_ultrafeedback_join_reports_what_it_cannot_name(tmp_path):
    raw = rows("openbmb_ultrafeedback.jsonl")
    raw[0]["completions"][1]["response"] += " "  # pythia's text no longer matches exactly
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
    # overall_score: llama-2-70b-chat 6.5, pythia-12b 3.0, gpt-4 8.5, ultralm-13b 5.0
    assert triples(first, "chosen_model", "rejected_model", "margin") == [
        ("632ffe440145608c:0>1", "llama-2-70b-chat", "pythia-12b", 3.5),
        ("632ffe440145608c:2>0", "gpt-4", "llama-2-70b-chat", 2.0),
        ("632ffe440145608c:0>3", "llama-2-70b-chat", "ultralm-13b", 1.5),
        ("632ffe440145608c:2>1", "gpt-4", "pythia-12b", 5.5),
        ("632ffe440145608c:3>1", "ultralm-13b", "pythia-12b", 2.0),
        ("632ffe440145608c:2>3", "gpt-4", "ultralm-13b", 3.5),
    ]
    assert "4e5586e2037d5a49:1>3" not in set(pairs.id)  # vicuna 8.0 = wizardlm 8.0
    assert set(pairs.chosen_principle) >= {"honesty", "verbalized_calibration"}
    honesty, report = convert_with_report("ultrafeedback", source, score="honesty")
    assert "starchat" not in set(honesty.chosen_model) | set(honesty.rejected_model)
    assert report["dropped"]["honesty score not a number ('N/A')"] == 3
    with pytest.raises(InputError, match="`score` honesty: applies to the raw release only"):
        convert("ultrafeedback", fixture("ultrafeedback_binarized.jsonl"), score="honesty")


# --- HelpSteer2 ----------------------------------------------------------------------------


def test_helpsteer2_preference_and_ratings():
    pairs, report = convert_with_report("helpsteer2", fixture("helpsteer2_preference.jsonl"))
    tip = "Use each new word in a sentence the same day you learn it."
    assert triples(pairs, "chosen", "margin", "split") == [  # strengths -1, 0, +2
        ("preference:1", tip, 1.0, "train"),
        ("preference:3", "Saturn is the best-known planet with rings.", 2.0, "val"),
    ]
    assert report["dropped"] == {"tie (preference_strength 0)": 1}
    kept = convert("helpsteer2", fixture("helpsteer2_preference.jsonl"), ties="keep")
    assert kept.loc[1, "margin"] == 0 and kept.loc[1, "prompt"] == [
        {"role": "user", "content": "My bike chain keeps slipping."},
        {"role": "assistant", "content": "Does it slip under load or when you shift?"},
        {"role": "user", "content": "Mostly when I shift gears."},
    ]
    rated, report = convert_with_report("helpsteer2", fixture("helpsteer2_train.jsonl"))
    assert triples(rated, "chosen_score", "rejected_score", "margin") == [  # helpfulness 2, 4
        ("ratings:2>1", 4.0, 2.0, 2.0)
    ]
    assert report["dropped"] == {"tie (equal helpfulness)": 1}
    verbose = convert("helpsteer2", fixture("helpsteer2_train.jsonl"), attribute="verbosity")
    assert verbose["id"].tolist() == ["ratings:1>2", "ratings:4>3"]  # verbosity 3, 1; 1, 2
    with pytest.raises(InputError, match="the disagreements subset .* has no pairs"):
        convert("helpsteer2", fixture("helpsteer2_disagreements.jsonl"))


# --- Chatbot Arena -------------------------------------------------------------------------


def test_chatbot_arena_wins_ties_and_bothbad():
    source = fixture("chatbot_arena_conversations.jsonl")
    pairs, report = convert_with_report("chatbot-arena", source)
    assert triples(pairs, "user_id", "chosen_model", "rejected_model", "margin") == [
        ("3c9e1a7b5d2f48c6a0e4b7d19f2c6a85", "arena_user_4417", "alpaca-13b", "chatglm-6b", 1.0),
        ("b7f04e2d9a1c4e3f8d6b2a0c5e7f9d13", "arena_user_5820", "gpt-4", "fastchat-t5-3b", 1.0),
    ]
    assert report["dropped"] == {"tie": 1, "tie (bothbad)": 1}
    assert pairs.loc[0, "prompt"] == [
        {"role": "user", "content": "Suggest a name for a pet goldfish."}
    ]
    assert pairs.loc[0, "chosen"] == [
        {"role": "assistant", "content": "Bubbles is a classic choice."}
    ]
    assert pairs.loc[1, "chosen"] == [  # model_b won the 2-turn battle: its whole side
        {"role": "assistant", "content": "Consider Lookout Mountain Trail."},
        {"role": "user", "content": "Anything shorter?"},
        {"role": "assistant", "content": "Try Chautauqua Meadow."},
    ]
    ties = convert("chatbot-arena", source, ties="keep")
    assert ties["winner"].tolist() == ["model_a", "model_b", "tie"]
    both = convert_with_report("chatbot-arena", source, bothbad="keep")
    assert both[0]["winner"].tolist() == ["model_a", "model_b", "tie (bothbad)"]
    assert both[0]["margin"].tolist() == [1.0, 1.0, 0.0] and both[1]["dropped"] == {"tie": 1}
    single, report = convert_with_report("chatbot-arena", source, multi_turn="drop")
    assert len(single) == 1 and report["dropped"]["multi-turn battle"] == 1


# --- SHP -----------------------------------------------------------------------------------


ENGINES = "No, modern engines warm up best by driving gently."  # the comment of two pairs


def test_shp_pairs_margins_and_posts():
    pairs, report = convert_with_report("shp", fixture("shp.jsonl"))
    assert triples(pairs, "chosen", "post_id", "subreddit") == [
        ("k2m9qa:hq1z2ab>hq1y7cd", ENGINES, "k2m9qa", "askcarguys"),
        ("k2m9qa:hq1z2ab>hq1x4ef", ENGINES, "k2m9qa", "askcarguys"),
        (
            "p8w3zd:gt9k5pq>gt9k1mn",
            "It is play: she wants you to pay attention to her.",
            "p8w3zd",
            "askvet",
        ),
    ]
    # score_ratio is preferred / other, whichever side won: B won row 2 with 60 vs 15
    assert pairs["margin"].tolist() == pytest.approx([math.log(3), math.log(4), math.log(2)])
    assert report["group_by"] == "post_id" and report["users"] is None
    capped, report = convert_with_report("shp", fixture("shp.jsonl"), max_per_post=1)
    assert capped["id"].tolist() == ["k2m9qa:hq1z2ab>hq1x4ef", "p8w3zd:gt9k5pq>gt9k1mn"]
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
