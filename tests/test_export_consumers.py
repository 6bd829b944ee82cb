"""An exported RM read by every consumer it is made for (issue 38): transformers' own class,
a reader that stops at the first pad (transformers 4.44 to 4.48, TRL's PPO), TRL's GRPO
through ``reward_function``, RewardBench's preparation, the model card's example; the
missing-head refusal; raw text equal to TRL's text path on HH transcripts.

The base is SmolLM2-like on purpose: a ChatML template whose turn end ``<|im_end|>`` is also
its EOS and its pad token, a byte-level BPE (``"Assistant: Oh"`` and ``"Assistant:Oh"``
tokenize differently) and a BOS the tokenizer adds to plain text (as Llama's does).
"""

import json
import re
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from tests.conftest import run_cli, shared_file

from rmlens._errors import InputError, RmlensWarning
from rmlens.backbones._tokenize import encode_pair_text
from rmlens.hub import load_rm, reward_function, train
from rmlens.hub._export import export_rm
from rmlens.rewards import TrainConfig

CHATML = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant.<|im_end|>\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
HH = "\n\nHuman: {q}\n\nAssistant: {a}"
QUESTIONS = ["what is the best thing ever?", "can you help me with my cat?",
             "why is the sky blue?", "how do i cook rice?", "who are you?",
             "where is the moon?"]  # fmt: skip
GOOD = ["Oh, I think the sun is the best thing.", "Sure, here is help with your cat.",
        "The sky is blue because of the sun.", "Rice is good with water.",
        "I am a helpful assistant.", "The moon is in the sky."]  # fmt: skip
BAD = ["No.", "I hate cats.", "Never.", "Nope.", "Who cares.", "Not really."]
MAX_LENGTH = 64


def hh_pairs() -> pd.DataFrame:
    """HH-RLHF-style rows: whole transcripts sharing a prefix (the implicit prompt)."""
    rows = []
    for i, (q, good, bad) in enumerate(zip(QUESTIONS * 2, GOOD * 2, BAD[::-1] + BAD)):
        first = HH.format(q="hello there", a="Hello!") if i >= 6 else ""
        rows.append({"chosen": first + HH.format(q=q, a=good),
                     "rejected": first + HH.format(q=q, a=bad),
                     "user_id": f"u{i % 4}"})  # fmt: skip
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def chatml_dir(tmp_path_factory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    path = tmp_path_factory.mktemp("chatml")
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [HH.format(q=q, a=a) for q, a in zip(QUESTIONS, GOOD + BAD)] * 10
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=500, special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))  # fmt: skip
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 3)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="<|im_end|>",
                                   pad_token="<|im_end|>", unk_token="<|endoftext|>")  # fmt: skip
    fast.chat_template = CHATML
    fast.save_pretrained(path)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, intermediate_size=64,
                         max_position_embeddings=128, pad_token_id=fast.pad_token_id,
                         bos_token_id=fast.bos_token_id,
                         eos_token_id=fast.eos_token_id)  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """The HH rows as rmlens loads them: prompt split off at the last shared turn."""
    from rmlens.data import load_pairs

    path = tmp_path_factory.mktemp("hh") / "hh.jsonl"
    hh_pairs().to_json(path, orient="records", lines=True)
    return load_pairs(path)


@pytest.fixture(scope="module", params=["chat", "raw"])
def exported(request, tmp_path_factory, chatml_dir, pairs):
    """One LoRA RM per format, trained and exported once: (rm, folder, format)."""
    root = tmp_path_factory.mktemp(f"consumers-{request.param}")
    cfg = TrainConfig(model=str(chatml_dir), device="cpu", max_length=MAX_LENGTH, epochs=2,
                      batch_size=4, lr=5e-2, head_lr=5e-2, center_coef=0.1,
                      format=request.param)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RmlensWarning)  # the long transcripts are cut
        rm = train(pairs, cfg, out=root / "rm", quiet=True)
    export_rm(root / "rm", root / "hf")
    return rm, root / "hf", request.param


def _hf(folder):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    return model, AutoTokenizer.from_pretrained(folder)


