r"""One tokenization for training and scoring (DESIGN.md section 2, pitfalls).

The format is an explicit choice (``format``), resolved once per model
(``rmlens.backbones._formats.resolve_format``) and recorded with every output:

- ``chat``: the tokenizer's chat template, the templated conversation tokenized without
  adding special tokens again (the template already holds BOS/EOS). A prompt that is an
  HH-RLHF transcript (``"\n\nHuman: ... \n\nAssistant: ..."``) becomes its turns as user
  and assistant messages, not one user message quoting the role markers.
- ``raw``: TRL's text path, exactly: ``prompt + response`` (no separator; conversations
  flattened by ``to_text``; an HH transcript's response after one space, as the transcript
  had it), EOS appended unless the text ends with it, tokenized with the tokenizer's own
  special tokens (``RewardTrainer``'s ``add_eos``, then ``tokenizer(text=prompt + chosen)``).
- ``pair``: the pair encoding ``[CLS] prompt [SEP] response [SEP]`` (encoders).
- ``auto``: chat when the tokenizer has a template, else raw (causal LMs) or pair (encoders).

Truncation cuts the prompt from the left and keeps the response; in ``raw``, the special
tokens the tokenizer adds (BOS) stay, as transformers' left truncation keeps them.
"""

from __future__ import annotations

import re
from typing import Any

from transformers import PreTrainedTokenizerBase

from rmlens._errors import InputError
from rmlens.backbones._formats import truncation_summary
from rmlens.data import to_text

# An HH-RLHF turn marker: "Human:" or "Assistant:" at the start or after a blank line
_TURN = re.compile(r"(?:^|\n\n)(Human|Assistant):[ \t]?")
_ROLES = {"Human": "user", "Assistant": "assistant"}
NO_LIMIT = 1 << 30  # a max_length that cuts nothing; a tokenizer that states none says ~1e30
_CUE = "\n\nAssistant:"  # where an HH transcript's response starts


