"""Formatting and truncation as explicit choices, recorded with every output (DESIGN.md 2).

Light on purpose (numpy only): the configs that declare ``format`` are read by the command
line without torch or transformers. The tokenization itself is ``_tokenize.encode_pair``.

``format`` is ``auto``, ``chat``, ``raw`` or ``pair``; :func:`resolve_format` turns it into
the one a model uses (never ``auto``). Truncation keeps the last ``max_length`` tokens of a
sequence (the prompt is cut from the left); :func:`truncation_summary` counts what was cut,
from each sequence's length before truncation.
"""

from __future__ import annotations

import warnings
from dataclasses import field
from typing import Any

from rmlens._errors import InputError, RmlensWarning

FORMATS = ("auto", "chat", "raw", "pair")  # what `format` takes; all but auto are resolved
RESOLVED = ("chat", "raw", "pair")
FORMAT_HELP = (
    "How a prompt and response become tokens: chat (the tokenizer's chat template), raw "
    "(prompt + response + EOS, as TRL's text path), pair ([CLS] prompt [SEP] response "
    "[SEP]), or auto: chat when the tokenizer has a template, else raw for causal LMs and "
    "pair for encoders. The resolved one is recorded with every output."
)
FORMAT_CONSTRAINT = (lambda x: x in FORMATS, "one of " + ", ".join(map(repr, FORMATS)))


def format_field(help: str = FORMAT_HELP):
    """The ``format`` field of a config that scores or trains (``--format``)."""
    return field(default="auto", metadata={"help": help})


def resolve_format(format: str | None, tokenizer: Any, kind: str) -> str:
    """The format a model uses: ``chat``, ``raw`` or ``pair``, never ``auto``.

    Parameters
    ----------
    format : {"auto", "chat", "raw", "pair"} or None
        The choice; None is ``auto``.
    tokenizer : PreTrainedTokenizerBase
        Read for its chat template only.
    kind : {"causal", "encoder"}
        What ``auto`` gives without a chat template: raw (causal) or pair (encoder).

    Returns
    -------
    str

    Raises
    ------
    InputError
        ``chat`` with a tokenizer that has no chat template, or an unknown format.

    Examples
    --------
    >>> class Plain:
    ...     chat_template = None
    >>> resolve_format("auto", Plain(), "causal"), resolve_format(None, Plain(), "encoder")
    ('raw', 'pair')
    """
    format = format or "auto"
    if format not in FORMATS:
        raise InputError(f"`format` must be one of {', '.join(FORMATS)}, got {format!r}")
    templated = bool(getattr(tokenizer, "chat_template", None))
    if format == "chat" and not templated:
        raise InputError("`format` chat: the tokenizer has no chat template; use `format` raw "
                         "(prompt + response + EOS) or auto")  # fmt: skip
    if format != "auto":
        return format
    return "chat" if templated else ("raw" if kind == "causal" else "pair")


def truncation_summary(max_length: int, chosen, rejected) -> dict:
    """What truncation to ``max_length`` cut from a pair set.

    Parameters
    ----------
    max_length : int
    chosen, rejected : array-like of shape (n_pairs,)
        The length of each side's token sequence before truncation.

    Returns
    -------
    dict
        ``max_length``; ``sequences_cut`` (sides longer than ``max_length``); ``pairs_cut``
        (pairs with either side cut); ``tokens_cut_median`` and ``tokens_cut_max`` (tokens
        cut per cut sequence; 0 when none was).

    Examples
    --------
    >>> truncation_summary(16, [30, 10], [12, 20])  # doctest: +NORMALIZE_WHITESPACE
    {'max_length': 16, 'sequences_cut': 2, 'pairs_cut': 2, 'tokens_cut_median': 9.0,
     'tokens_cut_max': 14}
    """
    return truncation_of(max_length, list(zip(chosen, rejected)))


def truncation_of(max_length: int, lengths) -> dict:
    """:func:`truncation_summary` of examples with any number of sequences each (a ranking's
    K responses): ``lengths`` holds each example's lengths before truncation; an example
    counts in ``pairs_cut`` when any of its sequences was cut."""
    import numpy as np  # here, not at the top: the configs read this module's FORMATS

    cut = [np.clip(np.asarray(row, dtype=np.int64) - max_length, 0, None) for row in lengths]
    cuts = np.concatenate(cut) if cut else np.zeros(0, dtype=np.int64)
    cuts = cuts[cuts > 0]
    return {
        "max_length": int(max_length),
        "sequences_cut": int(cuts.size),
        "pairs_cut": int(sum(bool((row > 0).any()) for row in cut)),
        "tokens_cut_median": float(np.median(cuts)) if cuts.size else 0.0,
        "tokens_cut_max": int(cuts.max()) if cuts.size else 0,
    }


def truncation_message(summary: dict | None, n_pairs: int, what: str = "pairs") -> str | None:
    """One line saying how many of ``n_pairs`` pairs (``what``) were cut and by how much;
    None when no pair was."""
    if not summary or not summary.get("pairs_cut"):
        return None
    return (
        f"{summary['pairs_cut']} of {n_pairs} {what} cut to `max_length` "
        f"{summary['max_length']}: {summary['sequences_cut']} sequences lost a median "
        f"{summary['tokens_cut_median']:g} and at most {summary['tokens_cut_max']} tokens "
        "(the prompt's start first)"
    )


def warn_truncation(summary: dict | None, n_pairs: int, stacklevel: int = 3,
                    what: str = "pairs") -> None:  # fmt: skip
    """Warn (``RmlensWarning``, one line) when truncation cut any pair."""
    message = truncation_message(summary, n_pairs, what)
    if message:
        warnings.warn(message, RmlensWarning, stacklevel=stacklevel)
