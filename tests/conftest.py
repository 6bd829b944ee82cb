"""Shared fixtures: tiny random backbones built from a config (no downloads), shared data."""

from __future__ import annotations

import contextlib
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

# `precision auto` resolves to fp32 in every process the suite starts, whatever the machine
# multiplies natively: results do not depend on the CPU's flags; the bf16 paths are tested
# with `precision="bf16"` given (tests/test_precision.py)
os.environ["RMLENS_AUTO_PRECISION"] = "fp32"

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
WORDS = [
    "the",
    "a",
    "an",
    "is",
    "are",
    "was",
    "be",
    "to",
    "of",
    "and",
    "in",
    "on",
    "for",
    "with",
    "it",
    "this",
    "that",
    "you",
    "i",
    "we",
    "they",
    "he",
    "she",
    "what",
    "how",
    "why",
    "who",
    "when",
    "where",
    "can",
    "do",
    "does",
    "please",
    "thanks",
    "sorry",
    "sure",
    "here",
    "help",
    "answer",
    "question",
    "good",
    "bad",
    "great",
    "best",
    "worst",
    "thing",
    "ever",
    "one",
    "word",
    "love",
    "hate",
    "cat",
    "dog",
    "food",
    "water",
    "sun",
    "moon",
    "red",
    "blue",
    "big",
    "small",
    "yes",
    "no",
    "never",
    "certainly",
    "absolutely",
    "nope",
    "not",
    "really",
    "human",
    "assistant",
    "user",
    "system",
    ",",
    ".",
    "!",
    "?",
    ":",
]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }}{{ eos_token }}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def shared_file(name: str) -> Path:
    path = SHARED_DATA / name
    if not path.exists():
        pytest.skip(f"shared dataset {name} not found under {SHARED_DATA}")
    return path


def assert_strict_json(folder: Path) -> int:
    """Every JSON file under ``folder`` parses with a strict reader (no NaN, no Infinity, as
    jq and JavaScript's ``JSON.parse`` require); returns how many were read."""
    import json

    def refuse(constant: str):
        raise ValueError(f"{constant} is not JSON")

    files = sorted(folder.rglob("*.json"))
    for path in files:
        try:
            json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)
        except ValueError as err:
            raise AssertionError(f"{path}: not strict JSON ({err})") from None
    return len(files)


def _word_tokenizer(special: list[str], **kwargs):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(special + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", **kwargs)


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory) -> Path:
    """A 2-layer BERT with a word-level tokenizer: [CLS] prompt [SEP] response [SEP]."""
    import torch
    from tokenizers import processors
    from transformers import BertConfig, BertModel

    path = tmp_path_factory.mktemp("tiny-encoder")
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = _word_tokenizer(
        special, pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]"
    )
    tok._tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    tok.save_pretrained(path)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_causal_dir(tmp_path_factory) -> Path:
    """A 2-layer Llama with a chat template whose text already holds BOS and EOS."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    path = tmp_path_factory.mktemp("tiny-causal")
    special = ["<pad>", "[UNK]", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>"]
    tok = _word_tokenizer(
        special,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        additional_special_tokens=special[4:],
    )
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(path)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=256,
        pad_token_id=0,
        bos_token_id=2,
        eos_token_id=3,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).save_pretrained(path)
    return path


def words_only(text: str) -> str:
    return re.sub(r"[^a-z ,.!?:]", "", text.lower())


def length_pairs(n: int = 60, users: int = 6) -> pd.DataFrame:
    """Pairs whose chosen response is a long random word string, the rejected a short one."""
    rng = np.random.default_rng(0)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
    rows = []
    for i in range(n):
        long = " ".join(rng.choice(words, 12))
        short = " ".join(rng.choice(words, 3))
        rows.append({
            "id": f"p{i}", "prompt": f"question {i}", "chosen": long, "rejected": short,
            "user_id": f"u{i % users}",
        })  # fmt: skip
    return pd.DataFrame(rows)


@dataclass
class CliResult:
    """What ``rmlens.cli.main`` returned and wrote, as Typer's runner reports it."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_cli(args, env: dict[str, str] | None = None) -> CliResult:
    """Run the command line through ``main`` (its one exit-code path), capturing both streams."""
    from rmlens.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([str(a) for a in args])
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return CliResult(code, out.getvalue(), err.getvalue())
