"""A policy's own samples as a best-of-n pool (``data candidates --policy-model``)."""

import json

import numpy as np
import pandas as pd
import pytest

from conftest import length_pairs, run_cli
from rmlens.backbones import load_policy, prompt_text, sample_responses
from rmlens.data import candidates_from_policy, load_candidates


def test_a_policy_pool_samples_the_held_out_prompts_and_pairs_the_others():
    prompts = [f"question {i}" for i in range(10)]
    calls = []

    def write(batch, n):  # response k of prompt "question i": k + 1 + i % 3 words
        calls.append((list(batch), n))
        return [[" ".join(["w"] * (k + 1 + int(p.split()[1]) % 3)) for k in range(n)]
                for p in batch]  # fmt: skip

    def gold(prompts, responses):  # the gold RM: longer is better
        return np.array([len(r) for r in responses], dtype=float)

    pool, pairs = candidates_from_policy(prompts, write, gold, n_responses=5, holdout=0.3,
                                         seed=2)  # fmt: skip
    assert [n for _, n in calls] == [5, 2] and len(calls[0][0]) == 3 and len(calls[1][0]) == 7
    assert pool["prompt_id"].nunique() == 3 and (pool.groupby("prompt_id").size() == 5).all()
    assert set(pool["prompt"]) == set(calls[0][0])
    assert np.allclose(pool["gold"], pool["response"].str.len())
    assert not set(pool["prompt"]) & set(pairs["prompt"]) and len(pairs) == 7
    assert (pairs["gold_chosen"] > pairs["gold_rejected"]).all()
    assert np.allclose(pairs["margin"], pairs["chosen"].str.len() - pairs["rejected"].str.len())
    assert (pairs["chosen"].str.len() > pairs["rejected"].str.len()).all()  # relabelled
    assert list(pairs.columns) == ["prompt", "chosen", "rejected", "gold_chosen",
                                   "gold_rejected", "margin"]  # fmt: skip


def test_identical_samples_make_no_pair():
    pool, pairs = candidates_from_policy(["a", "b", "c"], lambda b, n: [["same"] * n for _ in b],
                                         lambda p, r: np.zeros(len(r)), n_responses=2,
                                         holdout=0.3)  # fmt: skip
    assert len(pool) == 2 and pairs.empty and "margin" in pairs.columns


def test_samples_are_n_per_prompt_bounded_and_seeded(tiny_causal_dir):
    lm, tok = load_policy(str(tiny_causal_dir))
    assert tok.padding_side == "left"
    text = prompt_text(tok, "Human: hello there\n\nAssistant:")
    assert "hello there" in text and "<|assistant|>" in text[-20:]  # the turn opened
    prompts = ["hello there", [{"role": "user", "content": "what is up"}], "tell me more"]
    first = sample_responses(lm, tok, prompts, 4, max_new_tokens=5, batch_size=8, seed=3)
    again = sample_responses(lm, tok, prompts, 4, max_new_tokens=5, batch_size=8, seed=3)
    other = sample_responses(lm, tok, prompts, 4, max_new_tokens=5, batch_size=8, seed=4)
    assert [len(r) for r in first] == [4, 4, 4] and first == again and first != other
    for responses in first:
        for r in responses:
            assert len(tok(r, add_special_tokens=False)["input_ids"]) <= 5
    assert len({r for rs in first for r in rs}) > 3  # sampled, not one greedy answer



def test_prompts_are_padded_left_whatever_the_callers_tokenizer_says(tiny_causal_dir,
                                                                      monkeypatch):
    import rmlens.backbones._generate as generate

    lm, tok = load_policy(str(tiny_causal_dir))
    tok.padding_side = "right"  # a tokenizer of the caller's, set up for training
    seen, sample = [], generate._sample
    monkeypatch.setattr(generate, "_sample",
                        lambda lm, batch, n, **kw: seen.append(batch) or sample(lm, batch, n, **kw))
    sample_responses(lm, tok, ["hi", "tell me a much longer story"], 2, max_new_tokens=3)
    mask = seen[0]["attention_mask"]
    assert mask[0, 0] == 0 and mask[0, -1] == 1 and mask[1].all()  # the short one padded left


