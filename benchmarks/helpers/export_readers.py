"""The transformers side of ``benchmarks/rewardbench_export.py``: the tiny SmolLM2-shaped
Llama it exports, and how plain transformers and RewardBench's own preparation read an
exported folder. Also run under other venvs' interpreters (the script's helper modes), so
this module imports no rmlens, and torch, transformers and rewardbench only where used."""

from __future__ import annotations

import json
import re
from pathlib import Path

CHAT_TEMPLATE = (  # SmolLM2-Instruct's ChatML template
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{ '<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def load_export(folder: str, padding_side: str):
    import torch
    import transformers
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    major = int(transformers.__version__.split(".")[0])
    dtype = {"dtype" if major >= 5 else "torch_dtype": torch.float32}
    model = AutoModelForSequenceClassification.from_pretrained(folder, **dtype).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.padding_side = padding_side
    extra = json.loads((Path(folder) / "config.json").read_text())
    return model, tokenizer, extra


def batch_logits(model, batch: list[list[int]], pad: int, left: bool = False) -> list[float]:
    import torch

    width = max(len(s) for s in batch)
    ids = [([pad] * (width - len(s)) + s) if left else (s + [pad] * (width - len(s)))
           for s in batch]  # fmt: skip
    mask = [([0] * (width - len(s)) + [1] * len(s)) if left else
            ([1] * len(s) + [0] * (width - len(s))) for s in batch]  # fmt: skip
    with torch.inference_mode():
        out = model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask))
    return out.logits[:, 0].double().tolist()


def hf_encode(tokenizer, record: dict, side: str, fmt: str) -> list[int]:
    """A user's encoding of the exported folder: the chat template, then the tokenizer
    without special tokens (the template holds them); ``raw``: prompt + response + EOS."""
    if fmt == "chat":
        text = tokenizer.apply_chat_template(record[side], tokenize=False)
        return tokenizer(text, add_special_tokens=False)["input_ids"]
    text = record[f"raw_{side}"]  # prompt + response (an HH transcript as it was)
    eos = tokenizer.eos_token
    return tokenizer(text if not eos or text.endswith(eos) else text + eos)["input_ids"]


def run_card(folder: str) -> dict:
    """The model card's code example, run as written; the reward it prints."""
    import contextlib
    import io

    card = (Path(folder) / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", card, re.S).group(1)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {})
    return {"reward": float(re.search(r"reward (\S+)", printed.getvalue()).group(1))}


def score_hf(folder: str, records: list[dict], batch_size: int) -> dict:
    """Rewards of the exported folder by transformers alone, the offset added."""
    import transformers

    model, tokenizer, extra = load_export(folder, "right")
    fmt, offset = extra.get("rmlens_format", "chat"), extra.get("rmlens_reward_offset", 0.0)
    out = {"version": transformers.__version__, "tokenizer_class": type(tokenizer).__name__}
    for side in ("chosen", "rejected"):
        seqs = [hf_encode(tokenizer, r, side, fmt) for r in records]
        scores = []
        for i in range(0, len(seqs), batch_size):
            scores += batch_logits(model, seqs[i : i + batch_size], model.config.pad_token_id)
        out[side] = [s + offset for s in scores]
    return out


def score_rewardbench_prep(folder: str, data: str, batch_size: int, max_length: int) -> dict:
    """What the ``rewardbench`` CLI computes, on CPU: its dataset preparation
    (``load_and_process_dataset``: chat template, ``text_chosen``/``text_rejected``) and its
    pipeline's tokenization (``RewardBenchPipeline.__call__``: left padding, special tokens
    added, a doubled BOS masked), without the pipeline's ``.to("cuda")``. No offset added."""
    import rewardbench
    import torch
    from rewardbench import load_and_process_dataset

    model, tokenizer, _ = load_export(folder, "left")
    dataset = load_and_process_dataset(data, split=None, json=True, tokenizer=tokenizer)
    out = {"version": rewardbench.__version__}
    for side in ("chosen", "rejected"):
        texts, scores = dataset[f"text_{side}"], []
        for i in range(0, len(texts), batch_size):
            inputs = tokenizer(texts[i : i + batch_size], truncation=False, max_length=max_length,
                               padding=True, return_tensors="pt")  # fmt: skip
            ids, mask = inputs["input_ids"], inputs["attention_mask"]
            if tokenizer.bos_token:  # the pipeline's double-BOS fix
                start = mask.argmax(dim=1)
                second = torch.clamp(start + 1, max=ids.size(1) - 1)
                rows = torch.arange(ids.size(0))
                double = (ids[rows, start] == tokenizer.bos_token_id) & (
                    ids[rows, second] == tokenizer.bos_token_id)  # fmt: skip
                mask[rows[double], start[double]] = 0
            with torch.inference_mode():
                scores += model(input_ids=ids, attention_mask=mask).logits[:, 0].double().tolist()
        out[side] = scores
        out[f"first_text_{side}"] = texts[0]
    return out


def tiny_llama(path: Path, texts: list[str]) -> Path:
    """A 2-layer random Llama shaped like SmolLM2: a byte-level BPE trained on ``texts``,
    its ChatML template (a default system turn), ``<|im_end|>`` as turn end, EOS and pad
    token (the pad a careless export leaves inside every chat sequence), RoPE base 100000."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=4000, special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))  # fmt: skip
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>",
        pad_token="<|im_end|>", unk_token="<|endoftext|>",
    )  # fmt: skip
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(path)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, intermediate_size=128, max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True,
        rope_theta=100000.0,  # SmolLM2's: not the default, so a config that loses it shows
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(path)
    return path
