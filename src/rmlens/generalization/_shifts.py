"""Token-level shifts: rewrites of the responses that keep their meaning but change tokens.

Built in: ``synonyms`` (word swaps from ``synonyms.json``, shipped with rmlens), ``casing``,
``punctuation`` and ``whitespace``. Each rewrites chosen and rejected alike; pairs that a
rewrite leaves unchanged are left out of its split.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import lru_cache
from importlib import resources

import pandas as pd

from rmlens._errors import InputError

_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")


@lru_cache(maxsize=1)
def synonym_table() -> dict[str, str]:
    """The shipped synonym table: lowercase word -> a word or phrase of the same meaning."""
    text = resources.files("rmlens.generalization").joinpath("synonyms.json").read_text()
    return json.loads(text)


def _match_case(word: str, swap: str) -> str:
    if word.isupper() and len(word) > 1:
        return swap.upper()
    if word[0].isupper():
        return swap[0].upper() + swap[1:]
    return swap


def swap_synonyms(text: str, table: dict[str, str] | None = None) -> str:
    """Replace every word found in the table, keeping its capitalisation.

    Parameters
    ----------
    text : str
        The text to rewrite.
    table : dict of str to str, optional
        Lower-case word to its synonym; default :func:`synonym_table`.

    Returns
    -------
    str
        ``text`` with each word of the table replaced.
    """
    table = synonym_table() if table is None else table

    def swap(m: re.Match) -> str:
        word = m.group(0)
        new = table.get(word.lower())
        return _match_case(word, new) if new else word

    return _WORD.sub(swap, text)


def change_casing(text: str) -> str:
    """Lowercase; text that is lowercase already gets each sentence capitalised."""
    if text != text.lower():
        return text.lower()
    return re.sub(r"(^|[.!?]\s+)([a-z])", lambda m: m.group(1) + m.group(2).upper(), text)


def change_punctuation(text: str) -> str:
    """Drop the final . ! or ?; text without one gets a final period."""
    stripped = text.rstrip()
    if stripped and stripped[-1] in ".!?":
        return stripped.rstrip(".!?")
    return stripped + "."


def change_whitespace(text: str) -> str:
    """Double the spaces between words and end with a newline."""
    return re.sub(r" (?=\S)", "  ", text.rstrip()) + "\n"


REWRITES: dict[str, Callable[[str], str]] = {
    "synonyms": swap_synonyms,
    "casing": change_casing,
    "punctuation": change_punctuation,
    "whitespace": change_whitespace,
}


def parse_shifts(spec: str) -> list[str]:
    """``"synonyms,casing"`` -> names; ``""`` or ``"none"`` -> none."""
    names = [s.strip() for s in spec.split(",") if s.strip() and s.strip() != "none"]
    unknown = [n for n in names if n not in REWRITES]
    if unknown:
        raise InputError(f"`shifts`: unknown rewrite {unknown[0]!r}; known: {', '.join(REWRITES)}")
    return names


def _apply(value, rewrite: Callable[[str], str]):
    if isinstance(value, list):  # chat messages: rewrite the assistant's turns
        return [
            {**m, "content": rewrite(m["content"])} if m.get("role") == "assistant" else m
            for m in value
        ]
    return rewrite(str(value))


def rewrite_pairs(pairs: pd.DataFrame, name: str) -> pd.DataFrame:
    """The pairs with both responses rewritten by ``REWRITES[name]``; unchanged pairs dropped.

    Parameters
    ----------
    pairs : DataFrame
        Pairs with ``chosen`` and ``rejected``.
    name : str
        A key of ``REWRITES`` (the rewrite applied to each response).

    Returns
    -------
    DataFrame
        A copy of the pairs that the rewrite changed, responses rewritten, index reset.

    Examples
    --------
    >>> df = pd.DataFrame({"prompt": ["q"], "chosen": ["A big dog."], "rejected": ["No."]})
    >>> rewrite_pairs(df, "synonyms").chosen.tolist()
    ['A large dog.']
    """
    rewrite = REWRITES[name]
    out = pairs.copy()
    out["chosen"] = [_apply(v, rewrite) for v in pairs.chosen]
    out["rejected"] = [_apply(v, rewrite) for v in pairs.rejected]
    changed = [
        (a != b) or (c != d)
        for a, b, c, d in zip(out.chosen, pairs.chosen, out.rejected, pairs.rejected)
    ]
    return out[changed].reset_index(drop=True)
