r"""One tokenization for training and scoring (DESIGN.md section 2, pitfalls).

Encoders get the pair encoding ``[CLS] prompt [SEP] response [SEP]``; causal LMs with a chat
template get the templated conversation tokenized without adding special tokens again (the
template already holds BOS/EOS). A prompt that is an HH-RLHF transcript
(``"\n\nHuman: ... \n\nAssistant: ..."``) becomes its turns as user and assistant
messages, not one user message quoting the role markers. Truncation cuts the prompt from the
left and keeps the response.
"""

from __future__ import annotations

import re
from typing import Any

from transformers import PreTrainedTokenizerBase

from rmlens.data._schema import to_text

# An HH-RLHF turn marker: "Human:" or "Assistant:" at the start or after a blank line
_TURN = re.compile(r"(?:^|\n\n)(Human|Assistant):[ \t]?")
_ROLES = {"Human": "user", "Assistant": "assistant"}


def transcript_messages(text: str) -> list[dict[str, str]] | None:
    r"""The turns of an HH-RLHF transcript as chat messages; None when ``text`` is not one.

    The trailing empty ``"Assistant:"`` cue (where the response goes) is dropped.

    Examples
    --------
    >>> transcript_messages("\n\nHuman: Hi\n\nAssistant: Hello\n\nHuman: Bye\n\nAssistant:")
    ... # doctest: +NORMALIZE_WHITESPACE
    [{'role': 'user', 'content': 'Hi'}, {'role': 'assistant', 'content': 'Hello'},
     {'role': 'user', 'content': 'Bye'}]
    >>> transcript_messages("What is 2 + 2?") is None
    True
    """
    body = text.lstrip("\n")
    if not body.startswith("Human:"):
        return None
    parts = _TURN.split(body)  # ["", "Human", text, "Assistant", text, ...]
    turns = [{"role": _ROLES[r], "content": c.strip()} for r, c in zip(parts[1::2], parts[2::2])]
    if turns[-1]["role"] == "assistant" and not turns[-1]["content"]:
        turns.pop()
    return turns


def prompt_messages(prompt: Any) -> list[dict[str, str]]:
    """A prompt as chat messages: messages as given, a transcript as its turns, else one
    user message."""
    if isinstance(prompt, list):
        return [{"role": m["role"], "content": m["content"]} for m in prompt]
    text = str(prompt)
    return transcript_messages(text) or [{"role": "user", "content": text}]


def _messages(prompt: Any, response: Any) -> list[dict[str, str]]:
    tail = (
        list(response)
        if isinstance(response, list)
        else [{"role": "assistant", "content": str(response)}]
    )
    return prompt_messages(prompt) + [{"role": m["role"], "content": m["content"]} for m in tail]


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
