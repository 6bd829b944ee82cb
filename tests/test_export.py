"""Export to a standard Hugging Face RM, and RM folders that load from anywhere (issue 29)."""

import json
import os
import shutil

import numpy as np
import pytest
import torch
from tests.conftest import run_cli
from tests.test_finetune import PAIRS

from rmlens._errors import InputError
from rmlens.hub import load_rm, train
from rmlens.hub._export import TOLERANCE, export_rm
from rmlens.rewards import TrainConfig


def hf_rewards(folder, prompts, responses, fmt="chat"):
    """Rewards the way a user of the exported folder computes them: transformers alone,
    the chat template applied by the tokenizer, one right-padded batch."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    if fmt == "chat":
        texts = [tok.apply_chat_template([{"role": "user", "content": p},
                                          {"role": "assistant", "content": r}], tokenize=False)
                 for p, r in zip(prompts, responses)]  # fmt: skip
        enc = tok(texts, add_special_tokens=False, padding=True, return_tensors="pt")
    else:
        enc = tok([p + r + tok.eos_token for p, r in zip(prompts, responses)], padding=True,
                  return_tensors="pt")  # fmt: skip
    with torch.no_grad():
        return model(**enc).logits[:, 0].double().numpy(), model.config


@pytest.fixture(scope="module")
def audit_dir(tmp_path_factory, tiny_causal_dir):
    """A frozen-head audit (logistic head, standardized features) on the tiny causal LM."""
    from rmlens.memorization import AuditConfig, audit
    from rmlens.rewards import FrozenHeadTrainer, HeadConfig

    root = tmp_path_factory.mktemp("export-audit")
    trainer = FrozenHeadTrainer(model=str(tiny_causal_dir), cache_dir=root / "cache")
    config = AuditConfig(runs=2, folds=2, n_boot=10, head=HeadConfig(head="logistic"))
    audit(PAIRS, config, out=root / "exp", trainer=trainer, quiet=True)
    return root / "exp"


@pytest.fixture(scope="module")
def lora_rm(tmp_path_factory, tiny_causal_dir):
    root = tmp_path_factory.mktemp("export-lora")
    cfg = TrainConfig(model=str(tiny_causal_dir), device="cpu", max_length=40, epochs=2,
                      batch_size=4, lr=5e-2, head_lr=5e-2, center_coef=0.1)  # fmt: skip
    train(PAIRS, cfg, out=root / "rm", quiet=True)
    return root / "rm"


def test_audit_run_exports_to_a_sequence_classifier_with_equal_rewards(audit_dir, tmp_path):
    rm = load_rm(audit_dir, cache_dir=False).members[1]
    out = tmp_path / "hf"
    exported = export_rm(audit_dir, out, run="001")
    assert exported.max_abs_diff <= TOLERANCE
    expected = rm.score(PAIRS.prompt, PAIRS.chosen)
    got, config = hf_rewards(out, PAIRS.prompt, PAIRS.chosen)
    assert config.architectures == ["LlamaForSequenceClassification"]
    assert config.pad_token_id is not None
    np.testing.assert_allclose(got + config.rmlens_reward_offset, expected, atol=1e-4)
    # standardization folded in: the offset is the head's b - w . mu / s, not 0
    assert abs(config.rmlens_reward_offset) > 1e-6
    card = (out / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: transformers") and "run 001" in card
    assert "held-out accuracy" in card and "Memorized:" in card


def test_lora_rm_exports_merged_with_its_head(lora_rm, tmp_path):
    rm = load_rm(lora_rm)
    out = tmp_path / "hf"
    exported = export_rm(lora_rm, out)
    got, config = hf_rewards(out, PAIRS.prompt, PAIRS.chosen)
    expected = rm.score(PAIRS.prompt, PAIRS.chosen)
    # Llama's score layer has no bias: the head's bias is the recorded offset
    assert exported.offset == pytest.approx(float(rm.net.head.bias), abs=1e-7)
    np.testing.assert_allclose(got + exported.offset, expected, atol=1e-4)
    r_c, r_r = rm.score_pairs(PAIRS)
    h_r, _ = hf_rewards(out, PAIRS.prompt, PAIRS.rejected)
    np.testing.assert_allclose(got - h_r, r_c - r_r, atol=1e-4)  # margins: no offset needed
    assert not (out / "adapter_config.json").exists()
    # rmlens reading the export adds the offset back: the same rewards as the original
    again = load_rm(out).score(PAIRS.prompt, PAIRS.chosen)
    np.testing.assert_allclose(again, expected, atol=1e-4)


def test_export_files_are_readable_as_save_pretrained_leaves_them(lora_rm, tmp_path):
    """Every file the export writes is 0666 less the umask (0644 under umask 022), the
    weights too: safetensors writes them owner-only (0600) through a temporary file."""
    before = os.umask(0o022)
    try:
        export_rm(lora_rm, tmp_path / "hf")
    finally:
        os.umask(before)
    files = [f for f in (tmp_path / "hf").rglob("*") if f.is_file()]
    assert {"model.safetensors", "adapter_model.safetensors"} <= {f.name for f in files}
    modes = {str(f.relative_to(tmp_path)): oct(f.stat().st_mode & 0o777) for f in files}
    assert set(modes.values()) == {"0o644"}, modes


def test_an_rm_folder_is_readable_as_save_pretrained_leaves_it(lora_rm, tmp_path):
    """``rmlens train``'s own folder too: its head and adapter weights are not owner-only."""
    rm = load_rm(lora_rm, device="cpu")
    before = os.umask(0o022)
    try:
        rm.save(tmp_path / "again")
    finally:
        os.umask(before)
    weights = list((tmp_path / "again").rglob("*.safetensors"))
    assert {"head.safetensors", "adapter_model.safetensors"} <= {f.name for f in weights}
    assert {oct(f.stat().st_mode & 0o777) for f in weights} == {"0o644"}


