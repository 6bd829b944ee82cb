"""Whole-vocabulary sweeps: every token as a one-token response, scored exactly and fast.

For one prompt the candidates share their templated prompt tokens: that prefix runs once
and its KV cache is broadcast over large batches of candidates, each running only its
suffix (the token and the template's closing tokens). Candidates are grouped by suffix
length, so no batch needs padding. Those whose ids do not extend the shared prefix (a token
that merges with the template's last prompt token, for example) usually share a shorter one:
a second prefix cache runs them the same way, and only what neither covers is scored in
full. Both routes give the reward of the whole formatted sequence (DESIGN.md 4).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from rmlens.tokens._candidates import build_candidates, shared_prefix, split_candidates
from rmlens.tokens._scorers import TokenScorer

# an fp32 sweep's cached route checked against full scoring to 1% of the scores' spread at
# least: a fault of the cache moves them by about the spread
FP32_CHECK = 0.01
SWEEP_COLUMNS = ("token_id", "token", "decoded", "prompt", "score", "rank")


@dataclass
class SweepInfo:
    """How one prompt's candidates were scored.

    Attributes
    ----------
    n_scored : int
    n_skipped_special : int
    prefix_len : int
        Tokens in the shared, cached prefix (0 when nothing was cached).
    n_cached, n_full : int
        Candidates scored from the prefix cache, and in full.
    suffix_lengths : dict of int to int
        Candidates per suffix length on the cached route.
    max_abs_check : float
        Largest |cached - full| over the verified candidates (nan when none).
    second_prefix_len : int
        Tokens in the prefix shared by the candidates that do not extend the first one,
        cached in turn (0 when none was).
    n_tokens : int
        Tokens the model ran: each prefix once, the suffixes, the sequences scored in full
        and the verified ones again (the work behind a sweep's FLOP rate).
    """

    n_scored: int
    n_skipped_special: int
    prefix_len: int
    n_cached: int
    n_full: int
    suffix_lengths: dict
    max_abs_check: float
    second_prefix_len: int = 0
    n_tokens: int = 0


def _chunks(items: Sequence[int], size: int):
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


@torch.inference_mode()
def score_sequences(
    scorer: TokenScorer,
    seqs: Sequence[Sequence[int]],
    *,
    batch_size: int = 512,
    min_share: float = 0.99,
    padding_side: str = "right",
    verify: int = 4,
    loose: float | None = None,
    advance: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, SweepInfo]:
    """Rewards of many sequences that share a prefix, with that prefix computed once.

    Parameters
    ----------
    scorer : TokenScorer
    seqs : list of list of int
        Formatted candidates (see :func:`build_candidates`).
    batch_size : int, default=512
        Candidates per forward pass.
    min_share : float, default=0.99
        The cached prefix is the longest one shared by at least this share of candidates;
        a second is sought, the same way, among those that do not extend it.
    padding_side : {"right", "left"}, default="right"
        Padding of the full-scoring route.
    verify : int, default=4
        Cached candidates re-scored in full as a check; on a mismatch beyond float
        tolerance every candidate is scored in full, with a warning.
    loose : float, optional
        The check's tolerance as a share of the scores' spread (their standard deviation),
        for a model in bf16: its cached and full routes round differently, by a few percent
        of the spread, while a fault of the cache moves scores by about the spread. Default:
        float tolerance, 1e-3 or :data:`FP32_CHECK` of the spread, whichever is larger (a
        deep fp32 model's rewards move run to run by up to a thousandth of their spread:
        SmolLM2's residual stream reaches 10^4).
    advance : callable, optional
        Called with the number of candidates done (a progress bar).

    Returns
    -------
    scores : ndarray of shape (n_candidates,)
    info : SweepInfo
    """
    step = advance or (lambda n: None)
    n = len(seqs)
    scores = np.full(n, np.nan, dtype=np.float64)
    routes = [_cached_route(scorer, seqs, list(range(n)), min_share, batch_size, scores, step)]
    rest = routes[0][2]
    if routes[0][1] and len(rest) > 1:
        routes.append(_cached_route(scorer, seqs, rest, min_share, batch_size, scores, step))
        rest = routes[1][2]
    cached: dict[int, list[int]] = {}
    for _, groups, _ in routes:
        for length, idx in groups.items():
            cached.setdefault(length, []).extend(idx)
    ran = sum(cut + sum(len(seqs[i]) - cut for idx in groups.values() for i in idx)
              for cut, groups, _ in routes if groups)  # fmt: skip
    check = float("nan")
    probe = _probes([[i for idx in groups.values() for i in idx] for _, groups, _ in routes],
                    verify)  # fmt: skip
    if probe:
        reference = scorer.full([seqs[i] for i in probe], padding_side)
        ran += sum(len(seqs[i]) for i in probe)
        check = float(np.max(np.abs(reference - scores[probe])))
        if not _agree(scores[probe], reference, loose, scores):
            warnings.warn(
                f"{scorer.name}: cached scores differ from full scoring by up to {check:.3g}; "
                "scoring every candidate in full instead", RuntimeWarning, stacklevel=2,
            )
            rest, cached, routes = list(range(n)), {}, routes[:1]
    order = sorted(rest, key=lambda i: -len(seqs[i]))
    for chunk in _chunks(order, batch_size):
        scores[chunk] = scorer.full([seqs[i] for i in chunk], padding_side)
        ran += sum(len(seqs[i]) for i in chunk)
        step(len(chunk))
    n_cached = sum(len(v) for v in cached.values())
    info = SweepInfo(
        n_scored=n, n_skipped_special=0, prefix_len=routes[0][0] if cached else 0,
        n_cached=n_cached, n_full=n - n_cached,
        suffix_lengths={int(k): len(v) for k, v in sorted(cached.items())},
        max_abs_check=check, second_prefix_len=routes[1][0] if len(routes) > 1 else 0,
        n_tokens=ran,
    )
    return scores, info


def _agree(cached: np.ndarray, full: np.ndarray, loose: float | None,
           scores: np.ndarray) -> bool:
    spread = float(np.nanstd(scores))
    if loose is None:
        bound = np.maximum(1e-3 + 1e-3 * np.abs(full), FP32_CHECK * spread)
        return bool(np.all(np.abs(cached - full) <= bound))
    return bool(np.max(np.abs(cached - full)) <= loose * spread)


def _cached_route(scorer, seqs, todo: list[int], min_share: float, batch_size: int,
                  scores: np.ndarray, step) -> tuple[int, dict[int, list[int]], list[int]]:
    """Score those of ``todo`` that extend their longest shared prefix from its cache, into
    ``scores``; return the prefix's length, the cached candidates by suffix length and the
    rest (indices into ``seqs``)."""
    sub = [seqs[i] for i in todo]
    prefix = shared_prefix(sub, min_share) if scorer.can_cache and sub else []
    groups, rest = split_candidates(sub, prefix)
    rest = [todo[j] for j in rest]
    cached: dict[int, list[int]] = {}
    for length, local in groups.items():
        idx = [todo[j] for j in local]
        rest += [i for i in idx if not scorer.cacheable(seqs[i], len(prefix))]
        ok = [i for i in idx if scorer.cacheable(seqs[i], len(prefix))]
        if ok:
            cached[length] = ok
    if cached:
        state = scorer.prefix(prefix)
        cut = len(prefix)
        for _, idx in sorted(cached.items()):
            for chunk in _chunks(idx, batch_size):
                suffix = torch.as_tensor([list(seqs[i][cut:]) for i in chunk], dtype=torch.long)
                scores[chunk] = scorer.suffix(state, suffix)
                step(len(chunk))
    return len(prefix), cached, rest


def _probes(routes: list[list[int]], verify: int) -> list[int]:
    """``verify`` candidates spread over the first route's, and one of the second's."""
    first = routes[0] if routes else []
    probe = [first[int(j)] for j in np.linspace(0, len(first) - 1, min(verify, len(first)))]
    if verify and len(routes) > 1 and routes[1]:
        probe.append(routes[1][len(routes[1]) // 2])
    return probe


def rank_scores(scores: np.ndarray, token_ids: np.ndarray) -> np.ndarray:
    """Rank 1 = highest score; ties broken by the lower token id."""
    order = np.lexsort((token_ids, -scores))
    ranks = np.empty(len(scores), dtype=np.int64)
    ranks[order] = np.arange(1, len(scores) + 1)
    return ranks


def sweep_prompt(
    scorer: TokenScorer,
    prompt: str,
    *,
    token_ids: np.ndarray | None = None,
    max_tokens: int | None = None,
    batch_size: int = 512,
    min_share: float = 0.99,
    padding_side: str = "right",
    verify: int = 4,
    loose: float | None = None,
    advance: Callable[[int], None] | None = None,
) -> tuple[pd.DataFrame, SweepInfo]:
    """Score every (non-special) token as the one-token answer to ``prompt``.

    Parameters
    ----------
    scorer : TokenScorer
        A :class:`HeadScorer`, :class:`SeqClsScorer` or :class:`ImplicitScorer`.
    prompt : str
    token_ids : ndarray, optional
        Ids to sweep; default the whole vocabulary (its first ``max_tokens`` ids if given).
    max_tokens : int, optional
    batch_size, min_share, padding_side, verify, loose, advance
        See :func:`score_sequences`.

    Returns
    -------
    frame : DataFrame
        ``token_id, token, decoded, prompt, score, rank``; one row per swept token.
    info : SweepInfo

    Examples
    --------
    >>> from rmlens.tokens import SeqClsScorer
    >>> from rmlens.tokens._tiny import tiny_seq_cls, tiny_tokenizer
    >>> tok = tiny_tokenizer()
    >>> scorer = SeqClsScorer(tiny_seq_cls(tok), tok)
    >>> frame, info = sweep_prompt(scorer, "What, in one word, is the best thing ever?")
    >>> info.n_skipped_special, info.n_cached + info.n_full == len(frame)
    (7, True)
    >>> top10 = frame.nsmallest(10, "rank")[["decoded", "score"]]
    """
    scorer.prepare(prompt)
    cands = build_candidates(scorer.tokenizer, prompt, token_ids=token_ids, max_tokens=max_tokens,
                             format=getattr(scorer, "format", None))  # fmt: skip
    scores, info = score_sequences(
        scorer, cands.seqs, batch_size=batch_size, min_share=min_share,
        padding_side=padding_side, verify=verify, loose=loose, advance=advance,
    )
    info.n_skipped_special = cands.n_skipped_special
    frame = pd.DataFrame({
        "token_id": cands.token_ids.astype(np.int64),
        "token": cands.tokens,
        "decoded": cands.decoded,
        "prompt": prompt,
        "score": scores,
        "rank": rank_scores(scores, cands.token_ids),
    })
    return frame, info


def rescore_extremes(
    exact: TokenScorer,
    frame: pd.DataFrame,
    k: int,
    *,
    batch_size: int = 512,
    margin: float = 1.5,
    verify: int = 4,
) -> tuple[pd.DataFrame, dict]:
    """Score a bf16 sweep's top and bottom ``k`` tokens again with an fp32 scorer.

    From each end, tokens are re-scored in the bf16 order, in blocks, until the next one
    could not enter the fp32 top (bottom) ``k``: until its bf16 score, corrected by the
    largest fp32 - bf16 difference seen so far plus ``margin - 1`` times their range (bf16
    shifts a model's rewards as well as scattering them), falls short of the ``k``-th fp32
    score. Re-scored tokens keep their fp32 scores and the ranks are computed again, so the
    ``k`` first and last ranks are fp32's (DESIGN.md, precision).

    Parameters
    ----------
    exact : TokenScorer
        The same RM scoring in fp32.
    frame : DataFrame
        One prompt's sweep (:func:`sweep_prompt`), scored in bf16.
    k : int
        Tokens per end that must be fp32's.
    batch_size : int, default=512
    verify : int, default=4
        Per block, cached candidates checked against full scoring (:func:`score_sequences`).
    margin : float, default=1.5
        The safety factor on the differences seen.

    Returns
    -------
    frame : DataFrame
        ``frame`` with fp32 scores for the re-scored tokens, and new ranks.
    info : dict
        ``n_rescored`` and ``max_abs_diff`` (the largest |bf16 - fp32| among them).
    """
    prompt = str(frame["prompt"].iloc[0])
    exact.prepare(prompt)
    approx = frame["score"].to_numpy(dtype=np.float64)
    scores = approx.copy()
    ids = frame["token_id"].to_numpy()
    done = np.zeros(len(frame), dtype=bool)
    fmt = getattr(exact, "format", None)

    def score(rows: np.ndarray) -> None:
        if len(rows):
            seqs = build_candidates(exact.tokenizer, prompt, token_ids=ids[rows], format=fmt).seqs
            scores[rows] = score_sequences(exact, seqs, batch_size=batch_size, verify=verify)[0]
            done[rows] = True

    for sign in (1.0, -1.0):  # the top, then the bottom
        order = np.argsort(-sign * approx, kind="stable")
        pos, block = 0, 2 * k
        while pos < len(order):
            rows = order[pos : pos + block]
            score(rows[~done[rows]])
            pos, block = pos + len(rows), k
            seen = done & np.isfinite(scores)
            shift = sign * (scores[seen] - approx[seen])
            bound = shift.max() + (margin - 1) * (shift.max() - shift.min())
            kth = np.sort(sign * scores[order[:pos]])[::-1][min(k, pos) - 1]
            if pos < len(order) and sign * approx[order[pos]] + bound < kth:
                break
    frame = frame.assign(score=scores, rank=rank_scores(scores, ids))
    seen = done & np.isfinite(scores)
    diff = float(np.max(np.abs(scores[seen] - approx[seen]))) if seen.any() else float("nan")
    return frame, {"n_rescored": int(done.sum()), "max_abs_diff": diff}
