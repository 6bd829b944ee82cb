"""One precision setting for every model pass (issue 57): what ``auto`` resolves to, what bf16
holds in which dtype, and where the resolved precision is recorded."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tests.test_finetune import PAIRS, config
from tests.test_resume import make_pairs

from rmlens._errors import InputError
from rmlens.backbones import _precision, attention, precision_note, resolve_precision
from rmlens.rewards import ExplicitRMTrainer, FrozenHeadTrainer, TrainConfig, _fast


@pytest.fixture()
def machine(monkeypatch):
    """Set what the CPU multiplies natively, with ``auto`` left to the hardware."""
    monkeypatch.delenv(_precision.AUTO_ENV, raising=False)

    def have(flag):
        monkeypatch.setattr(_precision, "cpu_bf16", lambda: flag)

    return have


def test_auto_is_bf16_only_where_the_cpu_multiplies_it(machine):
    machine("amx_bf16")
    assert resolve_precision("auto", "cpu") == "bf16"
    said = "precision bf16 (auto: cpu multiplies bf16 natively, amx_bf16)"
    assert precision_note("auto", "cpu") == said
    machine(None)
    assert resolve_precision("auto", "cpu") == "fp32"
    assert precision_note("auto", "cpu") == "precision fp32 (auto: cpu has no native bf16 matmuls)"
    assert resolve_precision("bf16", "cpu") == "bf16"  # as set, whatever the hardware
    assert precision_note("fp32", "cpu") == "precision fp32 (as set)"
    assert resolve_precision("auto", "mps") == "fp32"


def test_auto_keeps_fp32_for_a_pass_bf16_does_not_keep(machine, monkeypatch):
    machine("avx512_bf16")
    monkeypatch.setitem(_precision.AUTO_BF16, "sweep", False)
    assert resolve_precision("auto", "cpu", task="sweep") == "fp32"
    assert resolve_precision("auto", "cpu", task="finetune") == "bf16"
    assert "does not keep this pass's numbers" in precision_note("auto", "cpu", task="sweep")


def test_the_environment_pins_auto(machine, monkeypatch):
    machine("amx_bf16")
    monkeypatch.setenv(_precision.AUTO_ENV, "fp32")
    assert resolve_precision("auto", "cpu") == "fp32"
    assert resolve_precision("bf16", "cpu") == "bf16"
    assert "RMLENS_AUTO_PRECISION is set" in precision_note("auto", "cpu")
    monkeypatch.setenv(_precision.AUTO_ENV, "fp16")
    with pytest.raises(ValueError, match="fp32 or bf16"):
        resolve_precision("auto", "cpu")
    with pytest.raises(ValueError, match="precision must be one of"):
        resolve_precision("half", "cpu")


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f avx512_bf16 amx_tile\n")
    assert _precision.cpu_bf16.__wrapped__(str(info)) == "avx512_bf16"
    info.write_text("flags\t\t: fpu sse avx2\n")
    assert _precision.cpu_bf16.__wrapped__(str(info)) is None
    assert _precision.cpu_bf16.__wrapped__(str(tmp_path / "absent")) is None


def test_the_old_bf16_switch_reads_as_a_precision():
    assert TrainConfig.upgrade({"bf16": True})["precision"] == "bf16"
    assert TrainConfig.upgrade({"bf16": False})["precision"] == "fp32"
    assert TrainConfig.from_dict({"bf16": True}).precision == "bf16"
    with pytest.raises(ValueError, match="precision"):
        TrainConfig(precision="half").check()


def _sdpa(q, k, v, mask=None, causal=False):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                          enable_gqa=q.shape[1] != k.shape[1])  # fmt: skip


@pytest.mark.parametrize("how", ["causal", "additive", "bool", "none"])
def test_written_out_bf16_attention_gives_sdpa_numbers(how):
    torch.manual_seed(0)
    q = torch.randn(2, 6, 9, 16)
    k, v = torch.randn(2, 2, 9, 16), torch.randn(2, 2, 9, 16)  # 3 query heads per kv head
    allowed = torch.rand(9, 9) > 0.3
    allowed.fill_diagonal_(True)
    mask = {"additive": torch.zeros(9, 9).masked_fill(~allowed, float("-inf")),
            "bool": allowed}.get(how)  # fmt: skip
    causal = how == "causal"
    want = _sdpa(q, k, v, mask, causal)  # fp32, the fused kernel
    leaves = [t.bfloat16().requires_grad_(True) for t in (q, k, v)]
    got = attention(*leaves, mask=mask, causal=causal)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want, rtol=0, atol=3e-2)
    ref = [t.clone().requires_grad_(True) for t in (q, k, v)]
    _sdpa(*ref, mask, causal).pow(2).sum().backward()
    got.float().pow(2).sum().backward()
    for mine, theirs in zip(leaves, ref):
        err = (mine.grad.float() - theirs.grad).norm() / theirs.grad.norm()
        assert err < 2e-2


def test_fp32_attention_is_the_fused_kernel_exactly():
    torch.manual_seed(1)
    q, k, v = torch.randn(1, 4, 7, 8), torch.randn(1, 2, 7, 8), torch.randn(1, 2, 7, 8)
    assert torch.equal(attention(q, k, v, causal=True), _sdpa(q, k, v, causal=True))


def test_fused_lora_in_bf16_keeps_fp32_adapters_and_their_gradients():
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    body = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.Tanh(), torch.nn.Linear(48, 32))
    model = get_peft_model(body, LoraConfig(r=4, lora_alpha=8, target_modules=["0", "2"],
                                            init_lora_weights=False))  # fmt: skip
    x = torch.randn(3, 20, 32)
    model(x).pow(2).sum().backward()  # fp32, peft's own layers
    want = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
    model.zero_grad(set_to_none=True)
    for name, p in model.named_parameters():
        if "lora_" not in name:
            p.data = p.data.bfloat16()  # frozen weights held in bf16, adapters fp32
    with _fast.fused_layers(model):
        y = model(x.bfloat16())
    assert y.dtype == torch.bfloat16
    y.float().pow(2).sum().backward()
    assert sorted(n for n, p in model.named_parameters() if p.grad is not None) == sorted(want)
    for name, p in model.named_parameters():
        if name in want:
            assert p.dtype == p.grad.dtype == torch.float32
            assert (p.grad - want[name]).norm() / want[name].norm() < 3e-2


def test_compiled_norm_is_llamas_rmsnorm():
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    torch.manual_seed(0)
    norm = LlamaRMSNorm(64, eps=1e-5).bfloat16()
    norm.weight.data.normal_()
    x = torch.randn(5, 7, 64).bfloat16()
    assert torch.equal(_fast.rms_norm(x, norm.weight, norm.variance_epsilon), norm(x))
    stream = torch.randn(5, 7, 64)  # the fp32 residual stream of a held model, in bf16
    norm.float()
    feeds = _fast.rms_norm(stream, norm.weight, norm.variance_epsilon, torch.bfloat16)
    assert feeds.dtype == torch.bfloat16
    assert torch.equal(feeds, norm(stream).bfloat16())  # the cast autocast makes, once


@pytest.fixture(scope="module")
def bf16_rm(tiny_causal_dir, tmp_path_factory):
    from rmlens.hub import train

    out = tmp_path_factory.mktemp("bf16") / "rm"
    train(PAIRS, config(tiny_causal_dir, epochs=2, precision="bf16", lr=5e-2, head_lr=5e-2),
          out=out, quiet=True)  # fmt: skip
    return out


def test_bf16_training_holds_the_base_in_bf16_and_what_trains_in_fp32(tiny_causal_dir):
    trainer = ExplicitRMTrainer(config(tiny_causal_dir, precision="bf16"))
    rm = trainer.fit(PAIRS, quiet=True).rm_
    assert trainer.precision_ == "bf16" and rm.precision == "bf16"
    dtypes = {n: p.dtype for n, p in rm.net.named_parameters()}
    trains = {n: "lora_" in n or n.startswith("head.") for n in dtypes}
    assert {d for n, d in dtypes.items() if trains[n]} == {torch.float32}
    # the frozen linear layers in bf16; embeddings and norms fp32, as the residual stream
    held = {d for n, d in dtypes.items() if not trains[n] and "proj" in n}
    assert held == {torch.bfloat16}
    assert {d for n, d in dtypes.items() if "norm" in n or "embed" in n} == {torch.float32}
    fp32 = ExplicitRMTrainer(config(tiny_causal_dir, precision="fp32"))
    assert {p.dtype for p in fp32.fit(PAIRS, quiet=True).rm_.net.parameters()} == {torch.float32}
    assert fp32.precision_ == "fp32"


def test_a_bf16_rm_records_its_precision_and_scores_the_same_reloaded(bf16_rm):
    from rmlens.hub import load_rm

    assert json.loads((bf16_rm / "rm_config.json").read_text())["precision"] == "bf16"
    assert json.loads((bf16_rm / "train.json").read_text())["precision"] == "bf16"
    prompts, responses = list(PAIRS.prompt), list(PAIRS.chosen)
    first = load_rm(bf16_rm, precision="bf16").score(prompts, responses)  # as set: bf16
    again = load_rm(bf16_rm, precision="bf16").score(prompts, responses)
    np.testing.assert_array_equal(first, again)
    fp32 = load_rm(bf16_rm, precision="fp32").score(prompts, responses)
    assert np.abs(np.asarray(first) - np.asarray(fp32)).max() < 0.005 * np.abs(fp32).max()


def test_an_export_of_a_bf16_rm_reads_the_same_in_transformers(bf16_rm, tmp_path):
    from rmlens.hub._export import TOLERANCE, export_rm

    exported = export_rm(bf16_rm, tmp_path / "hf")
    assert exported.max_abs_diff <= TOLERANCE
    config_json = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config_json.get("torch_dtype", config_json.get("dtype")) in (None, "float32")
    card = (tmp_path / "hf" / "README.md").read_text()
    assert "| precision | trained in bf16" in card


def test_frozen_features_are_cached_per_precision(tiny_encoder_dir, tmp_path):
    pairs = make_pairs(12)
    fp32 = FrozenHeadTrainer(model=str(tiny_encoder_dir), cache_dir=tmp_path, precision="fp32")
    bf16 = FrozenHeadTrainer(model=str(tiny_encoder_dir), cache_dir=tmp_path, precision="bf16")
    fp32.prepare(pairs)
    bf16.prepare(pairs)
    assert (fp32.precision_, bf16.precision_) == ("fp32", "bf16")
    a, b = (np.asarray(t.features_.chosen) for t in (fp32, bf16))
    assert not np.array_equal(a, b)  # encoded again, not read from fp32's cache
    cos = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
    assert cos.min() > 0.99


def test_an_audit_records_its_precision_and_does_not_resume_across_it(tiny_encoder_dir, tmp_path):
    from tests.test_resume import config as audit_config

    from rmlens.memorization import audit

    pairs = make_pairs()
    out = tmp_path / "exp"

    def run(precision):
        trainer = FrozenHeadTrainer(model=str(tiny_encoder_dir), cache_dir=tmp_path / "cache",
                                    precision=precision)  # fmt: skip
        audit(pairs, audit_config(precision=precision), out=out, trainer=trainer, quiet=True)

    run("bf16")
    assert json.loads((out / "config.json").read_text())["precision"] == "bf16"
    with pytest.raises(InputError, match=r"precision \"bf16\" \(saved\) vs \"fp32\" \(now\)"):
        run("fp32")
    run("bf16")  # the same precision resumes


def _tiny_llama():
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2,
                         intermediate_size=64)  # fmt: skip
    return LlamaModel(config).eval()


def test_held_weights_keep_the_residual_stream_fp32():
    from rmlens.backbones import held_precision, hold_weights

    model = _tiny_llama()
    ids = torch.randint(0, 50, (2, 9))
    with torch.no_grad():
        want = model(input_ids=ids).last_hidden_state
    hold_weights(model, "bf16")
    assert held_precision(model) == "bf16"
    dtypes = {n: p.dtype for n, p in model.named_parameters()}
    assert {d for n, d in dtypes.items() if "proj" in n} == {torch.bfloat16}
    assert {d for n, d in dtypes.items() if "proj" not in n} == {torch.float32}  # embed, norms
    with torch.no_grad():
        got = model(input_ids=ids).last_hidden_state
    assert got.dtype == torch.float32  # the residual stream, not bf16's
    assert not torch.equal(got, want)
    assert (got - want).norm() / want.norm() < 2e-2
    assert not torch.is_autocast_enabled("cpu")  # the call's autocast ended with it


def test_a_held_model_cast_back_to_fp32_runs_in_fp32():
    import copy

    from rmlens.backbones import held_precision, hold_weights

    model = hold_weights(_tiny_llama(), "bf16")
    back = copy.deepcopy(model).float()
    assert held_precision(back) == "fp32"
    plain = _tiny_llama()
    plain.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    ids = torch.randint(0, 50, (2, 9))
    with torch.no_grad():
        got, want = (m(input_ids=ids).last_hidden_state for m in (back, plain))
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_scoring_keeps_fp32_under_auto(machine):
    machine("amx_bf16")
    assert resolve_precision("auto", "cpu", task="score") == "fp32"
    assert resolve_precision("auto", "cpu", task="finetune") == "bf16"
    assert resolve_precision("bf16", "cpu", task="score") == "bf16"


def test_an_rm_scoring_in_bf16_is_not_exported(bf16_rm, tmp_path):
    from rmlens.hub import load_rm
    from rmlens.hub._export import export_rm

    with pytest.raises(InputError, match="load it with precision='fp32'"):
        export_rm(load_rm(bf16_rm, precision="bf16"), tmp_path / "hf")
