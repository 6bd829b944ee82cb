"""Formatting and truncation as explicit choices (DESIGN.md section 2): chat, raw (TRL's text
path, id for id), pair; auto's pick; the format recorded and read back; cache keys; what
truncation cuts, counted and warned about; the default max_length; RewardBench scores only
for RewardBench's subsets; a TRL-trained RM scored by rmlens as TRL tokenizes."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from rmlens._errors import InputError, RmlensWarning
from rmlens.backbones import featurize, load_backbone
from rmlens.backbones._cache import EmbeddingCache
from rmlens.backbones._formats import resolve_format, truncation_summary
from rmlens.backbones._tokenize import encode_pair, encode_pair_text, pairs_truncation
from rmlens.data._schema import to_text
from rmlens.evaluation import evaluate
from rmlens.evaluation._metrics import pair_metrics
from rmlens.hub import SequenceClassifierRM, load_rm
from rmlens.rewards import ExplicitRMTrainer, FrozenHeadTrainer, HeadConfig, TrainConfig
from rmlens.rewards._base_model import load_causal_lm
from rmlens.rewards._packing import make_example

BIG = 1 << 20
CONVERSATION = [{"role": "user", "content": "what is the sun ?"},
                {"role": "assistant", "content": "it is big ."},
                {"role": "user", "content": "and the moon ?"}]  # fmt: skip
CASES = [  # (prompt, response): text, an HH-RLHF-free conversation, EOS already at the end
    ("what is the best thing ever ? ", "the sun is great ."),
    ("how can i help", " the dog ?"),
    (CONVERSATION, "it is small ."),
    ("who is the cat ?", "the cat is good</s>"),
]


@pytest.fixture(scope="module")
def causal_tok(tiny_causal_dir):
    return AutoTokenizer.from_pretrained(tiny_causal_dir)


def plain(tokenizer):
    """A copy of ``tokenizer`` without a chat template."""
    tok = AutoTokenizer.from_pretrained(tokenizer.name_or_path)
    tok.chat_template = None
    return tok


def trl_text_ids(tokenizer, prompt, response) -> list[int]:
    """What TRL 1.16's RewardTrainer does with a non-conversational example: add_eos to the
    response, then _tokenize(processing_class, prompt + response)."""
    from trl.data_utils import _tokenize

    eos = tokenizer.eos_token
    response = to_text(response)
    response = response if response.endswith(eos) else response + eos
    return _tokenize(tokenizer, to_text(prompt) + response)["input_ids"]


# -- raw, chat, pair ------------------------------------------------------------------------
@pytest.mark.parametrize("prompt, response", CASES)
def test_raw_ids_equal_trl_tokenize(causal_tok, prompt, response):
    pytest.importorskip("trl", reason="trl is needed to compare with TRL's own tokenization")
    ids = encode_pair_text(causal_tok, prompt, response, BIG, format="raw")
    assert ids == trl_text_ids(causal_tok, prompt, response)
    assert ids[-1] == causal_tok.eos_token_id and ids.count(causal_tok.eos_token_id) == 1


def test_chat_ids_unchanged_and_equal_trl_conversational(causal_tok):
    from rmlens.backbones._tokenize import _messages

    for prompt, response in CASES[:3]:
        text = causal_tok.apply_chat_template(_messages(prompt, response), tokenize=False)
        before = causal_tok(text, add_special_tokens=False)["input_ids"]  # rmlens until now
        assert encode_pair_text(causal_tok, prompt, response, BIG, format="chat") == before
        assert encode_pair_text(causal_tok, prompt, response, BIG) == before  # the old default
        assert before.count(causal_tok.bos_token_id) == 1  # never a second BOS
    pytest.importorskip("trl", reason="trl is needed to compare with TRL's own tokenization")
    from trl.data_utils import _tokenize

    messages = _messages(CONVERSATION, "it is small .")
    assert encode_pair_text(causal_tok, CONVERSATION, "it is small .", BIG, format="chat") == \
        _tokenize(causal_tok, messages)["input_ids"]  # fmt: skip


def test_chat_without_a_template_is_refused(causal_tok):
    with pytest.raises(InputError, match="no chat template"):
        resolve_format("chat", plain(causal_tok), "causal")
    with pytest.raises(InputError, match="no chat template"):
        encode_pair_text(plain(causal_tok), "q", "a", 16, format="chat")
    with pytest.raises(InputError, match="`format` must be one of"):
        resolve_format("text", causal_tok, "causal")


def test_auto_picks_chat_raw_or_pair(tiny_causal_dir, tiny_encoder_dir, causal_tok):
    assert resolve_format("auto", causal_tok, "causal") == "chat"
    assert resolve_format("auto", plain(causal_tok), "causal") == "raw"
    encoder = load_backbone(str(tiny_encoder_dir))
    assert encoder.format == "pair"
    ids = encode_pair_text(encoder.tokenizer, "the cat", "is good", BIG, format="pair")
    assert encoder.tokenizer.convert_ids_to_tokens(ids) == [
        "[CLS]", "the", "cat", "[SEP]", "is", "good", "[SEP]"]  # fmt: skip
    assert load_backbone(str(tiny_causal_dir)).format == "chat"
    assert load_backbone(str(tiny_causal_dir), format="raw").format == "raw"
    assert load_causal_lm(str(tiny_causal_dir), format="raw").format == "raw"
    with pytest.raises(InputError, match="no chat template"):
        load_backbone(str(tiny_encoder_dir), format="chat")


def test_auto_of_a_sequence_classifier(tiny_causal_dir, tiny_encoder_dir, causal_tok):
    from transformers import BertForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(tiny_causal_dir, num_labels=1)
    assert SequenceClassifierRM(model, causal_tok).format == "chat"
    assert SequenceClassifierRM(model, plain(causal_tok)).format == "raw"
    model.config.rmlens_format = "raw"  # what rmlens's exports write into config.json
    assert SequenceClassifierRM(model, causal_tok).format == "raw"
    assert SequenceClassifierRM(model, causal_tok, format="chat").format == "chat"
    assert SequenceClassifierRM(model, causal_tok).max_length == 256  # the model's limit
    bert = BertForSequenceClassification.from_pretrained(tiny_encoder_dir, num_labels=1)
    tok = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    assert SequenceClassifierRM(bert, tok).format == "pair"


def test_packed_raw_examples_keep_each_texts_ids(causal_tok):
    """In raw mode the prompt's last word and the response's first merge ("is" + "it" ->
    "isit", one unknown token): the packed example keeps each full text's ids and shares
    only their common prefix; the response mask starts at the merged token."""
    prompt, responses = "what is", ["it good", "it bad", " the sun"]
    ex = make_example(causal_tok, prompt, responses, BIG, format="raw")
    assert ex.seqs == [trl_text_ids(causal_tok, prompt, r) for r in responses]
    assert ex.shared == 1  # "what": "is" merged into two of the responses
    prompt_ids = causal_tok(prompt)["input_ids"]
    assert ex.seqs[2][: len(prompt_ids)] == prompt_ids
    assert ex.response[2] == [False] * len(prompt_ids) + [True] * 3  # the, sun, </s>
    assert ex.response[0] == [False, True, True, True]  # isit, good, </s>


# -- recorded and read back -----------------------------------------------------------------
PAIRS = pd.DataFrame({
    "id": [f"p{i}" for i in range(8)],
    "prompt": ["what is the best thing ? ", "how can i help ? ", "why is the sun big ? ",
               "who is the cat ? "] * 2,
    "chosen": ["the sun is great .", "sure , i can help .", "the sun is big .",
               "the cat is good ."] * 2,
    "rejected": ["bad", "no", "i hate the moon .", "the dog is bad"] * 2,
})  # fmt: skip


def test_format_saved_in_rm_config_and_read_back(tiny_causal_dir, tmp_path):
    """A frozen head trained on raw text saves ``format`` raw and, loaded, scores raw text
    (the tokenizer has a chat template: auto would say chat)."""
    trainer = FrozenHeadTrainer(HeadConfig(epochs=5, patience=0), model=str(tiny_causal_dir),
                                format="raw", cache_dir=False)  # fmt: skip
    rm = trainer.fit(PAIRS, quiet=True).rm_
    assert trainer.format_ == rm.format == "raw"
    rm.save(tmp_path / "rm")
    saved = json.loads((tmp_path / "rm" / "rm_config.json").read_text())
    assert saved["format"] == "raw"
    back = load_rm(tmp_path / "rm", device="cpu", cache_dir=False)
    assert back.format == "raw"
    np.testing.assert_allclose(back.score(PAIRS.prompt, PAIRS.chosen),
                               rm.score(PAIRS.prompt, PAIRS.chosen), atol=1e-5)  # fmt: skip
    x = trainer.features_.chosen[:1]  # raw features, not chat ones
    assert rm.head.score_features(x)[0] == pytest.approx(
        back.score(PAIRS.prompt[:1], PAIRS.chosen[:1])[0], abs=1e-5)  # fmt: skip


def test_tuned_rm_records_its_format_and_scores_packed_alike(tiny_causal_dir, tmp_path):
    cfg = TrainConfig(model=str(tiny_causal_dir), device="cpu", epochs=1, batch_size=4,
                      format="raw")  # fmt: skip
    trainer = ExplicitRMTrainer(cfg).fit(PAIRS, quiet=True)
    assert trainer.format_ == trainer.rm_.format == "raw"
    trainer.rm_.save(tmp_path / "rm")
    saved = json.loads((tmp_path / "rm" / "rm_config.json").read_text())
    assert saved["train_config"]["format"] == "raw"  # resolved, never auto
    back = load_rm(tmp_path / "rm", device="cpu")
    assert back.format == "raw"
    r_c, r_r = back.score_pairs(PAIRS)  # packed: prompt shared across responses
    np.testing.assert_allclose(r_c, back.score(PAIRS.prompt, PAIRS.chosen), atol=1e-5)
    np.testing.assert_allclose(r_r, trainer.rm_.score(PAIRS.prompt, PAIRS.rejected), atol=1e-5)


def test_cache_keys_differ_by_format(tmp_path, tiny_causal_dir):
    keys = dict(identity="m", pooling="last", max_length=8)
    chat = EmbeddingCache(tmp_path, **keys, format="chat")
    raw = EmbeddingCache(tmp_path, **keys, format="raw")
    assert chat.dir != raw.dir
    bb = load_backbone(str(tiny_causal_dir))
    first = featurize(bb, PAIRS[:2], cache_dir=tmp_path, quiet=True)
    assert first.format == "chat"
    other = featurize(bb, PAIRS[:2], cache_dir=tmp_path, quiet=True, format="raw")
    assert other.n_encoded == 4  # nothing of the chat features reused
    assert not np.allclose(first.chosen, other.chosen)


# -- truncation -----------------------------------------------------------------------------
def long_pairs() -> pd.DataFrame:
    """Pair 0: chosen 30 raw tokens (2 prompt + 27 words + EOS), rejected 4; pair 1: 4 and
    4."""
    words = " ".join(["the"] * 27)
    return pd.DataFrame({"id": ["long", "short"], "prompt": ["what is", "who is"],
                         "chosen": [" " + words, " the cat"],
                         "rejected": [" yes", " a dog"]})  # fmt: skip


def test_truncation_counted_by_hand(causal_tok, tiny_causal_dir):
    pairs = long_pairs()
    ids, full = encode_pair(causal_tok, pairs.prompt[0], pairs.chosen[0], 16, format="raw")
    assert (len(ids), full) == (16, 30) and ids[-1] == causal_tok.eos_token_id  # left cut
    expected = {"max_length": 16, "sequences_cut": 1, "pairs_cut": 1,
                "tokens_cut_median": 14.0, "tokens_cut_max": 14}  # fmt: skip
    assert pairs_truncation(causal_tok, pairs, 16, format="raw") == expected
    assert truncation_summary(16, [30, 4], [40, 4])["tokens_cut_median"] == 19.0
    bb = load_backbone(str(tiny_causal_dir), max_length=16, format="raw")
    assert featurize(bb, pairs, cache_dir=False, quiet=True).truncation == expected
    trainer = FrozenHeadTrainer(HeadConfig(epochs=2, patience=0), backbone=bb, cache_dir=False)
    with pytest.warns(RmlensWarning, match=r"^1 of 2 pairs cut to `max_length` 16: 1 "
                      r"sequences lost a median 14 and at most 14 tokens"):  # fmt: skip
        trainer.fit(pairs, quiet=True)
    assert trainer.truncation_ == expected
    with pytest.warns(RmlensWarning, match="1 of 2 pairs cut"):
        metrics = evaluate(pairs, rm=trainer.rm_, probes="none", quiet=True)
    assert metrics["truncation"] == expected
    assert metrics["config"]["format"] == metrics["rm"]["format"] == "raw"
    assert metrics["dropped_truncation"]["count"] == 0


def test_fine_tuned_training_counts_truncation(tiny_causal_dir, tmp_path):
    from rmlens.hub import train

    cfg = TrainConfig(model=str(tiny_causal_dir), device="cpu", epochs=1, batch_size=2,
                      max_length=16, format="raw")  # fmt: skip
    with pytest.warns(RmlensWarning, match="1 of 2 pairs cut to `max_length` 16"):
        train(long_pairs(), cfg, out=tmp_path / "rm", quiet=True)
    record = json.loads((tmp_path / "rm" / "train.json").read_text())
    assert record["format"] == "raw"
    assert record["truncation"]["tokens_cut_max"] == 14


def test_default_max_length_is_the_models_limit(tiny_causal_dir, tiny_encoder_dir):
    assert load_backbone(str(tiny_causal_dir)).max_length == 256  # max_position_embeddings
    assert load_causal_lm(str(tiny_causal_dir)).max_length == 256
    assert load_backbone(str(tiny_encoder_dir)).max_length == 128


# -- RewardBench ----------------------------------------------------------------------------
def test_rewardbench_only_for_rewardbench_subsets():
    rc, rr = np.array([1.0, -1.0, 1.0, 1.0]), np.zeros(4)
    mine = pair_metrics(rc, rr, groups={"subset": pd.Series(["a", "a", "b", "b"])})
    assert "rewardbench" not in mine and set(mine["by"]["subset"]) == {"a", "b"}  # not RB's
    subset = pd.Series(["hep-go", "hep-go", "donotanswer", "mine"])
    rb = pair_metrics(rc, rr, groups={"subset": subset})["rewardbench"]
    assert rb["sections"] == {
        "Reasoning": {"accuracy": 0.5, "n": 2, "subsets": ["hep-go"]},
        "Safety": {"accuracy": 1.0, "n": 1, "subsets": ["donotanswer"]},
    }
    assert rb["score"] == pytest.approx(0.75) and rb["n_sections"] == 2
    assert rb["other_subsets"] == {"mine": {"accuracy": 1.0, "n": 1}}


# -- TRL round trip -------------------------------------------------------------------------
TRL_PROMPTS = ["what is the best thing ever ?", "how can i help the dog ?",
               "why is the sun big ?", "who is the cat ?"] * 2  # fmt: skip
TRL_GOOD = ["the sun is great .", "give the dog water .", "the sun is big .",
            "the cat is good ."] * 2  # fmt: skip
TRL_BAD = ["bad", "no , never .", "i hate the moon .", "the dog is bad"] * 2


def trl_rows(raw: bool) -> dict:
    """TRL's training data: text (a prompt ending with a space), or conversations."""
    if raw:
        return {"prompt": [p + " " for p in TRL_PROMPTS], "chosen": TRL_GOOD,
                "rejected": TRL_BAD}  # fmt: skip
    return {
        "prompt": [[{"role": "user", "content": p}] for p in TRL_PROMPTS],
        "chosen": [[{"role": "assistant", "content": r}] for r in TRL_GOOD],
        "rejected": [[{"role": "assistant", "content": r}] for r in TRL_BAD],
    }


