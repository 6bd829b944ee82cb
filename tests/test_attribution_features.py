"""Pair features against hand-computed values, the registry, and VADER fidelity."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rmlens.attribution import (
    list_features,
    pair_features,
    register_feature,
    unregister_feature,
)
from rmlens.data import _lexicons as lex
from rmlens.data._text import _TOKEN, Corpus


@pytest.fixture
def three_pairs() -> pd.DataFrame:
    return pd.DataFrame({
        "id": ["a", "b", "c"],
        "prompt": ["Where is the cat?", "List two things.", "Is 2+2=4?"],
        "chosen": [
            "The cat sat on the mat.",
            "Sure! Here is a list:\n- one\n- two",
            "Great question. You're right, thank you!",
        ],
        "rejected": [
            "I'm sorry, but I can't help with that.",
            "No.",
            "As an AI, I don't have feelings. Please ask again?",
        ],
        "user_id": ["u1", "u2", "u1"],
        "chosen_model": ["m1", "m2", "m1"],
        "rejected_model": ["m2", "m2", "m3"],
        "margin": [1.0, 2.0, 0.5],
        "mechanism": ["quality", "noise", "length"],
        "wave": [1, 2, 1],
        "tags": [["x"], ["y"], []],
        "tm": [0.9, 0.8, 0.7],
        "category": ["memorized", "generalized", "other"],
    })


def test_lengths_and_diff_signs(three_pairs):
    f = pair_features(three_pairs)
    assert f.len_chars_chosen.tolist() == [23, 33, 40]
    assert f.len_chars_rejected.tolist() == [38, 3, 50]
    assert f.len_words_chosen.tolist() == [6, 9, 6]
    assert f.len_words_rejected.tolist() == [8, 1, 10]
    assert np.sign(f.len_chars_diff).tolist() == [-1, 1, -1]
    assert (f.len_words_diff == f.len_words_chosen - f.len_words_rejected).all()
    assert f.len_words_prompt.tolist() == [4, 3, 2]


def test_flesch_on_a_known_sentence(three_pairs):
    # "The cat sat on the mat.": 6 words, 1 sentence, 6 one-syllable words
    # 206.835 - 1.015 * 6 / 1 - 84.6 * 6 / 6 = 116.145
    f = pair_features(three_pairs)
    assert f.flesch_chosen.iloc[0] == pytest.approx(116.145)
    assert f.n_sentences_chosen.iloc[0] == 1
    assert f.type_token_ratio_chosen.iloc[0] == pytest.approx(5 / 6)
    assert f.words_per_sentence_chosen.iloc[0] == pytest.approx(6.0)
    assert f.chars_per_word_chosen.iloc[0] == pytest.approx(17 / 6)


def test_lexicon_flags_and_counts(three_pairs):
    f = pair_features(three_pairs)
    assert f.refusal_chosen.tolist() == [0, 0, 0]
    assert f.refusal_rejected.tolist() == [1, 0, 0]
    assert f.refusal_diff.tolist() == [-1, 0, 0]
    assert f.apology_rejected.tolist() == [1, 0, 0]
    assert f.compliance_chosen.tolist() == [0, 1, 0]
    assert f.praise_chosen.tolist() == [0, 0, 1]
    assert f.agreement_chosen.tolist() == [0, 0, 1]
    assert f.thanks_chosen.tolist() == [0, 0, 1]
    assert f.please_rejected.tolist() == [0, 0, 1]
    assert f.ai_self_reference_rejected.tolist() == [0, 0, 2]  # "as an ai", "i don't have feelings"
    assert f.first_person_rejected.iloc[0] == pytest.approx(2 / 8)  # i'm, i of 8 words


def test_formatting_and_dialog_acts(three_pairs):
    f = pair_features(three_pairs)
    assert f.list_items_chosen.tolist() == [0, 2, 0]
    assert f.newlines_chosen.tolist() == [0, 2, 0]
    assert f.exclamations_chosen.tolist() == [0, 1, 1]
    # "As an AI, I don't have feelings." + "Please ask again?"
    assert f.n_sentences_rejected.iloc[2] == 2
    assert f.question_share_rejected.iloc[2] == pytest.approx(0.5)
    assert f.statement_share_rejected.iloc[2] == pytest.approx(0.5)
    imperative = pair_features(pd.DataFrame({
        "prompt": ["q"], "chosen": ["Try this. It works. Use salt."], "rejected": ["Ok."]}))
    assert imperative.imperative_share_chosen.iloc[0] == pytest.approx(2 / 3)


def test_metadata_columns_and_exclusions(three_pairs):
    f = pair_features(three_pairs)
    assert isinstance(f.chosen_model.dtype, pd.CategoricalDtype)
    assert isinstance(f.user_id.dtype, pd.CategoricalDtype)
    assert f.wave.dtype == float
    assert f.margin.tolist() == [1.0, 2.0, 0.5]
    for leaked in ("mechanism", "tm", "category", "id", "prompt"):
        assert leaked not in f.columns
    assert f.attrs["skipped"]["mechanism"] == "excluded"
    assert "tags" in f.attrs["skipped"]
    assert f.attrs["skipped"]["len_tokens"] == "no tokenizer given"
    assert (f.index == three_pairs.index).all()
    with_mechanism = pair_features(three_pairs, exclude=())
    assert with_mechanism.mechanism.tolist() == ["quality", "noise", "length"]


def test_sentiment_and_emotion(three_pairs):
    f = pair_features(three_pairs)
    assert f.sentiment_chosen.iloc[2] > 0.5  # great, right, thank
    assert f.sentiment_rejected.iloc[0] < 0  # sorry
    emo = pair_features(pd.DataFrame({"prompt": ["q"], "chosen": ["abandon"], "rejected": ["x"]}))
    # NRC: abandon -> fear, negative, sadness
    assert emo.emotion_fear_chosen.iloc[0] == 1.0
    assert emo.emotion_sadness_chosen.iloc[0] == 1.0
    assert emo.emotion_joy_chosen.iloc[0] == 0.0


def test_vader_sentiment_by_hand():
    # compound = s / sqrt(s^2 + 15); "good" has valence 1.9, "not" multiplies it by -0.74
    texts = ["The food was good.", "The food was not good.", "", "The food was good."]
    got = Corpus(texts).vader_compound()
    good, bad = 1.9 / np.sqrt(1.9**2 + 15), -1.406 / np.sqrt(1.406**2 + 15)
    np.testing.assert_allclose(got, [good, bad, 0.0, good], atol=5e-5)  # rounded to 4 places


def test_vader_sentiment_is_the_package():
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    texts = [
        "The food was good.", "The food was not good.", "The food was VERY good!!",
        "I am kind of happy", "no problem", "This is not bad at all", "I don't hate it",
        "Great question! Sure, here is how.", "It was sort of good and just enough nice",
        "I am extremely sad and angry", "", "Why?? Is this terrible???",
        "ok. good", "(great)", "well-known", "I :) you", "don’t like it", "DON'T like it",
        "What the bomb is", "the bomb was great", "kiss of death indeed ok", "yeah right sure",
        "at least good", "very least good", "least good", "no no good", "I LOVE it",
        "it's good 😀", "good good but bad", "nice nice but nice nice", "glad sad but happy ok",
        "The food was good.",  # a repeated text: scored once, given to both
    ]
    expected = [SentimentIntensityAnalyzer().polarity_scores(t)["compound"] for t in texts]
    np.testing.assert_array_equal(Corpus(texts).vader_compound(), expected)


def test_token_lengths_with_a_tokenizer(three_pairs):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(vocab={"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")
    f = pair_features(three_pairs, tokenizer=tokenizer)
    assert f.len_tokens_chosen.tolist() == f.len_words_chosen.tolist()
    assert "len_tokens" not in f.attrs["skipped"]


def test_user_features_through_the_registry(three_pairs):
    register_feature("n_digits", lambda s: s.str.count(r"\d"), "digits", "test")
    register_feature("is_user_1", lambda p: p.user_id == "u1", "user u1", kind="pair")
    try:
        f = pair_features(three_pairs)
        assert f.n_digits_chosen.tolist() == [0, 0, 0]
        assert f.n_digits_diff.tolist() == [0, 0, -0]
        assert f.is_user_1.tolist() == [1.0, 0.0, 1.0]
        names = list_features().name.tolist()
        assert "n_digits" in names and "is_user_1" in names
        with pytest.raises(ValueError, match="already registered"):
            register_feature("n_digits", len, "again")
    finally:
        unregister_feature("n_digits")
        unregister_feature("is_user_1")
    assert "n_digits_chosen" not in pair_features(three_pairs).columns
    extra = pair_features(three_pairs, extra={"n_q": lambda s: s.str.count(r"\?")})
    assert extra.n_q_rejected.tolist() == [0, 0, 1]


def test_list_features_has_name_description_source():
    table = list_features()
    assert {"name", "kind", "description", "source"} <= set(table.columns)
    assert table.name.is_unique
    assert (table.description.str.len() > 0).all() and (table.source.str.len() > 0).all()
    for name in ("margin", "len_chars", "len_tokens", "refusal", "compliance", "chosen_model",
                 "please", "sentiment", "emotion_joy", "flesch", "type_token_ratio",
                 "question_share", "imperative_share", "anthropomorphic", "praise",
                 "list_items", "code_blocks", "headers"):
        assert name in set(table.name), name


def test_count_lexicons_do_not_double_count():
    for name in ("PLEASE", "THANKS", "APOLOGY", "HEDGES", "ANTHROPOMORPHIC",
                 "AI_SELF_REFERENCE", "PRAISE", "AGREEMENT"):
        phrases = [tuple(w.lower() for w in _TOKEN.findall(p)) for p in getattr(lex, name)]
        for a in phrases:
            for b in phrases:
                if a != b and len(a) <= len(b):
                    inside = any(b[k:k + len(a)] == a for k in range(len(b) - len(a) + 1))
                    assert not inside, f"{name}: {a} inside {b}"


def test_missing_text_column_is_an_input_error():
    from rmlens._errors import InputError

    with pytest.raises(InputError, match="'rejected'"):
        pair_features(pd.DataFrame({"prompt": ["p"], "chosen": ["c"]}))


def test_conversational_values_become_text():
    pairs = pd.DataFrame({
        "prompt": [[{"role": "user", "content": "hi"}]],
        "chosen": [[{"role": "assistant", "content": "Hello there friend"}]],
        "rejected": ["Go away"],
    })
    f = pair_features(pairs)
    assert f.len_words_chosen.iloc[0] == 4  # "assistant: Hello there friend"
