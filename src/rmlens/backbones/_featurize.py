"""Pooled hidden states of (prompt, response) texts, in length-sorted batches, cached."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from rmlens.backbones._cache import EmbeddingCache, ids_key
from rmlens.backbones._formats import truncation_summary
from rmlens.backbones._load import Backbone
from rmlens.backbones._tokenize import encode_pair
from rmlens.progress import progress_bar

SHARD_TEXTS = 2048  # texts per cache shard: a stopped cold encoding keeps what it wrote


@dataclass
class PairFeatures:
    """Features of every pair.

    Attributes
    ----------
    chosen, rejected : ndarray of shape (n_pairs, hidden_size)
    kept : ndarray of shape (n_pairs,), bool
        False where truncation made chosen and rejected identical (no signal).
    n_encoded : int
        Texts encoded by the backbone in this call (the rest came from the cache).
    format : str
        The format the texts were tokenized in (``chat``, ``raw`` or ``pair``).
    truncation : dict, optional
        What truncation cut (``rmlens.backbones._formats.truncation_summary``).
    """

    chosen: np.ndarray
    rejected: np.ndarray
    kept: np.ndarray
    n_encoded: int
    format: str = "chat"
    truncation: dict | None = None


def collate(
    seqs: Sequence[Sequence[int]], pad_id: int, side: str = "right"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad token-id sequences to ``(B, T)`` ids and a 0/1 attention mask (right or left)."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        cols = slice(0, len(s)) if side == "right" else slice(width - len(s), width)
        ids[i, cols] = torch.as_tensor(list(s), dtype=torch.long)
        mask[i, cols] = 1
    return ids, mask


def position_ids(mask: torch.Tensor) -> torch.Tensor:
    """(B, T) mask -> (B, T) positions counted over real tokens only (left padding too)."""
    return (mask.cumsum(1) - 1).clamp(min=0)


def last_real(mask: torch.Tensor) -> torch.Tensor:
    """(B, T) mask -> (B,) index of the last real token, whatever the padding side.

    Found from the attention mask, never as "first pad minus one": that breaks when
    pad == eos or with left padding (DESIGN.md section 2).
    """
    positions = torch.arange(mask.shape[1], device=mask.device)
    return (positions * mask).argmax(dim=1)  # the last 1 of each row


def pool(hidden: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """(B, T, d) hidden states -> (B, d): mean over real tokens, or the last real token."""
    if pooling == "mean":
        m = mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1)
    last = last_real(mask)  # (B,)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


@torch.inference_mode()
def encode_ids(
    backbone: Backbone,
    seqs: list[list[int]],
    *,
    batch_size: int = 32,
    side: str = "right",
    quiet: bool = False,
    store: Callable[[np.ndarray, np.ndarray], None] | None = None,
) -> np.ndarray:
    """Pooled vectors (n, d) of token-id sequences, run longest first in similar-length batches.

    With left padding, position ids are counted from each sequence's first real token, so the
    vectors do not depend on the padding side, the batch size or the batch's other members,
    up to float rounding: the padded length changes the kernels' summation order (minilm on
    HH texts: rows differ by at most 5e-7 between two batchings), which is why a resumed
    encoding runs the batches it would have run.
    ``store(rows, vectors)``, when given, receives the vectors as they are made: every
    ``SHARD_TEXTS`` texts (whole batches, in the order they ran) and the rest at the end.
    """
    order = np.argsort([-len(s) for s in seqs], kind="stable")
    out = np.empty((len(seqs), backbone.hidden_size), dtype=np.float32)
    device = next(backbone.model.parameters()).device
    pad = backbone.tokenizer.pad_token_id
    every, stored = max(1, SHARD_TEXTS // batch_size) * batch_size, 0
    with progress_bar("encoding", total=len(seqs), quiet=quiet) as advance:
        for start in range(0, len(seqs), batch_size):
            rows = order[start : start + batch_size]
            ids, mask = collate([seqs[i] for i in rows], pad, side)
            extra = {}
            if side == "left":
                extra["position_ids"] = position_ids(mask).to(device)
            hidden = backbone.model(
                input_ids=ids.to(device), attention_mask=mask.to(device), **extra
            ).last_hidden_state
            out[rows] = pool(hidden.float(), mask.to(device), backbone.pooling).cpu().numpy()
            advance(len(rows))
            done = start + len(rows)
            if store is not None and (done - stored >= every or done == len(seqs)):
                store(order[stored:done], out[order[stored:done]])
                stored = done
    return out


def encode_texts(
    backbone: Backbone,
    seqs: list[list[int]],
    *,
    cache_dir=None,
    batch_size: int = 32,
    quiet: bool = False,
    format: str | None = None,
) -> tuple[np.ndarray, int]:
    """Pooled vectors (n, d) of token-id sequences, each unique one encoded once, through the
    embedding cache (``cache_dir``: its root, default ``embeddings/`` under ``$RMLENS_CACHE``,
    else under ``~/.cache/rmlens``; ``False``: no cache). Also returns how many were encoded.
    ``format``: the format the sequences were tokenized in (default the backbone's), part
    of the cache's key so features of two formats never mix. The cache gets a shard every
    ``SHARD_TEXTS`` texts encoded, so an interrupted encoding resumes where it stopped: the
    texts left over run in the same batches as they would have, giving the same vectors."""
    keys = [ids_key(s) for s in seqs]
    unique: dict[bytes, list[int]] = {}
    for key, seq in zip(keys, seqs):
        unique.setdefault(key, seq)
    cache = None
    if cache_dir is not False:
        cache = EmbeddingCache(cache_dir, identity=backbone.identity, pooling=backbone.pooling,
                               max_length=backbone.max_length, format=format or backbone.format,
                               precision=backbone.precision)  # fmt: skip
    missing = [k for k in unique if cache is None or k not in cache]
    store = None if cache is None else (
        lambda rows, vectors: cache.put([missing[i] for i in rows], vectors))  # fmt: skip
    vectors = encode_ids(backbone, [unique[k] for k in missing], batch_size=batch_size,
                         quiet=quiet, store=store)  # fmt: skip
    table = dict(zip(missing, vectors))
    if cache is not None:
        have = [k for k in unique if k not in table]
        if have:
            table.update(zip(have, cache.get(have)))
    matrix = np.stack([table[k] for k in keys]) if keys else np.zeros((0, backbone.hidden_size))
    return matrix, len(missing)


def featurize(
    backbone: Backbone,
    pairs: pd.DataFrame,
    *,
    cache_dir=None,
    batch_size: int = 32,
    quiet: bool = False,
    format: str | None = None,
) -> PairFeatures:
    """Encode the chosen and rejected text of every pair, each unique text once.

    Parameters
    ----------
    backbone : Backbone
    pairs : DataFrame with ``prompt``, ``chosen``, ``rejected``
    cache_dir : path, optional
        Embedding cache root (default ``embeddings/`` under ``$RMLENS_CACHE``, else under
        ``~/.cache/rmlens``).
        Pass ``False`` to disable the cache.
    format : {"chat", "raw", "pair"}, optional
        Default the backbone's (``Backbone.format``).

    Returns
    -------
    PairFeatures
        With ``truncation``: what ``backbone.max_length`` cut (nothing is warned here; the
        callers that train or score say it).
    """
    tok, limit = backbone.tokenizer, backbone.max_length
    fmt = format or backbone.format
    chosen = [encode_pair(tok, p, c, limit, format=fmt) for p, c in zip(pairs.prompt, pairs.chosen)]
    rejected = [
        encode_pair(tok, p, r, limit, format=fmt) for p, r in zip(pairs.prompt, pairs.rejected)
    ]
    chosen_ids, rejected_ids = [c[0] for c in chosen], [r[0] for r in rejected]
    kept = np.array([c != r for c, r in zip(chosen_ids, rejected_ids)], dtype=bool)
    matrix, n_encoded = encode_texts(backbone, chosen_ids + rejected_ids, cache_dir=cache_dir,
                                     batch_size=batch_size, quiet=quiet,
                                     format=fmt)  # fmt: skip
    n = len(pairs)
    cut = truncation_summary(limit, [c[1] for c in chosen], [r[1] for r in rejected])
    return PairFeatures(matrix[:n], matrix[n:], kept, n_encoded=n_encoded, format=fmt,
                        truncation=cut)  # fmt: skip
