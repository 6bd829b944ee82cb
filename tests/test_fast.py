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


def _tiny_lora_llama(**lora):
    """A 2-layer Llama with grouped-query attention and random LoRA adapters on every
    projection, and a flat row of three examples (their spans and positions)."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, intermediate_size=48,
                         max_position_embeddings=64)  # fmt: skip
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    model = get_peft_model(LlamaModel(config), LoraConfig(
        r=4, lora_alpha=8, target_modules=targets, init_lora_weights=False, **lora))
    spans = [(0, 3, [2, 4]), (9, 0, [3, 2]), (14, 5, [1, 1])]  # (start, prefix, tails)
    pos = [list(range(p)) + [i for n in tails for i in range(p, p + n)] for _, p, tails in spans]
    position_ids = torch.tensor([sum(pos, [])])
    ids = torch.randint(0, 50, position_ids.shape)
    return model, ids, position_ids, spans


def _flat_forward(model, ids, position_ids, spans):
    with _fast.flat_mode(model):
        return model(input_ids=ids, position_ids=position_ids, use_cache=False,
                     rmlens_spans=spans).last_hidden_state  # fmt: skip


def test_decoder_layer_is_the_models_own_layer_on_a_flat_row():
    """``decoder_layer`` (what ``compiled_layers`` compiles), run eagerly in fp32, gives
    each layer's output of the model's own forward to float rounding."""
    model, ids, position_ids, spans = _tiny_lora_llama()
    seen = []
    layers = [m for m in model.modules() if type(m).__name__ == "LlamaDecoderLayer"]
    hooks = [layer.register_forward_hook(lambda m, a, kw, out: seen.append((m, a, kw, out)),
                                         with_kwargs=True) for layer in layers]  # fmt: skip
    _flat_forward(model, ids, position_ids, spans)
    for hook in hooks:
        hook.remove()
    assert len(seen) == 2
    layout = _fast._layout(spans, True, "cpu")
    for layer, args, kwargs, out in seen:
        adapters = _fast._adapters(layer)
        assert adapters == ("default",) * 7
        cos, sin = kwargs["position_embeddings"]
        ours = _fast.decoder_layer(layer, args[0], cos, sin, layout.source, layout.target,
                                   layout.bias(torch.float32), adapters)  # fmt: skip
        torch.testing.assert_close(ours, out, rtol=1e-5, atol=1e-5)
        assert (out - args[0]).abs().max() > 1e-2  # the layer did something


def test_decoder_layer_has_the_models_own_gradients_on_a_flat_row():
    """Backward through ``decoder_layer`` (its LoRA operator, its padded batch of examples)
    gives the model's own layer's gradients, input and adapters, in fp32."""
    model, ids, position_ids, spans = _tiny_lora_llama()
    layer = next(m for m in model.modules() if type(m).__name__ == "LlamaDecoderLayer")
    seen = []
    hook = layer.register_forward_hook(lambda m, a, kw, out: seen.append((a, kw)),
                                       with_kwargs=True)  # fmt: skip
    _flat_forward(model, ids, position_ids, spans)
    hook.remove()
    (h, *_), kwargs = seen[0]
    cos, sin = kwargs["position_embeddings"]
    layout = _fast._layout(spans, True, "cpu")
    g = torch.randn(h.shape, generator=torch.Generator().manual_seed(0))
    adapters = [p for name, p in layer.named_parameters() if "lora_" in name]
    grads = []
    for run in ("own", "ours"):
        x = h.detach().clone().requires_grad_()
        if run == "own":
            with _fast.flat_mode(model):
                out = layer(x, **{k: v for k, v in kwargs.items() if k != "hidden_states"})
        else:
            out = _fast.decoder_layer(layer, x, cos, sin, layout.source, layout.target,
                                      layout.bias(torch.float32), ("default",) * 7)
        dx, *da = torch.autograd.grad(out, [x, *adapters], g)
        grads.append([dx, *da])
    assert len(adapters) == 14
    for own, ours in zip(*grads):
        torch.testing.assert_close(ours, own, rtol=1e-4, atol=1e-5)
    assert grads[0][0].abs().max() > 1e-2


def test_compiled_layers_replace_flat_calls_only_and_are_undone(monkeypatch):
    from types import SimpleNamespace

    model, ids, position_ids, spans = _tiny_lora_llama()
    calls = []
    monkeypatch.setattr(_fast, "run_compiled",
                        lambda function, eager, *a, **k: calls.append(1) or function(*a))
    monkeypatch.setattr(_fast, "MIN_COMPILED", 0)
    rt = SimpleNamespace(precision="bf16", device="cpu")
    config = model.base_model.model.config
    exact = _flat_forward(model, ids, position_ids, spans)  # fp32
    with torch.autocast("cpu", torch.bfloat16):
        before = _flat_forward(model, ids, position_ids, spans)
        with _fast.compiled_layers(model, rt, config) as used:
            assert used
            replaced = _flat_forward(model, ids, position_ids, spans)
            assert len(calls) == 2  # each layer ran as one function
            model(input_ids=ids)  # not a flat row: the model's own layers
            assert len(calls) == 2
    assert not any("forward" in vars(m) for m in model.modules())
    # bf16 rounding: as far from the fp32 pass as the model's own layers in bf16 are
    noise = (before.float() - exact).abs().max()
    assert 0 < (replaced.float() - exact).abs().max() < 2 * noise < 0.2 * exact.std()
    with _fast.compiled_layers(model, SimpleNamespace(precision="fp32", device="cpu"),
                               config) as used:  # fmt: skip
        assert not used  # fp32: eager layers


def test_compiled_layers_step_aside_for_layers_they_cannot_fuse(monkeypatch):
    from types import SimpleNamespace

    model, ids, position_ids, spans = _tiny_lora_llama(lora_dropout=0.1)
    calls = []
    monkeypatch.setattr(_fast, "run_compiled", lambda *a, **k: calls.append(1))
    monkeypatch.setattr(_fast, "MIN_COMPILED", 0)
    rt = SimpleNamespace(precision="bf16", device="cpu")
    with _fast.compiled_layers(model, rt, model.base_model.model.config) as used:
        assert used
        out = _flat_forward(model, ids, position_ids, spans)
    assert not calls and out.shape == (1, ids.shape[1], 32)  # dropout: peft's own layers


def test_only_explicit_rms_train_through_the_compiled_layers(monkeypatch, tiny_causal_dir):
    """An implicit RM's reward is a log-ratio to a reference read by the model's own layers;
    the compiled layers' rounding would not cancel in it."""
    calls = []
    monkeypatch.setattr(_fast, "compiled_layers",
                        lambda *a: calls.append(1) or contextlib.nullcontext(False))  # fmt: skip
    pairs = length_pairs(8)
    for trainer, kind in ((ExplicitRMTrainer, "explicit"), (ImplicitRMTrainer, "implicit")):
        config = TrainConfig(rm_kind=kind, model=str(tiny_causal_dir), epochs=1,
                             batch_size=4, max_length=48, device="cpu", eval_fraction=0.0,
                             patience=0)  # fmt: skip
        trainer(config).fit(pairs, quiet=True)
        assert len(calls) == 1  # the explicit fit's, and no more



def test_with_compiled_layers_auto_lays_short_batches_out_flat(tiny_causal_dir):
    """Short, nearly unpadded examples run padded in eager passes, flat through the
    compiled layers (the layers only compile flat rows)."""
    from dataclasses import replace

    from rmlens.rewards._nets import flat_pays

    pairs = length_pairs(8).assign(chosen="a b", rejected="c d")  # equal, short lengths
    config = TrainConfig(model=str(tiny_causal_dir), max_length=48, device="cpu",
                         eval_fraction=0.0, patience=0)  # fmt: skip
    trainer = ExplicitRMTrainer(config)
    trainer._setup()
    examples = trainer._examples(pairs)[0]
    assert not flat_pays(examples)
    rt = replace(trainer.runtime_, mode="auto")
    assert rt.batch(examples, [0, 1, 2]).spans is None  # packed
    assert replace(rt, compiled=True).batch(examples, [0, 1, 2]).spans is not None  # flat