def prepare_tokenizer(tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    """Set up a loaded tokenizer as rmlens uses it, in place: EOS (else UNK) pads when it has
    no pad token, and it cuts nothing itself (``model_max_length``: :data:`NO_LIMIT`), as
    :func:`encode_pair` truncates, the prompt from the left.

    Read the tokenizer's stated limit (``default_max_length``) before: this lifts it.

    Parameters
    ----------
    tokenizer : PreTrainedTokenizerBase
        A tokenizer just loaded.

    Returns
    -------
    PreTrainedTokenizerBase
        The same tokenizer.
    """
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    tokenizer.model_max_length = NO_LIMIT
    return tokenizer


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


def raw_text(tokenizer: PreTrainedTokenizerBase, prompt: Any, response: Any) -> str:
    r"""TRL's non-conversational text: ``prompt + response``, plus EOS unless it ends with it.

    An HH-RLHF transcript prompt ends with the ``"\n\nAssistant:"`` cue, and the loader
    split the transcript there and stripped the response's leading space
    (``split_transcripts``). TRL tokenizes the transcript as it was, ``"Assistant: Oh"``,
    so such a prompt is joined to a response that does not start with whitespace by one
    space (every one of the 4,624 transcripts of HH's harmless test split is rebuilt
    exactly, an empty response's ``"Assistant: "`` included).

    Examples
    --------
    >>> class Tok:
    ...     eos_token = "</s>"
    >>> raw_text(Tok(), "\n\nHuman: Hi\n\nAssistant:", "Oh")
    '\n\nHuman: Hi\n\nAssistant: Oh</s>'
    >>> raw_text(Tok(), "Q: 2 + 2 =", " 4")
    'Q: 2 + 2 = 4</s>'
    """
    prompt_text, response_text = to_text(prompt), to_text(response)
    if (
        prompt_text.endswith(_CUE)
        and not response_text[:1].isspace()
        and transcript_messages(prompt_text) is not None
    ):
        prompt_text += " "
    text = prompt_text + response_text
    eos = tokenizer.eos_token
    return text if not eos or text.endswith(eos) else text + eos


def _cut_left(tokenizer: PreTrainedTokenizerBase, text: str, ids: list[int],
              max_length: int) -> list[int]:  # fmt: skip
    """``ids`` (``text`` with the tokenizer's special tokens) cut to ``max_length`` as
    transformers cuts with ``truncation_side="left"``: the special tokens the tokenizer
    adds (BOS) stay, the text loses its start. An exported RM's tokenizer truncates so
    (``rmlens.hub.export_rm``), and rmlens scores as its users will."""
    if len(ids) <= max_length:
        return ids
    bare = tokenizer(text, add_special_tokens=False)["input_ids"]
    start = next((k for k in range(len(ids) - len(bare) + 1)
                  if ids[k : k + len(bare)] == bare), None)  # fmt: skip
    if start is None:
        return ids[-max_length:]
    front, back = ids[:start], ids[start + len(bare) :]
    budget = max_length - len(front) - len(back)
    return front + bare[len(bare) - budget :] + back if budget > 0 else ids[-max_length:]


def format_or_default(tokenizer: PreTrainedTokenizerBase, format: str | None) -> str:
    """``format`` as given; None or auto: the older default, the chat template when the
    tokenizer has one, else the pair encoding (``resolve_format`` resolves auto by the
    model's kind instead)."""
    if format is None or format == "auto":
        return "chat" if getattr(tokenizer, "chat_template", None) else "pair"
    return format


def encode_pair(
    tokenizer: PreTrainedTokenizerBase,
    prompt: Any,
    response: Any,
    max_length: int,
    *,
    format: str | None = None,
) -> tuple[list[int], int]:
    """Token ids of one (prompt, response) sequence, at most ``max_length`` long, and the
    length it had before truncation.

    ``format``: ``chat``, ``raw`` or ``pair`` (module docstring), as resolved for the model
    (``resolve_format``: auto needs the model's kind); None or auto here keeps the older
    choice: the chat template when there is one, else the pair encoding.
    """
    format = format_or_default(tokenizer, format)
    if format == "chat":
        if not getattr(tokenizer, "chat_template", None):
            raise InputError("`format` chat: the tokenizer has no chat template")
        text = tokenizer.apply_chat_template(_messages(prompt, response), tokenize=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        return ids[-max_length:], len(ids)
    if format == "raw":
        text = raw_text(tokenizer, prompt, response)
        ids = tokenizer(text)["input_ids"]
        return _cut_left(tokenizer, text, ids, max_length), len(ids)
    if format != "pair":
        raise ValueError(f"unknown format {format!r}: expected chat, raw or pair")
    enc = pair_encoding(tokenizer, prompt, response)
    ids = enc["input_ids"]
    return [ids[i] for i in pair_kept(enc.sequence_ids(), max_length)], len(ids)


def pair_encoding(tokenizer: PreTrainedTokenizerBase, prompt: Any, response: Any):
    """The whole pair encoding ``[CLS] prompt [SEP] response [SEP]`` (a transformers
    ``BatchEncoding``: its ``sequence_ids()`` tell prompt, response and special tokens)."""
    separator = "" if tokenizer.sep_token else "\n\n"
    return tokenizer(to_text(prompt), separator + to_text(response), add_special_tokens=True)


def pair_kept(owner: list[int | None], max_length: int) -> list[int]:
    """The positions of a pair encoding that truncation to ``max_length`` keeps, in order:
    every special token, the response's first tokens (at least one), then the prompt's last
    tokens in what room is left.

    ``owner`` is the encoding's ``sequence_ids()``: 0 prompt, 1 response, None special.

    Examples
    --------
    >>> pair_kept([None, 0, 0, 0, None, 1, 1, None], 6)
    [0, 3, 4, 5, 6, 7]
    """
    special = [i for i, o in enumerate(owner) if o is None]
    response = [i for i, o in enumerate(owner) if o == 1][: max(max_length - len(special), 1)]
    budget = max_length - len(special) - len(response)
    prompt = [i for i, o in enumerate(owner) if o == 0]
    prompt = prompt[len(prompt) - budget :] if budget > 0 else []
    return sorted(special + response + prompt)


def encode_pair_text(
    tokenizer: PreTrainedTokenizerBase,
    prompt: Any,
    response: Any,
    max_length: int,
    *,
    format: str | None = None,
) -> list[int]:
    """Token ids of one (prompt, response) sequence, at most ``max_length`` long
    (:func:`encode_pair` without the length before truncation)."""
    return encode_pair(tokenizer, prompt, response, max_length, format=format)[0]


def pairs_truncation(
    tokenizer: PreTrainedTokenizerBase, pairs, max_length: int, *, format: str | None = None
) -> dict:
    """What truncation to ``max_length`` cuts from a pair table (``prompt``, ``chosen``,
    ``rejected``) in ``format``: ``rmlens.backbones._formats.truncation_summary``."""

    def lengths(side) -> list[int]:
        return [encode_pair(tokenizer, p, r, NO_LIMIT, format=format)[1]
                for p, r in zip(pairs.prompt, side)]  # fmt: skip

    return truncation_summary(max_length, lengths(pairs.chosen), lengths(pairs.rejected))
