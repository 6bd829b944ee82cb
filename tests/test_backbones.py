import json
import re

import numpy as np
import pandas as pd
import pytest
import torch

from rmlens.backbones import EmbeddingCache, featurize, load_backbone
from rmlens.backbones._featurize import encode_ids, pool
from rmlens.backbones._tokenize import encode_pair_text

PAIRS = pd.DataFrame(
    {
        "id": ["a", "b", "c", "d"],
        "prompt": [
            "what is the best thing ever ?",
            "how can i help the dog ?",
            "why is the sun big ?",
            "who is the cat ?",
        ],
        "chosen": [
            "the sun is great .",
            "please give the dog water .",
            "the sun is big .",
            "the cat is good",
        ],
        "rejected": [
            "bad",
            "no , never .",
            "i hate the moon and the sun and the dog .",
            "the dog is bad",
        ],
    }
)


@pytest.fixture(scope="module", params=["encoder", "causal"])
def backbone(request, tiny_encoder_dir, tiny_causal_dir):
    path = tiny_encoder_dir if request.param == "encoder" else tiny_causal_dir
    return load_backbone(str(path), max_length=48)


def test_kind_and_pooling(backbone):
    assert backbone.pooling == ("last" if backbone.kind == "causal" else "mean")
    assert backbone.has_chat_template == (backbone.kind == "causal")


def test_chat_template_bos_not_duplicated(tiny_causal_dir):
    bb = load_backbone(str(tiny_causal_dir))
    ids = encode_pair_text(bb.tokenizer, "what is the sun ?", "the sun is big", bb.max_length)
    assert ids.count(bb.tokenizer.bos_token_id) == 1
    assert ids[0] == bb.tokenizer.bos_token_id and ids[-1] == bb.tokenizer.eos_token_id


def test_encoder_pair_encoding_and_left_truncation(tiny_encoder_dir):
    bb = load_backbone(str(tiny_encoder_dir))
    tok = bb.tokenizer
    prompt = " ".join(["the dog"] * 30)
    ids = encode_pair_text(tok, prompt + " cat", "yes sure", 12)
    assert len(ids) == 12
    words = tok.convert_ids_to_tokens(ids)
    assert words[0] == "[CLS]" and words[-3:] == ["yes", "sure", "[SEP]"]
    assert words[-5] == "cat"  # the end of the prompt is kept, its start cut


def test_truncation_that_erases_a_pair_is_reported(tiny_encoder_dir):
    bb = load_backbone(str(tiny_encoder_dir), max_length=6)
    pairs = pd.DataFrame(
        {
            "id": ["x", "y"],
            "prompt": ["the", "the"],
            "chosen": ["the cat is good and big", "yes"],
            "rejected": ["the cat is good and small", "no"],
        }
    )
    f = featurize(bb, pairs, cache_dir=False, quiet=True)
    assert f.kept.tolist() == [False, True]


def test_scores_do_not_depend_on_batch_or_padding(backbone):
    tok, n = backbone.tokenizer, backbone.max_length
    seqs = [encode_pair_text(tok, p, c, n) for p, c in zip(PAIRS.prompt, PAIRS.chosen)]
    seqs += [encode_pair_text(tok, p, r, n) for p, r in zip(PAIRS.prompt, PAIRS.rejected)]
    one = encode_ids(backbone, seqs, batch_size=1, quiet=True)
    for bs in (3, 8):
        for side in ("right", "left"):
            other = encode_ids(backbone, seqs, batch_size=bs, side=side, quiet=True)
            np.testing.assert_allclose(other, one, atol=2e-5)


def test_last_token_from_mask_when_pad_is_eos():
    hidden = torch.arange(2 * 4 * 1, dtype=torch.float32).reshape(2, 4, 1)
    right = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    left = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    assert pool(hidden, right, "last").flatten().tolist() == [1.0, 7.0]
    assert pool(hidden, left, "last").flatten().tolist() == [3.0, 7.0]
    assert pool(hidden, right, "mean").flatten().tolist() == [0.5, 5.5]


def test_featurize_cache_encodes_each_text_once(backbone, tmp_path):
    pairs = pd.concat([PAIRS, PAIRS.assign(id=PAIRS.id + "2")], ignore_index=True)
    first = featurize(backbone, pairs, cache_dir=tmp_path, quiet=True)
    assert first.n_encoded == 8  # 16 texts, 8 unique
    second = featurize(backbone, pairs, cache_dir=tmp_path, quiet=True)
    assert second.n_encoded == 0
    np.testing.assert_allclose(second.chosen, first.chosen, atol=1e-6)
    np.testing.assert_allclose(first.chosen[:4], first.chosen[4:])
    more = pd.concat(
        [
            pairs,
            pd.DataFrame(
                {"id": ["z"], "prompt": ["the moon ?"], "chosen": ["red"], "rejected": ["blue"]}
            ),
        ]
    )
    assert featurize(backbone, more, cache_dir=tmp_path, quiet=True).n_encoded == 2


