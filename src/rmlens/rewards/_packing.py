"""Tokenized examples: one prompt with K responses, best first, tokenized once.

Every sequence is tokenized by ``encode_pair``, the one tokenization of rmlens, in the
model's format (chat, raw or pair), each from its full text. The K sequences of an example
share their first P tokens (their common prefix: the templated prompt, or in raw mode the
prompt's tokens up to where a merge across the prompt/response boundary differs), so a
packed batch (``_nets.collate``) never changes a sequence's ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rmlens._errors import InputError
from rmlens.backbones import (
    NO_LIMIT,
    Backbone,
    encode_pair,
    format_or_default,
    pair_encoding,
    pair_kept,
    truncation_of,
)
from rmlens.backbones import prompt_messages as _prompt_messages
from rmlens.data import to_text


@dataclass
class Example:
    """One prompt with K responses, best first, tokenized once.

    Attributes
    ----------
    seqs : list of K lists of int
        Token ids of prompt + response k.
    response : list of K lists of bool
        True on the tokens of response k whose log-probability the implicit RM sums
        (never the first token: it has nothing to be predicted from).
    shared : int
        Leading tokens common to all K sequences (at most the shortest length - 1).
    margin : float
        Preference strength of a pair (Bradley-Terry with margin).
    ref : list of K float, optional
        Summed response log-probs under the reference model (implicit RMs).
    lengths : list of K int, optional
        Each sequence's length before truncation.
    """

    seqs: list[list[int]]
    response: list[list[bool]]
    shared: int
    margin: float = 0.0
    ref: list[float] | None = field(default=None, repr=False)
    lengths: list[int] | None = field(default=None, repr=False)

    @property
    def packed_length(self) -> int:
        return self.shared + sum(len(s) - self.shared for s in self.seqs)

    @property
    def distinct(self) -> bool:
        """False when truncation made two of the K sequences identical (no signal)."""
        return len({tuple(s) for s in self.seqs}) == len(self.seqs)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _prefix_response_mask(
    tokenizer, prompt: Any, response: Any, ids: list[int], max_length: int, prefix: list[int],
    fmt: str,
) -> list[bool]:  # fmt: skip
    # the response: what follows the tokens shared with the prompt alone (chat, raw)
    full = (
        ids if len(ids) < max_length
        else encode_pair(tokenizer, prompt, response, NO_LIMIT, format=fmt)[0]
    )  # fmt: skip
    n = min(len(full) - _common_prefix(full, prefix), len(ids) - 1)
    return [False] * (len(ids) - n) + [True] * n


def _pair_response_mask(tokenizer, prompt: Any, response: Any, max_length: int) -> list[bool]:
    """Which of the positions ``encode_pair`` keeps in the pair encoding are the response."""
    owner = pair_encoding(tokenizer, prompt, response).sequence_ids()
    kept = pair_kept(owner, max_length)
    return [False] + [owner[i] == 1 for i in kept[1:]]


def make_example(
    tokenizer,
    prompt: Any,
    responses: list[Any],
    max_length: int,
    margin: float = 0.0,
    *,
    with_response: bool = True,
    format: str | None = None,
) -> Example:
    """Tokenize a prompt with K responses (best first) into an :class:`Example`.

    ``with_response=False`` skips the response masks (explicit RMs do not use them).
    ``format``: chat, raw or pair (``rmlens.backbones._tokenize``); None or auto: the chat
    template when there is one, else the pair encoding (``format_or_default``).
    """
    fmt = format_or_default(tokenizer, format)
    encoded = [encode_pair(tokenizer, prompt, r, max_length, format=fmt) for r in responses]
    seqs, lengths = [e[0] for e in encoded], [e[1] for e in encoded]
    if not with_response:
        masks = [[False] * len(s) for s in seqs]
    elif fmt in ("chat", "raw"):
        if fmt == "chat":
            text = tokenizer.apply_chat_template(
                _prompt_messages(prompt), tokenize=False, add_generation_prompt=True
            )
            prefix = tokenizer(text, add_special_tokens=False)["input_ids"]
        else:
            prefix = tokenizer(to_text(prompt))["input_ids"]
        masks = [
            _prefix_response_mask(tokenizer, prompt, r, s, max_length, prefix, fmt)
            for r, s in zip(responses, seqs)
        ]
    else:
        masks = [
            _pair_response_mask(tokenizer, prompt, r, max_length) for r in responses
        ]
    shared = min(len(s) for s in seqs) - 1
    for s in seqs[1:]:
        shared = min(shared, _common_prefix(seqs[0], s))
    return Example(seqs, masks, max(shared, 0), float(margin), lengths=lengths)


def length_batches(
    lengths, batch_size: int, rng: np.random.Generator | None = None, window: int = 50
) -> list[np.ndarray]:
    """Index batches of similar length.

    With ``rng``: shuffle, sort by length within windows of ``window`` batches, cut, then
    shuffle the batch order (training). Without: longest first (scoring).
    """
    lengths = np.asarray(lengths)
    if rng is None:
        order = np.argsort(-lengths, kind="stable")
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    order = rng.permutation(len(lengths))
    span = batch_size * window
    batches = []
    for start in range(0, len(order), span):
        chunk = order[start : start + span]
        chunk = chunk[np.argsort(-lengths[chunk], kind="stable")]
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def examples_of(
    data: pd.DataFrame, bb: Backbone, cfg, implicit: bool
) -> tuple[list[Example], np.ndarray]:
    """One tokenized example per pair (or ranking) of ``data``, in the backbone's format,
    and the usable-pair mask."""
    tok, limit, fmt = bb.tokenizer, bb.max_length, bb.format
    if "responses" in data:
        if cfg.loss != "plackett-luce":
            raise InputError(
                "rankings (a 'responses' column) need `loss` 'plackett-luce'; "
                "load_pairs expands them into pairs instead"
            )
        examples = []
        for prompt, responses, scores in zip(data.prompt, data.responses, data.scores):
            order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")
            ranked = [responses[i] for i in order]
            examples.append(make_example(tok, prompt, ranked, limit, with_response=implicit,
                                         format=fmt))  # fmt: skip
    else:
        margins = (
            data["margin"].fillna(0.0).to_numpy(float)
            if "margin" in data
            else np.zeros(len(data))
        )
        examples = [
            make_example(tok, p, [c, r], limit, m, with_response=implicit, format=fmt)
            for p, c, r, m in zip(data.prompt, data.chosen, data.rejected, margins)
        ]
    kept = np.array([len(ex.seqs) >= 2 and ex.distinct for ex in examples], dtype=bool)
    return examples, kept


def examples_truncation(examples: list[Example], max_length: int) -> dict:
    """What truncation cut from tokenized examples (``truncation_summary``; a ranking
    counts as cut when any of its responses was)."""
    return truncation_of(max_length, [ex.lengths or [len(s) for s in ex.seqs] for ex in examples])
