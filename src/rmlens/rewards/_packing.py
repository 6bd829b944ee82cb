"""Tokenized examples (one prompt, K responses) and batches that encode the prompt once.

Every sequence is tokenized by ``encode_pair``, the one tokenization of rmlens, in the
model's format (chat, raw or pair), each from its full text. The K sequences of an example
share their first P tokens (their common prefix: the templated prompt, or in raw mode the
prompt's tokens up to where a merge across the prompt/response boundary differs), so
packing never changes a sequence's ids. For a causal LM one packed row holds that prefix
once, then each response tail::

    tokens     p_0 .. p_{P-1} | c_P .. c_{n-1} | r_P .. r_{m-1}
    positions  0   ..  P-1    | P   ..  n-1    | P   ..  m-1

and a block mask lets a tail token see the prefix and the earlier tokens of its own tail
only, so each hidden state equals the one of that sequence run alone. Encoders attend both
ways (the prompt would see both responses), so they get one row per sequence.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd
import torch

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


@dataclass
class Batch:
    """Tensors of a batch of B examples with up to K sequences each, in R rows of T tokens.

    ``last``, ``pred`` index the flattened (R * T) token axis; ``rows`` gives each
    sequence's row (one row per sequence when not packed).
    """

    input_ids: torch.Tensor  # (R, T)
    attention_mask: torch.Tensor  # (R, T) 0/1, or (R, 1, T, T) additive block mask
    position_ids: torch.Tensor | None  # (R, T)
    last: torch.Tensor  # (B, K) flat index of each sequence's last token
    rows: torch.Tensor  # (B, K) row of each sequence
    valid: torch.Tensor  # (B, K) bool: sequence k exists
    pred: torch.Tensor  # (B, K, L) flat index of the token that predicts response token l
    target: torch.Tensor  # (B, K, L) the response token ids
    tmask: torch.Tensor  # (B, K, L) bool
    margin: torch.Tensor  # (B,)
    ref: torch.Tensor | None  # (B, K) reference log-probs
    index: np.ndarray  # (B,) positions of the examples in the list they came from

    def to(self, device) -> Batch:
        moved = {}
        for f in fields(self):
            value = getattr(self, f.name)
            moved[f.name] = value.to(device) if isinstance(value, torch.Tensor) else value
        return Batch(**moved)


def collate(
    examples: list[Example],
    index,
    *,
    pad_id: int,
    mode: str,
    side: str = "right",
    dtype: torch.dtype = torch.float32,
) -> Batch:
    """Build a :class:`Batch`.

    Parameters
    ----------
    mode : {"packed", "causal", "encoder"}
        packed: one row per example with the block mask; causal: one row per sequence,
        padding mask and position ids; encoder: one row per sequence, padding mask only.
    side : {"right", "left"}
        Padding side; results do not depend on it (positions come from the layout).
    dtype : torch.dtype
        Dtype of the additive block mask (the model's compute dtype).
    """
    if mode == "encoder" and side != "right":
        raise ValueError("encoders are padded on the right (their position ids start at 0)")
    row_ids: list[list[int]] = []
    row_pos: list[list[int]] = []
    row_seg: list[list[int]] = []
    where: list[list[tuple[int, list[int]]]] = []
    for ex in examples:
        if mode == "packed":
            p = ex.shared
            ids, pos, seg, locs = list(ex.seqs[0][:p]), list(range(p)), [0] * p, []
            for k, s in enumerate(ex.seqs):
                start = len(ids)
                ids += s[p:]
                pos += range(p, len(s))
                seg += [k + 1] * (len(s) - p)
                locs.append(list(range(p)) + list(range(start, start + len(s) - p)))
            where.append([(len(row_ids), loc) for loc in locs])
            row_ids.append(ids), row_pos.append(pos), row_seg.append(seg)
        else:
            here = []
            for s in ex.seqs:
                here.append((len(row_ids), list(range(len(s)))))
                row_ids.append(list(s)), row_pos.append(list(range(len(s))))
                row_seg.append([1] * len(s))
            where.append(here)
    n_rows, width = len(row_ids), max(len(r) for r in row_ids)
    ids = torch.full((n_rows, width), pad_id, dtype=torch.long)
    pos = torch.zeros((n_rows, width), dtype=torch.long)
    seg = torch.full((n_rows, width), -1, dtype=torch.long)
    offset = [0 if side == "right" else width - len(r) for r in row_ids]
    for r in range(n_rows):
        sl = slice(offset[r], offset[r] + len(row_ids[r]))
        ids[r, sl] = torch.tensor(row_ids[r])
        pos[r, sl] = torch.tensor(row_pos[r])
        seg[r, sl] = torch.tensor(row_seg[r])
    real = seg >= 0
    if mode == "packed":
        col = torch.arange(width)
        causal = col[None, :] <= col[:, None]  # (T_query, T_key)
        key, query = seg[:, None, :], seg[:, :, None]  # (R, 1, T), (R, T, 1)
        allowed = causal & ((key == 0) | (key == query)) & (key >= 0) & (query >= 0)
        allowed |= torch.eye(width, dtype=torch.bool)  # padding rows see themselves: no NaN
        mask = torch.zeros((n_rows, 1, width, width), dtype=dtype)
        mask = mask.masked_fill(~allowed[:, None], torch.finfo(dtype).min)
    else:
        mask = real.long()
    k_max = max(len(ex.seqs) for ex in examples)
    n_pred = [[sum(m) for m in ex.response] for ex in examples]
    l_max = max(1, max(max(n) for n in n_pred))
    shape = (len(examples), k_max)
    last, rows = torch.zeros(shape, dtype=torch.long), torch.zeros(shape, dtype=torch.long)
    valid = torch.zeros(shape, dtype=torch.bool)
    pred = torch.zeros((*shape, l_max), dtype=torch.long)
    target = torch.zeros((*shape, l_max), dtype=torch.long)
    tmask = torch.zeros((*shape, l_max), dtype=torch.bool)
    for b, ex in enumerate(examples):
        for k, (row, loc) in enumerate(where[b]):
            flat = [row * width + offset[row] + c for c in loc]
            last[b, k], rows[b, k], valid[b, k] = flat[-1], row, True
            js = [j for j, m in enumerate(ex.response[k]) if m]
            if js:
                pred[b, k, : len(js)] = torch.tensor([flat[j - 1] for j in js])
                target[b, k, : len(js)] = torch.tensor([ex.seqs[k][j] for j in js])
                tmask[b, k, : len(js)] = True
    ref = None
    if all(ex.ref is not None for ex in examples):
        ref = torch.zeros(shape, dtype=torch.float32)
        for b, ex in enumerate(examples):
            ref[b, : len(ex.ref)] = torch.tensor(ex.ref, dtype=torch.float32)
    return Batch(
        input_ids=ids,
        attention_mask=mask,
        position_ids=None if mode == "encoder" else pos,
        last=last,
        rows=rows,
        valid=valid,
        pred=pred,
        target=target,
        tmask=tmask,
        margin=torch.tensor([ex.margin for ex in examples], dtype=torch.float32),
        ref=ref,
        index=np.asarray(index),
    )


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
