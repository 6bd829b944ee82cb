"""Implicit RMs: r = beta * (log pi(y|x) - log pi_ref(y|x)), response tokens only, summed."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from rmlens._errors import InputError
from rmlens.hub import load_rm
from rmlens.rewards import ImplicitRMTrainer, TrainConfig
from rmlens.rewards._base_model import load_causal_lm
from rmlens.rewards._nets import collate, implicit_reward, response_logps
from rmlens.rewards._packing import make_example

PAIRS = pd.DataFrame(
    {
        "id": [f"p{i}" for i in range(8)],
        "prompt": [
            "what is the best thing ever ?",
            "how can i help the dog ?",
            "why is the sun big ?",
            "who is the cat ?",
        ]
        * 2,
        "chosen": ["yes", "sure , here is water", "the sun is big", "the cat is good"] * 2,
        "rejected": ["no", "never", "i hate the sun", "no , the cat is bad"] * 2,
    }
)


def config(path, **kw) -> TrainConfig:
    base = dict(
        model=str(path),
        rm_kind="implicit",
        device="cpu",
        max_length=40,
        epochs=1,
        batch_size=4,
        lr=1e-2,
        beta=0.5,
    )
    return TrainConfig(**{**base, **kw})


def test_response_logps_and_reward_by_hand():
    logits = torch.tensor([[1.0, 2.0, 0.0], [0.0, 0.0, 3.0]])  # (L=2, V=3)
    target = torch.tensor([1, 2])
    first = 2 - math.log(math.e + math.e**2 + 1)
    second = 3 - math.log(2 + math.e**3)
    both = response_logps(logits, target, torch.tensor([True, True]))
    assert float(both) == pytest.approx(first + second)
    assert float(response_logps(logits, target, torch.tensor([True, False]))) == pytest.approx(
        first
    )
    r = implicit_reward(torch.tensor([-3.0, -1.0]), torch.tensor([-5.0, -1.5]), 0.5)
    assert r.tolist() == pytest.approx([1.0, 0.25])


def test_response_mask_covers_the_response_only(tiny_causal_dir):
    bb = load_causal_lm(str(tiny_causal_dir), max_length=40)
    tok = bb.tokenizer
    ex = make_example(tok, "who is the cat ?", ["the cat is good", "no"], 40)
    picked = [
        tok.convert_ids_to_tokens([s[j] for j, m in enumerate(mask) if m])
        for s, mask in zip(ex.seqs, ex.response)
    ]
    assert picked == [["the", "cat", "is", "good", "</s>"], ["no", "</s>"]]
    short = make_example(tok, "who is the cat ? " * 5, ["the cat is good"], 4)
    assert len(short.seqs[0]) == 4 and sum(short.response[0]) == 3  # first token has no context


def _by_hand(lm, seq, mask):
    ids = torch.tensor([seq])
    logp = torch.log_softmax(lm(input_ids=ids).logits[0], -1)  # (T, V)
    return sum(float(logp[j - 1, seq[j]]) for j, m in enumerate(mask) if m)


@pytest.fixture(scope="module")
def trained(tiny_causal_dir):
    return ImplicitRMTrainer(config(tiny_causal_dir, epochs=3)).fit(PAIRS, quiet=True)


def test_implicit_reward_from_logprobs_by_hand(trained):
    rm = trained.rm_
    lm = rm.net.lm
    ex = make_example(
        rm.backbone.tokenizer, PAIRS.prompt[1], [PAIRS.chosen[1], PAIRS.rejected[1]], 40
    )
    with torch.no_grad():
        policy = [_by_hand(lm, s, m) for s, m in zip(ex.seqs, ex.response)]
        with lm.disable_adapter():
            ref = [_by_hand(lm, s, m) for s, m in zip(ex.seqs, ex.response)]
    expected = [0.5 * (p - r) for p, r in zip(policy, ref)]
    assert abs(expected[0]) > 1e-3  # the adapters moved the policy
    got = rm.score([PAIRS.prompt[1]] * 2, [PAIRS.chosen[1], PAIRS.rejected[1]])
    np.testing.assert_allclose(got, expected, atol=1e-4)
    r_c, r_r = rm.score_pairs(PAIRS.iloc[[1]])
    np.testing.assert_allclose([r_c[0], r_r[0]], expected, atol=1e-4)


def test_packed_equals_separate_and_training_refs_equal_scoring_refs(trained):
    rm = trained.rm_
    examples = rm.examples(PAIRS.prompt, list(zip(PAIRS.chosen, PAIRS.rejected)))
    pad = rm.backbone.tokenizer.pad_token_id
    with torch.no_grad():
        packed = collate(examples, range(8), pad_id=pad, mode="packed")
        separate = collate(examples, range(8), pad_id=pad, mode="causal")
        flat = collate(examples, range(8), pad_id=pad, mode="flat")
        torch.testing.assert_close(rm.net(packed), rm.net(separate), atol=1e-4, rtol=0)
        torch.testing.assert_close(rm.net(flat), rm.net(separate), atol=1e-4, rtol=0)
        torch.testing.assert_close(rm.net.reference_logps(flat), rm.net.reference_logps(packed),
                                   atol=1e-4, rtol=0)  # fmt: skip
        ref_now = rm.net.reference_logps(packed)
    assert rm.runtime.mode == "auto"
    trainer = ImplicitRMTrainer(trained.config)
    trainer.prepare(PAIRS, quiet=True)
    np.testing.assert_allclose([ex.ref for ex in trainer.examples_], ref_now.numpy(), atol=1e-4)


def test_implicit_learns_and_reloads_identically(trained, tmp_path):
    assert trained.history_[-1]["train_loss"] < trained.history_[0]["train_loss"]
    rm = trained.rm_
    r_c, r_r = rm.score_pairs(PAIRS)
    assert np.mean(r_c > r_r) >= 0.75
    rm.save(tmp_path / "im")
    assert (tmp_path / "im" / "adapter" / "adapter_model.safetensors").exists()
    assert not (tmp_path / "im" / "head.safetensors").exists()
    loaded = load_rm(tmp_path / "im", device="cpu")
    assert loaded.kind == "implicit" and loaded.net.beta == 0.5
    l_c, l_r = loaded.score_pairs(PAIRS)
    np.testing.assert_allclose(l_c, r_c, atol=1e-5)
    np.testing.assert_allclose(l_r, r_r, atol=1e-5)


def test_full_finetune_keeps_a_frozen_reference(tiny_causal_dir, tmp_path):
    trainer = ImplicitRMTrainer(config(tiny_causal_dir, finetune="full", lr=1e-3, epochs=2))
    trainer.fit(PAIRS, quiet=True)
    rm = trainer.rm_
    base = load_causal_lm(str(tiny_causal_dir)).model
    ex = make_example(rm.backbone.tokenizer, PAIRS.prompt[0], [PAIRS.chosen[0]], 40)
    with torch.no_grad():
        expected = 0.5 * (
            _by_hand(rm.net.lm, ex.seqs[0], ex.response[0])
            - _by_hand(base, ex.seqs[0], ex.response[0])
        )
    assert abs(expected) > 1e-3
    assert rm.score(PAIRS.prompt[:1], PAIRS.chosen[:1])[0] == pytest.approx(expected, abs=1e-4)
    rm.save(tmp_path / "full")
    assert (tmp_path / "full" / "model" / "model.safetensors").exists()
    loaded = load_rm(tmp_path / "full", device="cpu")
    np.testing.assert_allclose(
        loaded.score(PAIRS.prompt, PAIRS.chosen), rm.score(PAIRS.prompt, PAIRS.chosen), atol=1e-5
    )


def test_implicit_needs_a_causal_lm(tiny_encoder_dir):
    with pytest.raises(InputError, match="causal"):
        ImplicitRMTrainer(config(tiny_encoder_dir)).fit(PAIRS, quiet=True)
    with pytest.raises(ValueError, match="'rm_kind' parameter of TrainConfig must be 'implicit'"):
        ImplicitRMTrainer(TrainConfig(rm_kind="explicit")).fit(PAIRS, quiet=True)