def test_the_shared_prefix_route_samples_as_generate_does(tiny_causal_dir):
    """Each prompt read once and its cache copied to its samples: the same sequences as
    ``generate`` reading it once per sample, under the same seed (left padding included)."""
    import torch

    from rmlens.backbones._generate import _sample

    lm, tok = load_policy(str(tiny_causal_dir))
    texts = [prompt_text(tok, p) for p in ("hi", "tell me a much longer story, please, now")]
    batch = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    assert (batch["attention_mask"] == 0).any()  # one prompt is padded on the left
    sampling = {"do_sample": True, "top_k": 0, "top_p": 1.0, "temperature": 1.0,
                "max_new_tokens": 6, "pad_token_id": tok.pad_token_id, "output_logits": True,
                "return_dict_in_generate": True}  # fmt: skip
    routes = []
    for shared in (True, False):
        torch.manual_seed(0)
        routes.append(_sample(lm, batch, 3, shared_prefix=shared, **sampling))
    shared, plain = routes
    assert shared.sequences.shape == (6, batch["input_ids"].shape[1] + 6)
    assert torch.equal(shared.sequences, plain.sequences)
    for a, b in zip(shared.logits, plain.logits):  # each step's logits, every sequence
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_cli_writes_a_policy_pool_and_its_gold_pairs(tiny_causal_dir, tmp_path):
    data = tmp_path / "pairs.jsonl"
    pairs = length_pairs(24)
    pairs.to_json(data, orient="records", lines=True)
    result = run_cli(["train", "--data", data, "--out", tmp_path / "gold", "--model",
                      tiny_causal_dir, "--epochs", "1", "--max-length", "40", "--batch-size",
                      "4", "--device", "cpu", "--quiet"])  # fmt: skip
    assert result.exit_code == 0, result.output
    out, train = tmp_path / "pool.jsonl", tmp_path / "train.jsonl"
    result = run_cli(["data", "candidates", "--from", data, "--policy-model", tiny_causal_dir,
                      "--gold-rm", tmp_path / "gold", "--responses", "3", "--prompts", "8",
                      "--max-new-tokens", "4", "--holdout", "0.5", "--pairs-out", train,
                      "--out", out])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "precision fp32" in result.stderr
    pool = load_candidates(out)
    assert pool["prompt_id"].nunique() == 4 and len(pool) == 12
    assert set(pool["prompt"]) <= set(pairs["prompt"])
    gold = pd.read_json(train, lines=True)
    assert 0 < len(gold) <= 4 and (gold["gold_chosen"] >= gold["gold_rejected"]).all()
    assert not set(gold["prompt"]) & set(pool["prompt"])
    assert json.loads(out.read_text().splitlines()[0])["response"] != ""


@pytest.mark.parametrize("flags", [["--top-p", "0.9"], ["--precision", "bf16"]])
def test_sampling_options_need_a_policy(tmp_path, flags):
    data = tmp_path / "pairs.jsonl"
    length_pairs(8).to_json(data, orient="records", lines=True)
    result = run_cli(["data", "candidates", "--from", data, "--gold-rm", "x", "--out",
                      tmp_path / "o.jsonl", *flags])  # fmt: skip
    assert result.exit_code == 2 and "apply to --policy-model" in result.stderr


def test_a_wrong_gold_rm_fails_before_sampling(tiny_causal_dir, tmp_path):
    data = tmp_path / "pairs.jsonl"
    length_pairs(8).to_json(data, orient="records", lines=True)
    result = run_cli(["data", "candidates", "--from", data, "--policy-model", tiny_causal_dir,
                      "--gold-rm", tmp_path / "missing", "--out", tmp_path / "o.jsonl"])
    assert result.exit_code == 2 and "missing" in result.stderr
    assert "sampling" not in result.stderr
    result = run_cli(["data", "candidates", "--from", data, "--policy-model", tiny_causal_dir,
                      "--gold-rm", tmp_path / "missing", "--precision", "fp16", "--out",
                      tmp_path / "o.jsonl"])  # fmt: skip
    assert result.exit_code == 2 and "--precision must be" in result.stderr