def _texts(tokenizer, prompts, responses, fmt):
    """What a user of the folder writes: rmlens's formatting, by hand."""
    from rmlens.backbones._tokenize import prompt_messages, raw_text

    if fmt == "raw":
        return [raw_text(tokenizer, p, r) for p, r in zip(prompts, responses)]
    return [tokenizer.apply_chat_template(
        prompt_messages(p) + [{"role": "assistant", "content": r}], tokenize=False)
        for p, r in zip(prompts, responses)]  # fmt: skip


def test_the_pad_occurs_in_no_formatted_sequence_and_the_tokenizer_travels(exported, pairs):
    rm, folder, fmt = exported
    _, tokenizer = _hf(folder)
    pad = tokenizer.pad_token_id
    assert pad not in (tokenizer.eos_token_id, tokenizer.bos_token_id)  # not <|im_end|>
    for side in (pairs.chosen, pairs.rejected):
        for p, r in zip(pairs.prompt, side):
            assert pad not in encode_pair_text(tokenizer, p, r, 1 << 30, format=fmt)
    saved = json.loads((folder / "tokenizer_config.json").read_text())
    assert saved["padding_side"] == "right" and saved["truncation_side"] == "left"
    assert saved["model_max_length"] == MAX_LENGTH
    assert saved["model_input_names"] == ["input_ids", "attention_mask"]
    config = json.loads((folder / "config.json").read_text())
    assert config["rmlens_format"] == fmt and config["pad_token_id"] == pad
    # a raw RM's folder has no chat template for a consumer to misread it with
    assert bool(tokenizer.chat_template) == (fmt == "chat")


@pytest.mark.parametrize("side", ["right", "left"])
def test_transformers_own_class_gives_rmlens_rewards(exported, pairs, side):
    rm, folder, fmt = exported
    model, tokenizer = _hf(folder)
    tokenizer.padding_side = side
    texts = _texts(tokenizer, pairs.prompt, pairs.chosen, fmt)
    enc = tokenizer(texts, add_special_tokens=fmt == "raw", truncation=True, padding=True,
                    return_tensors="pt")  # fmt: skip
    assert set(enc) == {"input_ids", "attention_mask"}
    with torch.no_grad():
        got = model(**enc).logits[:, 0].double().numpy() + model.config.rmlens_reward_offset
    expected = rm.score(pairs.prompt, pairs.chosen)
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_a_reader_that_stops_at_the_first_pad_gives_rmlens_rewards(exported, pairs):
    """TRL's PPO reward (``get_reward``: positions and mask from ``ids != pad``, the token
    before the first pad), which transformers 4.44 to 4.48 also read."""
    rm, folder, fmt = exported
    model, tokenizer = _hf(folder)
    seqs = [encode_pair_text(tokenizer, p, r, MAX_LENGTH, format=fmt)
            for p, r in zip(pairs.prompt, pairs.rejected)]  # fmt: skip
    pad = model.config.pad_token_id
    width = max(map(len, seqs))
    batch = torch.tensor([s + [pad] * (width - len(s)) for s in seqs])
    try:
        from trl.experimental.utils import get_reward
    except ImportError:  # TRL is a dev dependency; the same rule by hand otherwise
        from rmlens.hub._export import first_pad_rewards

        got = first_pad_rewards(model, seqs, pad)
    else:
        with torch.no_grad():
            got = get_reward(model, batch, pad, 0)[1].double().numpy()
    expected = rm.score(pairs.prompt, pairs.rejected) - model.config.rmlens_reward_offset
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_reward_function_formats_string_and_message_prompts_as_trained(exported, pairs):
    rm, folder, fmt = exported
    reward = reward_function(folder)
    prompts, completions = list(pairs.prompt), list(pairs.chosen)
    np.testing.assert_allclose(reward(prompts, completions, completion_ids=None),
                               rm.score(prompts, completions), atol=1e-5)  # fmt: skip
    assert reward.__name__ == "rmlens_rm"
    if fmt == "chat":
        messages = [[{"role": "user", "content": q}] for q in QUESTIONS]
        answers = [[{"role": "assistant", "content": a}] for a in GOOD]
        np.testing.assert_allclose(reward(messages, answers), rm.score(QUESTIONS, GOOD),
                                   atol=1e-5)  # fmt: skip


