"""The fused LoRA layer (``rmlens.rewards._fast``) gives peft's numbers to float rounding,
for a layer and for a trained RM, and steps aside whenever a layer is asked for something
else."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from tests.conftest import length_pairs
from torch import nn

from rmlens.rewards import ExplicitRMTrainer, ImplicitRMTrainer, TrainConfig, _fast


def _peft(alpha: float, **lora):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    body = nn.Sequential(nn.Linear(24, 40), nn.Tanh(), nn.Linear(40, 24, bias=False))
    config = LoraConfig(r=4, lora_alpha=alpha, target_modules=["0", "2"],
                        init_lora_weights=False, **lora)  # fmt: skip
    return get_peft_model(body, config)


def _run(model, x, fused: bool):
    model.zero_grad(set_to_none=True)
    x = x.detach().clone().requires_grad_(True)
    with _fast.fused_layers(model) if fused else contextlib.nullcontext():
        y = model(x)
    y.pow(2).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return y.detach(), x.grad, grads


@pytest.mark.parametrize("alpha", [8.0, 6.0])  # scaling 2 (exact in binary) and 1.5
def test_fused_layers_equals_peft(alpha):
    model = _peft(alpha)
    x = torch.randn(3, 70, 24)
    y0, dx0, g0 = _run(model, x, fused=False)
    y1, dx1, g1 = _run(model, x, fused=True)
    close = {"rtol": 1e-5, "atol": 1e-6}
    torch.testing.assert_close(y1, y0, **close)
    torch.testing.assert_close(dx1, dx0, **close)
    assert sorted(g0) == sorted(g1) and len(g0) == 4  # A and B of both layers
    for name in g0:
        assert g0[name].abs().max() > 1e-3
        torch.testing.assert_close(g1[name], g0[name], **close)


def test_fused_layers_runs_as_one_node_and_is_undone_after():
    model = _peft(8.0)
    layer = model.base_model.model[0]
    with _fast.fused_layers(model):
        y = model(torch.randn(2, 5, 24))
        assert "forward" in vars(layer)
    assert "forward" not in vars(layer)
    nodes, todo = set(), [y.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and node not in nodes:
            nodes.add(node)
            todo += [n for n, _ in node.next_functions]
    names = {type(n).__name__ for n in nodes}
    assert "_LoraLinearBackward" in names and "MulBackward0" not in names


def test_fused_layers_steps_aside_for_hooks_disabled_adapters_and_dropout():
    model = _peft(8.0)
    layer = model.base_model.model[0]
    assert _fast._fusable(layer) == "default"
    handle = layer.lora_A["default"].register_forward_hook(lambda *a: None)
    assert _fast._fusable(layer) is None  # rmlens.influence reads per-pair gradients so
    handle.remove()
    x = torch.ones(1, 24)
    with model.disable_adapter():
        assert _fast._fusable(layer) is None
        base = model(x)
        with _fast.fused_layers(model):
            off = model(x)
    assert torch.equal(off, base) and not torch.equal(off, model(x))
    assert _fast._fusable(_peft(8.0, lora_dropout=0.1).base_model.model[0]) is None


@pytest.mark.parametrize("trainer", [ExplicitRMTrainer, ImplicitRMTrainer])
def test_training_with_the_fused_layers_gives_peft_numbers(tiny_causal_dir, monkeypatch, trainer):
    pairs = length_pairs(24)
    config = TrainConfig(model=str(tiny_causal_dir), rm_kind=trainer.rm_kind, epochs=2,
                         batch_size=4, lr=5e-3, max_length=48, device="cpu",
                         eval_fraction=0.25)  # fmt: skip

    def fit():
        rm = trainer(config).fit(pairs, quiet=True)
        return rm.history_, rm.rm_.score(list(pairs.prompt), list(pairs.chosen))

    calls = []
    apply = _fast._LoraLinear.apply
    monkeypatch.setattr(_fast._LoraLinear, "apply", lambda *a: calls.append(1) or apply(*a))
    fused_history, fused_scores = fit()
    assert calls  # the training steps ran fused
    monkeypatch.setattr(_fast, "fused_layers", lambda model: contextlib.nullcontext())
    plain_history, plain_scores = fit()
    assert [h.keys() for h in fused_history] == [h.keys() for h in plain_history]
    for fused, plain in zip(fused_history, plain_history):
        np.testing.assert_allclose(list(fused.values()), list(plain.values()), rtol=1e-5,
                                   atol=1e-6)  # fmt: skip
    np.testing.assert_allclose(fused_scores, plain_scores, rtol=1e-5, atol=1e-6)
    assert not np.array_equal(fused_scores, np.zeros_like(fused_scores))


@pytest.mark.parametrize(("kind", "flat", "padded"),
                         [("causal", "flat", "packed"), ("encoder", "encoder-flat", "encoder")])
def test_training_on_flat_batches_gives_the_padded_batches_numbers(kind, flat, padded,
                                                                   tiny_causal_dir,
                                                                   tiny_encoder_dir):
    from dataclasses import replace

    pairs = length_pairs(24)
    model = tiny_causal_dir if kind == "causal" else tiny_encoder_dir
    config = TrainConfig(model=str(model), epochs=2, batch_size=4, lr=5e-3, max_length=48,
                         device="cpu", eval_fraction=0.0, patience=0)  # fmt: skip
    fits = {}
    for mode in (flat, padded):
        trainer = ExplicitRMTrainer(config)
        trainer._setup()
        if mode == "encoder-flat":
            assert trainer.runtime_.mode == mode  # a BERT runs flat by default
            batch = trainer.runtime_.batch(trainer._examples(pairs)[0], [0, 1, 2])
            assert batch.input_ids.shape[0] == 1 and batch.attention_mask is None
            assert batch.rows.tolist() == [[0, 1], [2, 3], [4, 5]]  # each sequence's number
        trainer.runtime_ = replace(trainer.runtime_, mode=mode)
        trainer.fit(pairs, quiet=True)
        fits[mode] = trainer.rm_.score(list(pairs.prompt), list(pairs.chosen))
    assert np.abs(fits[flat] - fits[padded]).max() < 1e-4
    assert np.abs(fits[padded]).max() > 1e-2
