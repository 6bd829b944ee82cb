"""The sweep's compiled suffix layers (``tokens._compiled``): the same math as the model's
own layers over the shared prefix, and only where they apply."""

import numpy as np
import pytest
import torch

from rmlens.tokens import HeadScorer, _compiled, sweep_prompt
from rmlens.tokens._tiny import tiny_causal_lm, tiny_tokenizer

PROMPT = "What, in one word, is the best thing ever?"


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def lm(tok):
    return tiny_causal_lm(tok, seed=0)


def _forced(monkeypatch, calls: list):
    """Let the compiled layers in for a tiny fp32 model, the function run uncompiled."""
    monkeypatch.setattr(_compiled, "compilable", lambda config: True)
    monkeypatch.setattr(_compiled, "held_precision", lambda model: "bf16")
    monkeypatch.setattr(_compiled, "run_compiled",
                        lambda function, eager, *a: calls.append(1) or function(*a))


def test_compiled_suffix_layers_give_the_model_s_own_scores(monkeypatch, tok, lm):
    head = torch.randn(32, generator=torch.Generator().manual_seed(1)), 0.25
    scorer = HeadScorer(lm, tok, *head)
    eager, info = sweep_prompt(scorer, PROMPT, batch_size=50, min_share=0.9, verify=0)
    assert len(info.suffix_lengths) > 1 and info.second_prefix_len > 0
    calls = []
    _forced(monkeypatch, calls)
    compiled, info = sweep_prompt(scorer, PROMPT, batch_size=50, min_share=0.9)
    assert info.n_full == 0 and len(calls) >= 2 * 2  # every batch, through both layers
    np.testing.assert_allclose(compiled.score, eager.score, rtol=1e-5, atol=1e-5)
    assert eager.score.std() > 0.1  # the scores differ between tokens
    assert not any("forward" in vars(m) for m in lm.modules())  # undone after each batch


def test_compiled_suffix_applies_to_bf16_decoders_of_plain_layers_only(monkeypatch, tok):
    model = tiny_causal_lm(tok, seed=0).model
    with _compiled.compiled_suffix(model) as used:
        assert not used  # fp32 and 32 wide: the model's own layers
    monkeypatch.setattr(_compiled, "compilable", lambda config: True)
    monkeypatch.setattr(_compiled, "held_precision", lambda model: "bf16")
    with _compiled.compiled_suffix(model) as used:
        assert used
    model.layers[0].mlp.up_proj.register_forward_hook(lambda *a: None)
    with _compiled.compiled_suffix(model):
        assert "forward" not in vars(model.layers[0]) and "forward" in vars(model.layers[1])