def test_grpo_with_string_prompts_rewards_through_reward_function(exported, chatml_dir,
                                                                   tmp_path):  # fmt: skip
    """GRPO with plain-string prompts: TRL's own path would score ``prompt + completion``
    (no template, no EOS); through ``reward_function`` it is rmlens's reward."""
    pytest.importorskip("trl", reason="TRL is a dev dependency (pip install -e '.[dev]')")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    rm, folder, fmt = exported
    if fmt == "raw":
        pytest.skip("one GRPO run suffices: the raw folder is covered by the call above")
    reward, seen = reward_function(folder), []

    def logged(prompts, completions, **kwargs):
        seen.append((list(prompts), list(completions)))
        return reward(prompts, completions, **kwargs)

    args = GRPOConfig(output_dir=str(tmp_path), max_steps=1, num_generations=4,
                      per_device_train_batch_size=4, max_completion_length=4, report_to=[],
                      use_cpu=True, save_strategy="no", logging_steps=1)  # fmt: skip
    data = Dataset.from_list([{"prompt": q} for q in QUESTIONS[:4]])
    GRPOTrainer(model=str(chatml_dir), reward_funcs=logged, args=args,
                train_dataset=data).train()  # fmt: skip
    prompts, completions = seen[0]
    assert isinstance(prompts[0], str)
    np.testing.assert_allclose(reward(prompts, completions), rm.score(prompts, completions),
                               atol=1e-5)  # fmt: skip


def test_rewardbench_pipeline_inputs_are_what_the_model_takes(exported, pairs):
    """RewardBench's pipeline calls ``tokenizer(texts, padding=True, truncation=True,
    return_tensors="pt")`` and passes every key to the model: no ``token_type_ids``."""
    rm, folder, fmt = exported
    model, tokenizer = _hf(folder)
    texts = _texts(tokenizer, pairs.prompt, pairs.rejected, fmt)
    enc = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        model(**enc)  # 4.51 and 5.x raised TypeError on token_type_ids before


