"""Vocabulary sweeps: the cached route equals scoring each formatted candidate separately."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rmlens.backbones._tokenize import encode_pair_text
from rmlens.tokens import HeadScorer, ImplicitScorer, SeqClsScorer, sweep_prompt
from rmlens.tokens._candidates import (
    build_candidates,
    format_ids,
    shared_prefix,
    special_token_ids,
    split_candidates,
)
from rmlens.tokens._sweep import rank_scores, rescore_extremes, score_sequences
from rmlens.tokens._tiny import tiny_causal_lm, tiny_seq_cls, tiny_tokenizer

PROMPT = "What, in one word, is the best thing ever?"


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models: threads only add contention on a shared 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def lm(tok):
    return tiny_causal_lm(tok, seed=0)


@pytest.fixture(scope="module")
def head():
    gen = torch.Generator().manual_seed(1)
    return torch.randn(32, generator=gen), 0.25


def separate_ids(tok, prompt, response):
    """Format one candidate on its own, the plain way."""
    text = tok.apply_chat_template(
        [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}],
        tokenize=False,
    )
    return tok(text, add_special_tokens=False)["input_ids"]


@torch.inference_mode()
def separate_head_scores(lm, tok, frame, w, b):
    """Each candidate alone through the model: w . h(last token) + b."""
    out = []
    for decoded in frame.decoded:
        ids = torch.tensor([separate_ids(tok, PROMPT, decoded)])
        h = lm.model(input_ids=ids).last_hidden_state[0, -1]
        out.append(float(h @ w + b))
    return np.array(out)


def test_formatting_has_one_bos_and_matches_separate_tokenization(tok):
    cands = build_candidates(tok, PROMPT, max_tokens=120)
    bos = tok.bos_token_id
    for decoded, seq in zip(cands.decoded, cands.seqs):
        assert seq == separate_ids(tok, PROMPT, decoded)
        assert seq[0] == bos and seq.count(bos) == 1, "BOS duplicated or missing"
    assert tok("x")["input_ids"][0] == bos  # the trap: add_special_tokens=True adds a 2nd BOS


def test_formatting_matches_featurization(tok):
    cands = build_candidates(tok, PROMPT, max_tokens=40)
    for decoded, seq in zip(cands.decoded, cands.seqs):
        assert seq == encode_pair_text(tok, PROMPT, decoded, 512)


def test_special_tokens_skipped_and_counted(tok, lm, head):
    scorer = HeadScorer(lm, tok, *head)
    frame, info = sweep_prompt(scorer, PROMPT, batch_size=64)
    specials = special_token_ids(tok)
    assert len(specials) == 7
    assert info.n_skipped_special == 7
    assert not set(frame.token_id) & specials
    assert len(frame) == len(tok) - 7
    assert sorted(frame["rank"]) == list(range(1, len(frame) + 1))
    frame, info = sweep_prompt(scorer, PROMPT, max_tokens=20)
    assert list(frame.token_id) == [i for i in range(20) if i not in specials]
    assert info.n_skipped_special == len([i for i in range(20) if i in specials])


@pytest.mark.parametrize(("side", "fast"), [("right", True), ("left", True), ("right", False)])
def test_cached_sweep_equals_separate_scoring(tok, lm, head, side, fast):
    w, b = head
    scorer = HeadScorer(lm, tok, w, b)
    scorer.fast_attention = fast
    frame, info = sweep_prompt(scorer, PROMPT, batch_size=50, min_share=0.9, padding_side=side)
    # a tenth miss the first prefix; they share a shorter one, cached in turn
    assert info.second_prefix_len > 0 and info.n_cached == len(frame), info
    assert len(info.suffix_lengths) > 1, info  # several suffix lengths, grouped
    expected = separate_head_scores(lm, tok, frame, w, b)
    np.testing.assert_allclose(frame.score, expected, rtol=1e-5, atol=1e-5)
    batched = scorer.full(build_candidates(tok, PROMPT).seqs, padding_side=side)
    np.testing.assert_allclose(batched, expected, rtol=1e-5, atol=1e-5)
    best = frame.loc[frame.score.idxmax()]
    assert best["rank"] == 1


def test_what_no_prefix_covers_is_scored_in_full(tok, lm, head):
    w, b = head
    scorer = HeadScorer(lm, tok, w, b)
    seqs = build_candidates(tok, PROMPT, max_tokens=60).seqs
    lone = list(reversed(seqs[-1]))  # shares no prefix with the others
    scores, info = score_sequences(scorer, [*seqs, lone], min_share=0.9)
    assert info.n_full >= 1 and info.n_cached > 40, info
    full = scorer.full([*seqs, lone])
    np.testing.assert_allclose(scores, full, rtol=1e-5, atol=1e-5)


def test_sweep_counts_the_tokens_it_runs(tok, lm, head):
    prefix = [11, 12, 13, 14, 15]
    seqs = [[*prefix, t, 9] for t in range(20, 41)] + [[30, 29, 28]]
    _, info = score_sequences(HeadScorer(lm, tok, *head), seqs, min_share=0.9, verify=2)
    assert (info.prefix_len, info.n_cached, info.n_full) == (5, 21, 1), info
    # the prefix once, 21 suffixes of 2, the lone sequence in full, 2 verified in full
    assert info.n_tokens == 5 + 21 * 2 + 3 + 2 * 7


def test_scores_do_not_depend_on_batch_size(tok, lm, head):
    scorer = HeadScorer(lm, tok, *head)
    a, _ = sweep_prompt(scorer, PROMPT, batch_size=7)
    b, _ = sweep_prompt(scorer, PROMPT, batch_size=500)
    np.testing.assert_allclose(a.score, b.score, rtol=1e-5, atol=1e-6)


def test_linear_module_head_and_mean_pooling(tok, lm, head):
    w, b = head
    linear = torch.nn.Linear(32, 1)
    with torch.no_grad():
        linear.weight.copy_(w[None])
        linear.bias.fill_(b)
    frame_vec, _ = sweep_prompt(HeadScorer(lm, tok, w, b), PROMPT, max_tokens=80)
    frame_lin, _ = sweep_prompt(HeadScorer(lm, tok, linear), PROMPT, max_tokens=80)
    np.testing.assert_allclose(frame_vec.score, frame_lin.score, rtol=1e-5, atol=1e-6)

    mean = HeadScorer(lm, tok, w, b, pooling="mean")
    frame, info = sweep_prompt(mean, PROMPT, max_tokens=80)
    assert info.n_cached == len(frame)
    with torch.inference_mode():
        expected = [float(lm.model(input_ids=torch.tensor([separate_ids(tok, PROMPT, d)]))
                          .last_hidden_state[0].mean(0) @ w + b) for d in frame.decoded]
    np.testing.assert_allclose(frame.score, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pad_is_newline", [False, True])
def test_seq_cls_sweep_equals_hf_forward(tok, pad_is_newline):
    model = tiny_seq_cls(tok, seed=3, num_labels=2)
    if pad_is_newline:  # HF pools the rightmost non-pad id: here the token before "\n"
        model.config.pad_token_id = tok.convert_tokens_to_ids("Ċ")
    scorer = SeqClsScorer(model, tok, index=1)
    frame, info = sweep_prompt(scorer, PROMPT, batch_size=64, min_share=0.9)
    assert info.n_cached > 0
    with torch.inference_mode():
        expected = [float(model(input_ids=torch.tensor([separate_ids(tok, PROMPT, d)]))
                          .logits[0, 1]) for d in frame.decoded]
    np.testing.assert_allclose(frame.score, expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="outside"):
        SeqClsScorer(model, tok, index=2)


def test_implicit_sweep_equals_log_ratio(tok, lm):
    ref = tiny_causal_lm(tok, seed=5)
    beta = 0.3
    scorer = ImplicitScorer(lm, ref, tok, beta=beta)
    frame, info = sweep_prompt(scorer, PROMPT, max_tokens=100, min_share=0.9)
    assert info.n_cached > 0
    prompt_text = tok.apply_chat_template([{"role": "user", "content": PROMPT}],
                                          tokenize=False, add_generation_prompt=True)
    n_prompt = len(tok(prompt_text, add_special_tokens=False)["input_ids"])

    def logp(model, ids):
        logits = model(input_ids=torch.tensor([ids])).logits[0]
        lp = torch.log_softmax(logits, -1)
        return sum(float(lp[t - 1, ids[t]]) for t in range(n_prompt, len(ids)))

    with torch.inference_mode():
        expected = []
        for d in frame.decoded:
            ids = separate_ids(tok, PROMPT, d)
            assert ids[:n_prompt] == tok(prompt_text, add_special_tokens=False)["input_ids"]
            expected.append(beta * (logp(lm, ids) - logp(ref, ids)))
    np.testing.assert_allclose(frame.score, expected, rtol=1e-4, atol=1e-4)


def test_shared_prefix_and_routing():
    seqs = [[1, 2, 3, 9], [1, 2, 3, 8, 7], [1, 2, 4, 9], [1, 2, 3]]
    assert shared_prefix(seqs, min_share=0.5) == [1, 2, 3]
    assert shared_prefix(seqs, min_share=1.0) == [1, 2]
    groups, rest = split_candidates(seqs, [1, 2, 3])
    assert groups == {1: [0], 2: [1]} and rest == [2, 3]
    assert shared_prefix([], 0.5) == []


def test_mismatch_falls_back_to_full_scoring(tok, lm, head):
    class Broken(HeadScorer):
        def suffix(self, state, suffix):
            return super().suffix(state, suffix) + 1.0

    scorer = Broken(lm, tok, *head)
    with pytest.warns(RuntimeWarning, match="in full"):
        frame, info = sweep_prompt(scorer, PROMPT, max_tokens=60)
    assert info.n_cached == 0 and info.n_full == len(frame)
    expected = HeadScorer(lm, tok, *head).full(build_candidates(tok, PROMPT, max_tokens=60).seqs)
    np.testing.assert_allclose(frame.score, expected, rtol=1e-5, atol=1e-5)


def test_the_fp32_check_allows_a_thousandth_of_the_spread_and_catches_a_fault():
    from rmlens.tokens._sweep import _agree

    scores = np.array([-3.0, 0.0, 3.0, 6.0])  # spread (standard deviation) 3.354
    full = scores[:2]
    assert _agree(full + 0.0033, full, None, scores)  # SmolLM2's run-to-run fp32 noise
    assert not _agree(full + 0.04, full, None, scores)  # over 1% of the spread (0.0335)
    assert not _agree(full + 3.0, full, None, scores)  # a cache fault: about the spread
    assert _agree(full + 1.0, full, 1 / 3, scores) and not _agree(full + 1.2, full, 1 / 3, scores)


def test_encoder_scored_in_full(tok):
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1,
                                num_attention_heads=2, intermediate_size=37)).eval()
    scorer = HeadScorer(bert, tok, torch.ones(32), 0.0, pooling="mean")
    assert not scorer.can_cache
    seqs = format_ids(tok, PROMPT, ["good", " bad"])
    scores, info = score_sequences(scorer, seqs)
    assert info.n_cached == 0 and info.n_full == 2
    with torch.inference_mode():
        expected = [float(bert(input_ids=torch.tensor([s])).last_hidden_state[0].mean(0).sum())
                    for s in seqs]
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)


def test_shared_prefix_attention_equals_sdpa_over_concatenated_keys():
    from types import SimpleNamespace

    from rmlens.backbones import plain_attention
    from rmlens.tokens._attention import shared_prefix_attention

    gen = torch.Generator().manual_seed(0)
    b, heads, kv, s, length, d = 3, 6, 2, 4, 5, 8
    q = torch.randn(b, heads, s, d, generator=gen)
    k, v = torch.randn(b, kv, s, d, generator=gen), torch.randn(b, kv, s, d, generator=gen)
    kp, vp = torch.randn(1, kv, length, d, generator=gen), torch.randn(1, kv, length, d,
                                                                         generator=gen)
    out, _ = shared_prefix_attention(SimpleNamespace(layer_idx=0), q, k, v, None,
                                     scaling=0.3, prefix_kv=[(kp, vp)])
    keys = torch.cat([kp.expand(b, -1, -1, -1), k], 2).repeat_interleave(heads // kv, 1)
    values = torch.cat([vp.expand(b, -1, -1, -1), v], 2).repeat_interleave(heads // kv, 1)
    mask = torch.ones(s, length + s, dtype=torch.bool).tril(diagonal=length)
    expected = torch.nn.functional.scaled_dot_product_attention(q, keys, values, mask, scale=0.3)
    torch.testing.assert_close(out, expected.transpose(1, 2), rtol=1e-5, atol=1e-6)
    assert plain_attention(tiny_causal_lm(tiny_tokenizer()).model)


def test_rescore_extremes_gives_the_exact_top_and_bottom(tok, lm, head):
    """A noisy sweep (standing in for bf16) with its extremes scored again: the k first and
    last ranks are the exact sweep's, and only a share of the tokens was scored again."""
    w, b = head
    scorer = HeadScorer(lm, tok, w, b)
    exact, _ = sweep_prompt(scorer, PROMPT)
    spread = float(exact.score.std())
    noise = np.random.default_rng(0).normal(0.3 * spread, 0.2 * spread, len(exact))
    noisy = exact.assign(score=exact.score + noise)
    noisy = noisy.assign(rank=rank_scores(noisy.score.to_numpy(), noisy.token_id.to_numpy()))
    k = 10
    assert set(noisy.nsmallest(k, "rank").token_id) != set(exact.nsmallest(k, "rank").token_id)
    fixed, info = rescore_extremes(scorer, noisy, k, batch_size=64)
    for side in ("nsmallest", "nlargest"):
        got = getattr(fixed, side)(k, "rank")
        want = getattr(exact, side)(k, "rank")
        assert list(got.token_id) == list(want.token_id)
        np.testing.assert_allclose(got.score, want.score, rtol=1e-5, atol=1e-6)
    assert 4 * k <= info["n_rescored"] < len(exact), (info, len(exact))
    assert info["max_abs_diff"] == pytest.approx(np.abs(noise[fixed.score != noisy.score]).max(),
                                                 rel=1e-3)  # fmt: skip
