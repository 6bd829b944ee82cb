"""One-token responses: which token ids to sweep, how each is formatted, and the shared prefix.

Every candidate is the conversation (user: prompt, assistant: the decoded token) rendered by
the tokenizer's chat template and tokenized once without adding special tokens (the
template holds them already: DESIGN.md section 2, pitfalls). The ids of all candidates
start with the same prompt tokens; that shared prefix is run once and its KV cache reused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@dataclass
class Candidates:
    """The token ids of a sweep and their formatted sequences for one prompt.

    Attributes
    ----------
    token_ids : ndarray of shape (n_candidates,)
        Vocabulary ids swept (special tokens already removed).
    tokens : list of str
        Vocabulary strings (``convert_ids_to_tokens``), e.g. ``'Ġgood'``.
    decoded : list of str
        The text each id decodes to, e.g. ``' good'``: the one-token response.
    seqs : list of list of int
        Token ids of each formatted (prompt, response) conversation.
    n_skipped_special : int
        Special tokens left out of the sweep.
    """

    token_ids: np.ndarray
    tokens: list[str]
    decoded: list[str]
    seqs: list[list[int]]
    n_skipped_special: int


def special_token_ids(tokenizer: PreTrainedTokenizerBase) -> set[int]:
    """Ids of every special token: the named ones and added tokens flagged ``special``."""
    ids = {int(i) for i in tokenizer.all_special_ids}
    for idx, added in getattr(tokenizer, "added_tokens_decoder", {}).items():
        if getattr(added, "special", False):
            ids.add(int(idx))
    return ids


def sweep_token_ids(
    tokenizer: PreTrainedTokenizerBase, max_tokens: int | None = None
) -> tuple[np.ndarray, int]:
    """Ids ``0 .. N-1`` of the vocabulary minus special tokens, and how many were skipped.

    ``N`` is ``len(tokenizer)`` (base vocabulary plus added tokens), or ``max_tokens`` when
    smaller: a quick look at the first ids only.
    """
    n = len(tokenizer) if max_tokens is None else min(int(max_tokens), len(tokenizer))
    specials = special_token_ids(tokenizer)
    ids = np.array([i for i in range(n) if i not in specials], dtype=np.int64)
    return ids, n - len(ids)


def format_ids(
    tokenizer: PreTrainedTokenizerBase, prompt: str, responses: Sequence[str],
    format: str | None = None,
) -> list:  # fmt: skip
    """Token ids of each (prompt, response) conversation, tokenized one way everywhere.

    ``format`` chat (default with a chat template): render ``[user: prompt, assistant:
    response]`` as text, then tokenize it with ``add_special_tokens=False`` (never a second
    BOS). raw or pair (default without a template: pair): as
    :func:`rmlens.backbones._tokenize.encode_pair_text`, which featurization uses.
    """
    if format is None:
        format = "chat" if getattr(tokenizer, "chat_template", None) else "pair"
    if format == "chat":
        texts = [
            tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}, {"role": "assistant", "content": r}],
                tokenize=False,
            )
            for r in responses
        ]
        return [list(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    # lazy: transformers loads only when this runs
    from rmlens.backbones import NO_LIMIT, encode_pair_text

    return [encode_pair_text(tokenizer, prompt, r, NO_LIMIT, format=format) for r in responses]


def build_candidates(
    tokenizer: PreTrainedTokenizerBase,
    prompt: str,
    *,
    token_ids: np.ndarray | None = None,
    max_tokens: int | None = None,
    format: str | None = None,
) -> Candidates:
    """Format every swept token as the one-token answer to ``prompt``.

    Parameters
    ----------
    tokenizer : PreTrainedTokenizerBase
    prompt : str
    token_ids : ndarray, optional
        Ids to sweep; default all non-special ids (the first ``max_tokens`` when given).
        Special ids passed here are dropped and counted.
    max_tokens : int, optional
    format : {"chat", "raw", "pair"}, optional
        The RM's format (:func:`format_ids`); default chat with a template, else pair.
    """
    if token_ids is None:
        ids, skipped = sweep_token_ids(tokenizer, max_tokens)
    else:
        specials = special_token_ids(tokenizer)
        given = np.asarray(token_ids, dtype=np.int64)
        ids = given[[int(i) not in specials for i in given]] if len(given) else given
        skipped = len(given) - len(ids)
    tokens = [str(t) for t in tokenizer.convert_ids_to_tokens([int(i) for i in ids])]
    decoded = [tokenizer.decode([int(i)]) for i in ids]
    seqs = format_ids(tokenizer, prompt, decoded, format)
    return Candidates(ids, tokens, decoded, seqs, skipped)


def shared_prefix(seqs: Sequence[Sequence[int]], min_share: float = 0.99) -> list[int]:
    """Longest token prefix that at least ``min_share`` of the sequences start with.

    Built greedily one position at a time: extend with the most common next token among
    the sequences still matching, while they stay at least ``min_share`` of all and each
    keeps at least one token after the prefix. The rest are scored in full.
    """
    if not seqs:
        return []
    width = max(len(s) for s in seqs)
    grid = np.full((len(seqs), width + 1), -1, dtype=np.int64)  # (n, width + 1), -1 = past end
    for i, s in enumerate(seqs):
        grid[i, : len(s)] = s
    need = max(1, int(np.ceil(min_share * len(seqs))))
    alive = np.ones(len(seqs), dtype=bool)
    prefix: list[int] = []
    for pos in range(width):
        column = grid[alive, pos]
        values, counts = np.unique(column[column >= 0], return_counts=True)
        if len(values) == 0:
            break
        token = int(values[counts.argmax()])
        keep = alive & (grid[:, pos] == token) & (grid[:, pos + 1] >= 0)
        if keep.sum() < need:
            break
        alive = keep
        prefix.append(token)
    return prefix


def split_candidates(
    seqs: Sequence[Sequence[int]], prefix: Sequence[int]
) -> tuple[dict[int, list[int]], list[int]]:
    """Route each sequence: by suffix length when it starts with ``prefix``, else to full scoring.

    Returns ``groups`` (suffix length -> candidate indices) and ``rest`` (indices whose ids
    do not start with the prefix or have nothing after it).
    """
    n = len(prefix)
    head = list(prefix)
    groups: dict[int, list[int]] = {}
    rest: list[int] = []
    for i, s in enumerate(seqs):
        if n and len(s) > n and list(s[:n]) == head:
            groups.setdefault(len(s) - n, []).append(i)
        else:
            rest.append(i)
    return groups, rest