def test_cache_ignores_a_shard_without_keys(tmp_path):
    cache = EmbeddingCache(tmp_path, identity="m", pooling="mean", max_length=8)
    cache.put([b"k1"], np.ones((1, 3)))
    (cache.dir / "broken.npy").write_bytes(b"half")
    fresh = EmbeddingCache(tmp_path, identity="m", pooling="mean", max_length=8)
    assert b"k1" in fresh and b"k2" not in fresh
    np.testing.assert_array_equal(fresh.get([b"k1"]), np.ones((1, 3)))
    other = EmbeddingCache(tmp_path, identity="m", pooling="mean", max_length=16)
    assert b"k1" not in other


def test_unknown_model_is_input_error():
    from rmlens._errors import InputError

    with pytest.raises(InputError, match="not a preset"):
        load_backbone("/nonexistent/model/dir")


@pytest.mark.parametrize(
    "model, said",
    [
        ("./no/such/model", "not a preset (minilm, smollm2-135m) and no such local file or "
                            "folder"),
        ("someone/no-such-model", "not a preset (minilm, smollm2-135m) nor a local path; as a "
                                  "hub id it could not be reached (offline, and not in the "
                                  "local cache)"),
        ("EMPTY", "holds no model that transformers loads"),
    ],
)
def test_a_model_that_cannot_be_loaded_says_what_was_looked_for(
    model, said, tmp_path, monkeypatch, capsys
):
    """In rmlens's words (preset names, a missing local path, an unreachable hub id), never
    huggingface_hub's; on the command line as one line naming --model, exit 2."""
    from rmlens._errors import InputError
    from rmlens.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr("transformers.utils.hub.is_offline_mode", lambda: True, raising=False)
    if model == "EMPTY":
        model = str(tmp_path / "empty")
        (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=re.escape(said)) as err:
        load_backbone(model)
    assert str(err.value).startswith(f"`model` '{model}': ")
    assert "repo_type" not in str(err.value) and "huggingface.co" not in str(err.value)
    data = tmp_path / "pairs.jsonl"
    rows = [{"prompt": f"q{i}", "chosen": f"good {i}", "rejected": f"bad {i}",
             "user_id": f"u{i % 5}"} for i in range(10)]  # fmt: skip
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(["memorize", "--data", str(data), "--out", str(tmp_path / "o"), "--model", model,
                 "--quiet", "--no-report"])  # fmt: skip
    stderr = capsys.readouterr().err
    assert code == 2 and stderr.count("\n") == 1, stderr
    assert stderr.startswith(f"error: --model '{model}': ") and said in stderr


def test_hh_transcript_prompt_becomes_chat_turns(tiny_causal_dir, tiny_encoder_dir):
    from rmlens.backbones._tokenize import prompt_messages

    transcript = (
        "\n\nHuman: what is the sun ?\n\nAssistant: the sun is big .\n\nHuman: why ?"
        "\n\nAssistant:"
    )
    turns = [
        {"role": "user", "content": "what is the sun ?"},
        {"role": "assistant", "content": "the sun is big ."},
        {"role": "user", "content": "why ?"},
    ]
    assert prompt_messages(transcript) == turns
    assert prompt_messages("Human resources ?") == [
        {"role": "user", "content": "Human resources ?"}
    ]
    causal = load_backbone(str(tiny_causal_dir))
    assert encode_pair_text(causal.tokenizer, transcript, "good", 64) == encode_pair_text(
        causal.tokenizer, turns, "good", 64
    )
    encoder = load_backbone(str(tiny_encoder_dir))  # no chat template: the text as it is
    assert encode_pair_text(encoder.tokenizer, transcript, "good", 64) != encode_pair_text(
        encoder.tokenizer, turns, "good", 64
    )


def test_frozen_audit_with_a_causal_lm(tiny_causal_dir, tmp_path):
    # --model <a local causal LM> in the frozen mode: last-real-token features, one head a run
    from rmlens.memorization import AuditConfig, audit
    from rmlens.rewards import FrozenHeadTrainer

    pairs = pd.concat(
        [PAIRS.assign(id=PAIRS.id + str(k), user_id=f"u{k}") for k in range(4)],
        ignore_index=True,
    )
    trainer = FrozenHeadTrainer(model=str(tiny_causal_dir), cache_dir=tmp_path / "cache")
    table = audit(pairs, AuditConfig(runs=4, folds=4, n_boot=0), out=tmp_path / "exp",
                  trainer=trainer, quiet=True)
    assert trainer.backbone_.pooling == "last" and trainer.features_.chosen.shape == (16, 32)
    assert len(table) == 16 and table.tm.notna().all() and table.tg.notna().all()