def trl_reward_model(folder, model_dir, dataset, raw: bool, *, pad_is_eos: bool = False):
    """A TRL RewardTrainer run of 2 steps on the tiny causal LM as a sequence classifier,
    saved in ``folder``; returns the trainer (its train_dataset holds TRL's token ids).
    ``pad_is_eos``: the pad token is the EOS that ends every sequence, as TRL sets it for
    SmolLM2 (``<|im_end|>``), so transformers reads the token before it."""
    from trl import RewardConfig, RewardTrainer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=1)
    if pad_is_eos:
        tok.pad_token = tok.eos_token
        model.config.pad_token_id = tok.eos_token_id
    args = RewardConfig(output_dir=str(folder / "trl"), max_steps=2, report_to=[],
                        per_device_train_batch_size=4, learning_rate=1e-2, logging_steps=1,
                        save_strategy="no", use_cpu=True, dataset_num_proc=None)  # fmt: skip
    trainer = RewardTrainer(model=model, args=args, train_dataset=dataset, processing_class=tok)
    trainer.train()
    if raw:  # the tiny tokenizer has a chat template: say the RM reads raw text
        trainer.model.config.rmlens_format = "raw"
    trainer.save_model(str(folder))
    tok.save_pretrained(str(folder))
    return trainer


@pytest.mark.filterwarnings("ignore::FutureWarning")  # transformers' own, inside TRL
@pytest.mark.parametrize("raw", [False, True], ids=["conversational", "raw-text"])
def test_trl_reward_model_scored_by_rmlens_as_trl_tokenizes(tiny_causal_dir, tmp_path, raw):
    """rmlens loads a TRL-trained RM and gives the logits that
    AutoModelForSequenceClassification gives on TRL's own token ids. Raw text: the folder's
    config.json says ``rmlens_format`` raw (as rmlens's exports do), which load_rm reads."""
    pytest.importorskip("trl", reason="the TRL round trip needs trl (pip install trl)")
    from datasets import Dataset

    rows = trl_rows(raw)
    folder = tmp_path / "rm"
    trainer = trl_reward_model(folder, tiny_causal_dir, Dataset.from_dict(rows), raw)
    rm = load_rm(folder, device="cpu")
    assert rm.format == ("raw" if raw else "chat")
    ours = rm.score(rows["prompt"], rows["chosen"])
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    expected = []
    assert len(trainer.train_dataset) == len(TRL_PROMPTS)  # none filtered out by TRL
    for i, example in enumerate(trainer.train_dataset):
        ids = example["chosen_ids"]  # TRL's own tokenization
        assert encode_pair_text(tok, rows["prompt"][i], rows["chosen"][i], BIG,
                                format=rm.format) == list(ids)  # fmt: skip
        with torch.inference_mode():
            expected.append(model(input_ids=torch.tensor([ids])).logits[0, 0].item())
    np.testing.assert_allclose(ours, expected, atol=1e-5)