def test_rewardbench_preparation_where_installed(exported, pairs, tmp_path):
    rewardbench = pytest.importorskip(
        "rewardbench", reason="RewardBench pins transformers 4.51: see "
        "benchmarks/rewardbench_export.py, which runs it in its own virtual environment")
    rm, folder, fmt = exported
    if fmt != "chat":
        pytest.skip("RewardBench formats with the chat template")
    data = tmp_path / "rb.json"
    rows = [{"chosen": [{"role": "user", "content": q}, {"role": "assistant", "content": a}],
             "rejected": [{"role": "user", "content": q}, {"role": "assistant", "content": b}]}
            for q, a, b in zip(QUESTIONS, GOOD, BAD)]  # fmt: skip
    data.write_text(json.dumps(rows))
    model, tokenizer = _hf(folder)
    dataset = rewardbench.load_and_process_dataset(str(data), split=None, json=True,
                                                   tokenizer=tokenizer)  # fmt: skip
    enc = tokenizer(dataset["text_chosen"], padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        got = model(**enc).logits[:, 0].double().numpy() + model.config.rmlens_reward_offset
    np.testing.assert_allclose(got, rm.score(QUESTIONS, GOOD), atol=1e-5)


def test_the_model_card_example_runs_as_written(exported):
    rm, folder, fmt = exported
    card = (folder / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", card, re.S).group(1)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    printed = float(re.search(r"reward (\S+)", result.stdout).group(1))
    assert printed == pytest.approx(float(rm.score(["What is two plus two?"], ["Four."])[0]),
                                     abs=1e-5)  # fmt: skip


def test_a_folder_without_its_score_head_is_refused(exported, tmp_path, pairs):
    import shutil

    from safetensors.torch import load_file, save_file

    rm, folder, fmt = exported
    if fmt != "chat":
        pytest.skip("one folder suffices")
    broken = tmp_path / "no-head"
    shutil.copytree(folder, broken)
    weights = load_file(str(broken / "model.safetensors"))
    del weights["score.weight"]
    save_file(weights, str(broken / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(InputError, match=r"score\.weight missing from its weights"):
        load_rm(broken)
    with pytest.raises(InputError, match="missing from its weights"):
        reward_function(broken)
    data = tmp_path / "pairs.jsonl"
    pairs.to_json(data, orient="records", lines=True)
    for argv in (["score", "--rm", broken, "--data", data, "--out", tmp_path / "s.jsonl"],
                 ["evaluate", "--rm", broken, "--data", data, "--out", tmp_path / "ev",
                  "--probes", "none", "--quiet"],
                 ["sweep", "--rm", broken, "--out", tmp_path / "sw", "--max-tokens", "50",
                  "--quiet"]):  # fmt: skip
        result = run_cli(argv)
        assert result.exit_code == 2, (argv[0], result.stdout, result.stderr)
        message = [line for line in result.stderr.splitlines() if "missing" in line]
        assert len(message) == 1 and "score.weight" in message[0], result.stderr


def test_auto_reads_the_recorded_format_and_warns_when_it_guesses(exported, tmp_path):
    import shutil

    rm, folder, fmt = exported
    with warnings.catch_warnings():
        warnings.simplefilter("error", RmlensWarning)
        assert load_rm(folder).score(["hi"], ["Oh"]).shape == (1,)  # recorded: no guess
    if fmt != "chat":
        return  # a raw RM's folder has no template: auto reads raw, nothing to guess
    unrecorded = tmp_path / "trl-like"
    shutil.copytree(folder, unrecorded)
    config = json.loads((unrecorded / "config.json").read_text())
    del config["rmlens_format"]
    (unrecorded / "config.json").write_text(json.dumps(config))
    guessed = load_rm(unrecorded)
    assert guessed.format == "chat"
    with pytest.warns(RmlensWarning, match="guessed chat.*`format` raw"):
        guessed.score(["hi"], ["Oh"])


def test_raw_is_trl_text_path_token_for_token_on_hh_transcripts(chatml_dir, pairs):
    """TRL's RewardTrainer on implicit-prompt text: ``tokenizer(text=chosen + eos)`` of the
    whole transcript (reward_trainer.py ``add_eos`` then ``_tokenize``); rmlens splits the
    transcript into prompt and response and must rebuild it exactly."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(chatml_dir)
    raw = hh_pairs()
    for i, row in pairs.iterrows():
        for side in ("chosen", "rejected"):
            trl = tokenizer(text=raw[side][i] + tokenizer.eos_token)["input_ids"]
            ours = encode_pair_text(tokenizer, row.prompt, row[side], 1 << 30, format="raw")
            assert ours == trl, (row.prompt, row[side])


def test_raw_rebuilds_every_transcript_of_the_shared_hh_pairs():
    from rmlens.backbones._tokenize import raw_text
    from rmlens.data import load_pairs

    path = shared_file("hh-rlhf-harmless-base-test.jsonl.gz")
    pairs = load_pairs(path).head(400)
    raw = pd.read_json(path, lines=True).head(400)

    class Eos:
        eos_token = "<eos>"

    rebuilt = [raw_text(Eos(), p, c) for p, c in zip(pairs.prompt, pairs.chosen)]
    assert rebuilt == [c + "<eos>" for c in raw.chosen]


def test_every_truncation_is_counted_with_the_format(tiny_causal_dir, tmp_path):
    """``--eval-data`` cuts are counted and recorded beside the training data's, and
    ``score`` records the length it scored with beside the format."""
    from tests.test_finetune import PAIRS

    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    long = PAIRS.assign(prompt=[" ".join(["the good thing"] * 12)] * len(PAIRS))
    train_file, eval_file = tmp_path / "train.jsonl", tmp_path / "eval.jsonl"
    PAIRS.to_json(train_file, orient="records", lines=True)
    long.to_json(eval_file, orient="records", lines=True)
    argv = ["train", "--data", train_file, "--eval-data", eval_file, "--out", tmp_path / "rm",
            "--model", tiny_causal_dir, "--epochs", "1", "--max-length", "24",
            "--batch-size", "4", "--device", "cpu", "--quiet"]  # fmt: skip
    result = run_cli(argv)
    assert result.exit_code == 0, result.stderr
    assert "12 of 12 evaluation pairs cut to --max-length 24" in result.stderr
    record = json.loads((tmp_path / "rm" / "train.json").read_text())
    assert record["eval_truncation"]["pairs_cut"] == len(PAIRS)
    assert record["truncation"]["pairs_cut"] == 0
    result = run_cli(["score", "--rm", tmp_path / "rm", "--data", eval_file,
                      "--out", tmp_path / "s.jsonl", "--max-length", "20"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    saved = tomllib.loads((tmp_path / "s.config.toml").read_text())
    assert saved["max_length"] == 20 and saved["format"] == "chat"