def test_the_card_says_to_force_truncation_in_rewardbench(lora_rm, tmp_path):
    exported = export_rm(lora_rm, tmp_path / "hf")
    card = (tmp_path / "hf" / "README.md").read_text()
    assert "as it is" not in card
    assert ("In RewardBench 0.1.4 pass `--force_truncation`: it then cuts each sequence from "
            "the left at this tokenizer's `model_max_length` (40 tokens), keeping what rmlens "
            "kept; without it RewardBench truncates nothing, so a pair longer than 40 tokens "
            "is scored whole, with other rewards than rmlens's") in card
    assert exported.max_length == 40


def test_ensemble_needs_a_run_and_unknown_runs_are_named(audit_dir, tmp_path):
    with pytest.raises(InputError, match="choose the one to export"):
        export_rm(audit_dir, tmp_path / "a")
    with pytest.raises(InputError, match="no such member"):
        export_rm(audit_dir, tmp_path / "b", run="007")


def test_encoder_rms_are_refused_in_one_line(tiny_encoder_dir, tmp_path):
    from rmlens.rewards import FrozenHeadTrainer, HeadConfig

    trainer = FrozenHeadTrainer(HeadConfig(head="logistic"), model=str(tiny_encoder_dir),
                                cache_dir=False)  # fmt: skip
    trainer.fit(PAIRS, quiet=True)
    with pytest.raises(InputError, match="no standard Hugging Face sequence-classification"):
        export_rm(trainer.rm_, tmp_path / "enc")


def test_half_an_rm_folder_is_refused_with_what_to_pass(lora_rm):
    with pytest.raises(InputError, match="pass its parent folder"):
        load_rm(lora_rm / "adapter")