@pytest.mark.filterwarnings("ignore::FutureWarning")  # transformers' own, inside TRL
@pytest.mark.parametrize("text", [False, True], ids=["conversational", "text"])
def test_one_checkpoint_audit_reads_a_trl_rm_as_transformers_does(tiny_causal_dir, tmp_path,
                                                                  text):
    """A TRL RM whose pad is its EOS (every sequence ends with it): the one-checkpoint audit
    reads the token transformers pools (the one before that EOS), in the format ``rmlens
    score`` reads (auto guesses chat, with the same warning), and its rewards are
    transformers' own on TRL's token ids, to 1e-5."""
    pytest.importorskip("trl", reason="the TRL round trip needs trl (pip install trl)")
    from datasets import Dataset

    from rmlens.memorization import AuditConfig, audit_rm

    rows = trl_rows(text)
    folder = tmp_path / "rm"
    trainer = trl_reward_model(folder, tiny_causal_dir, Dataset.from_dict(rows), False,
                               pad_is_eos=True)  # TRL records no format  # fmt: skip
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    eos = AutoTokenizer.from_pretrained(folder).eos_token_id
    assert model.config.pad_token_id == eos
    expected = {"chosen": [], "rejected": []}
    for example in trainer.train_dataset:  # TRL's own ids, read by transformers' own class
        for side in expected:
            ids = list(example[f"{side}_ids"])
            assert ids[-1] == eos  # the pad ends every sequence: the pooled token is before it
            with torch.inference_mode():
                expected[side].append(model(input_ids=torch.tensor([ids])).logits[0, 0].item())
    pairs = pd.DataFrame({"id": [f"p{i}" for i in range(len(TRL_PROMPTS))], **rows})
    guess = "`format` auto: .* guessed chat"
    with pytest.warns(RmlensWarning, match=guess) as scored:
        SequenceClassifierRM(model, AutoTokenizer.from_pretrained(folder)).score(["q"], ["a"])
    with pytest.warns(RmlensWarning, match=guess) as audited:
        audit_rm(pairs, folder, AuditConfig(max_length=64), out=tmp_path / "auto",
                 device="cpu", quiet=True)  # fmt: skip
    said = {str(w.message) for w in audited if "guessed chat" in str(w.message)}
    assert said == {str(w.message) for w in scored}  # one warning, word for word
    config = AuditConfig(max_length=64, format="raw" if text else "chat")
    audit_rm(pairs, folder, config, out=tmp_path / "audit", device="cpu", quiet=True)
    scores = pd.read_parquet(tmp_path / "audit" / "runs" / "000" / "scores.parquet")
    scores = scores.set_index("id").loc[pairs.id]
    np.testing.assert_allclose(scores.r_chosen, expected["chosen"], atol=1e-5)
    np.testing.assert_allclose(scores.r_rejected, expected["rejected"], atol=1e-5)
    assert json.loads((tmp_path / "audit" / "config.json").read_text())["format"] == (
        "raw" if text else "chat")