class StopsAfter:
    """A model that raises on its call number ``after + 1``: a crash mid-encoding."""

    def __init__(self, model, after: int):
        self.model, self.config, self.after, self.calls = model, model.config, after, 0

    def parameters(self):
        return self.model.parameters()

    def __call__(self, **kw):
        self.calls += 1
        if self.calls > self.after:
            raise RuntimeError("killed")
        return self.model(**kw)


def test_an_interrupted_encoding_resumes_where_it_stopped(tiny_encoder_dir, tmp_path,
                                                          monkeypatch):  # fmt: skip
    """Shards are written every SHARD_TEXTS texts: after a crash the rerun encodes only the
    texts not cached yet, in the batches they would have run in, and every vector equals an
    uninterrupted run's bit for bit."""
    import rmlens.backbones._featurize as featurize_module
    from rmlens.backbones._cache import ids_key

    rng = np.random.default_rng(0)
    vocab = ["the", "cat", "dog", "is", "good", "bad", "sun", "moon", "big", "small", "red"]
    pairs = pd.DataFrame({side: [" ".join(rng.choice(vocab, rng.integers(1, 12)))
                                 for _ in range(15)] for side in ("prompt", "chosen", "rejected")})
    backbone = load_backbone(str(tiny_encoder_dir), max_length=24)
    whole = featurize(backbone, pairs, cache_dir=tmp_path / "whole", batch_size=2, quiet=True)
    assert len(list((tmp_path / "whole").rglob("*.keys.npy"))) == 1  # 30 texts: one shard
    monkeypatch.setattr(featurize_module, "SHARD_TEXTS", 4)  # a shard every 2 batches of 2
    model = backbone.model
    backbone.model = StopsAfter(model, after=5)
    with pytest.raises(RuntimeError, match="killed"):
        featurize(backbone, pairs, cache_dir=tmp_path / "cut", batch_size=2, quiet=True)
    assert len(list((tmp_path / "cut").rglob("*.keys.npy"))) == 2  # batch 5 was not stored
    backbone.model = model
    seqs = [encode_pair_text(backbone.tokenizer, p, r, 24, format=backbone.format)
            for side in ("chosen", "rejected") for p, r in zip(pairs.prompt, pairs[side])]
    cache = EmbeddingCache(tmp_path / "cut", identity=backbone.identity,
                           pooling=backbone.pooling, max_length=24, format=backbone.format)
    cached = {ids_key(s) for s in seqs if ids_key(s) in cache}
    assert len(cached) == 8
    encoded, original = [], featurize_module.encode_ids

    def recording(bb, ids, **kw):
        encoded.extend(ids_key(s) for s in ids)
        return original(bb, ids, **kw)

    monkeypatch.setattr(featurize_module, "encode_ids", recording)
    resumed = featurize(backbone, pairs, cache_dir=tmp_path / "cut", batch_size=2, quiet=True)
    assert resumed.n_encoded == whole.n_encoded - 8 == len(encoded)
    assert set(encoded) == {ids_key(s) for s in seqs} - cached  # only what was missing
    np.testing.assert_array_equal(resumed.chosen, whole.chosen)  # bit for bit
    np.testing.assert_array_equal(resumed.rejected, whole.rejected)
    again = featurize(backbone, pairs, cache_dir=tmp_path / "cut", batch_size=2, quiet=True)
    assert again.n_encoded == 0 and np.array_equal(again.chosen, whole.chosen)


def test_the_embedding_and_model_caches_share_one_root(monkeypatch, tmp_path):
    """What README.md says: features under ``embeddings/``, converted models under
    ``models/``, both under ``$RMLENS_CACHE`` (``~`` expanded), else ``~/.cache/rmlens``."""
    from rmlens.backbones import _cache, _gguf

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RMLENS_CACHE", "~/elsewhere")
    assert _cache.default_cache_dir() == tmp_path / "elsewhere" / "embeddings"
    assert _gguf.default_cache_dir() == tmp_path / "elsewhere"
    monkeypatch.delenv("RMLENS_CACHE")
    assert _cache.default_cache_dir() == tmp_path / ".cache" / "rmlens" / "embeddings"
