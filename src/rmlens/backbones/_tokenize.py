"""One tokenization for training and scoring (DESIGN.md section 2, pitfalls).

Encoders get the pair encoding ``[CLS] prompt [SEP] response [SEP]``; causal LMs with a chat
template get the templated conversation tokenized without adding special tokens again (the
template already holds BOS/EOS). Truncation cuts the prompt from the left and keeps the
response.
"""

from __future__ import annotations

from typing import Any

from transformers import PreTrainedTokenizerBase

from rmlens.data import to_text


def _messages(prompt: Any, response: Any) -> list[dict[str, str]]:
    head = list(prompt) if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
    tail = (
        list(response)
        if isinstance(response, list)
        else [{"role": "assistant", "content": str(response)}]
    )
    return [{"role": m["role"], "content": m["content"]} for m in head + tail]


def encode_pair_text(
    tokenizer: PreTrainedTokenizerBase, prompt: Any, response: Any, max_length: int
) -> list[int]:
    """Token ids of one (prompt, response) sequence, at most ``max_length`` long."""
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(_messages(prompt, response), tokenize=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        return ids[-max_length:]
    separator = "" if tokenizer.sep_token else "\n\n"
    enc = tokenizer(to_text(prompt), separator + to_text(response), add_special_tokens=True)
    ids, owner = enc["input_ids"], enc.sequence_ids()  # owner: 0 prompt, 1 response, None special
    special = [i for i, o in enumerate(owner) if o is None]
    response = [i for i, o in enumerate(owner) if o == 1][: max(max_length - len(special), 1)]
    budget = max_length - len(special) - len(response)
    prompt_pos = [i for i, o in enumerate(owner) if o == 0]
    prompt_pos = prompt_pos[len(prompt_pos) - budget :] if budget > 0 else []
    return [ids[i] for i in sorted(special + response + prompt_pos)]