def test_rm_loads_from_another_working_directory(tiny_causal_dir, tmp_path, monkeypatch):
    """The base model given as a relative path is recorded resolved, so the RM loads from
    any working directory; a base that is gone is one clear line."""
    models = tmp_path / "work" / "models"
    shutil.copytree(tiny_causal_dir, models / "tiny")
    monkeypatch.chdir(tmp_path / "work")
    cfg = TrainConfig(model="models/tiny", device="cpu", max_length=40, epochs=1, batch_size=4)
    rm = train(PAIRS, cfg, out="rm", quiet=True)
    saved = json.loads((tmp_path / "work" / "rm" / "rm_config.json").read_text())
    assert saved["base"] == str(models / "tiny")
    expected = rm.score(PAIRS.prompt, PAIRS.chosen)
    os.chdir(tmp_path)
    again = load_rm(tmp_path / "work" / "rm").score(PAIRS.prompt, PAIRS.chosen)
    np.testing.assert_allclose(again, expected, atol=1e-6)
    PAIRS.to_json(tmp_path / "pairs.jsonl", orient="records", lines=True)
    result = run_cli(["evaluate", "--rm", "work/rm", "--data", "pairs.jsonl", "--out", "ev",
                      "--probes", "none", "--quiet"])  # fmt: skip
    assert result.exit_code == 0, result.output
    shutil.rmtree(models)
    with pytest.raises(InputError, match="base model .* not found"):
        load_rm(tmp_path / "work" / "rm")


def test_cli_export_and_train_export(lora_rm, audit_dir, tmp_path, tiny_causal_dir):
    result = run_cli(["export", lora_rm, "--out", tmp_path / "a", "--quiet"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "a" / "config.json").is_file()
    result = run_cli(["export", audit_dir, "--out", tmp_path / "b"])
    assert result.exit_code == 2 and "--run" in result.output
    result = run_cli(["export", audit_dir, "--out", tmp_path / "b", "--run", "000"])
    assert result.exit_code == 0, result.output
    assert "max |difference|" in result.output
    data = tmp_path / "pairs.jsonl"
    PAIRS.to_json(data, orient="records", lines=True)
    argv = ["train", "--data", data, "--out", tmp_path / "rm", "--model", tiny_causal_dir,
            "--epochs", "1", "--max-length", "40", "--batch-size", "4", "--device", "cpu",
            "--export", tmp_path / "hf", "--quiet"]  # fmt: skip
    result = run_cli(argv)
    assert result.exit_code == 0, result.output
    assert len(json.loads((tmp_path / "hf" / "config.json").read_text())["id2label"]) == 1


def test_implicit_rm_exports_its_policy_with_reference_and_beta(tiny_causal_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    cfg = TrainConfig(model=str(tiny_causal_dir), rm_kind="implicit", device="cpu", max_length=40,
                      epochs=1, batch_size=4, lr=5e-2, beta=0.2)  # fmt: skip
    rm = train(PAIRS, cfg, out=tmp_path / "im", quiet=True)
    exported = export_rm(tmp_path / "im", tmp_path / "hf")
    assert exported.kind == "causal_lm_policy"
    policy = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    assert policy.config.rmlens_implicit == {"reference": str(tiny_causal_dir), "beta": 0.2}
    merged = rm.net.lm.merge_and_unload()  # the trained policy, adapters merged
    for name, value in policy.state_dict().items():
        torch.testing.assert_close(value, merged.state_dict()[name], atol=1e-6, rtol=0)
    assert "beta = 0.2" in (tmp_path / "hf" / "README.md").read_text()


def test_trl_grpo_takes_the_export_as_its_reward(lora_rm, tiny_causal_dir, tmp_path):
    """TRL's GRPO loads the folder by path (``reward_funcs``) and rewards its completions."""
    pytest.importorskip("trl", reason="TRL is a dev dependency (pip install -e '.[dev]')")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    export_rm(lora_rm, tmp_path / "hf")
    prompts = [{"prompt": [{"role": "user", "content": p}]} for p in PAIRS.prompt[:4]]
    args = GRPOConfig(output_dir=str(tmp_path / "grpo"), max_steps=1, num_generations=4,
                      per_device_train_batch_size=4, max_completion_length=4, report_to=[],
                      logging_steps=1, use_cpu=True, save_strategy="no")  # fmt: skip
    trainer = GRPOTrainer(model=str(tiny_causal_dir), reward_funcs=str(tmp_path / "hf"),
                          args=args, train_dataset=Dataset.from_list(prompts))  # fmt: skip
    trainer.train()
    logged = next(h for h in trainer.state.log_history if "reward" in h)
    assert np.isfinite(logged["reward"]) and logged["reward_std"] > 0
