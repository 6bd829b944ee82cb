"""Community Alignment (``facebook/community-alignment-dataset``): one of four -> three pairs.

Wide CSV, one row per conversation (annotator x prompt), up to four turns. In each turn the
annotator picks one of four candidates (letters a-d are screen positions, not models): the
pick is ``chosen`` against each of the other three. The prompt of a later turn is the
earlier prompts with the picked responses, then this turn's prompt. There is no model field
(one model wrote all four candidates) and no strength, so no ``margin``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rmlens._params import Config
from rmlens.data.converters._common import (
    BOOLEAN,
    IDENT,
    TEXT,
    Record,
    Tally,
    assistant,
    is_missing,
    user,
)
from rmlens.data.converters._registry import Converter

D = "Community Alignment"
TURNS = ("first", "second", "third", "fourth")
LETTERS = ("a", "b", "c", "d")
END_OF_TEXT = "<|end_of_text|>"
PREFERRED = re.compile(r"^response_([a-d])$")
TURN_FIELD = re.compile(r"^(first|second|third|fourth)_turn_")
FLAGS = ("is_pregenerated_first_prompt", "in_balanced_subset", "in_balanced_subset_10")


@dataclass
class CommunityAlignmentOptions(Config):
    """Options of the Community Alignment converter (none beyond ``split``)."""


def _text(rec: Record, name: str, tally: Tally) -> str | None:
    """A turn's text field; empty cell or null -> None; stray end-of-text tokens removed."""
    value = rec.get(name, TEXT, D, null=True)
    if value is None or not value.strip():
        return None
    if END_OF_TEXT in value:
        tally.notes[f"responses with {END_OF_TEXT} removed"] += 1
        value = value.replace(END_OF_TEXT, "").rstrip()
    return value


def _carried(rec: Record) -> dict[str, Any]:
    """The row's fields other than the turns and the ids (demographics, language, wave)."""
    out = {}
    for name, value in rec.row.items():
        if TURN_FIELD.match(name) or name in ("conversation_id", "annotator_id"):
            continue
        if name in FLAGS:
            out[name] = rec.get(name, BOOLEAN, D, null=True)
        else:
            out[name] = None if is_missing(value) else value
    return out


def _conversation(rec: Record, tally: Tally) -> Iterator[dict[str, Any]]:
    cid = rec.get("conversation_id", IDENT, D)
    annotator = rec.get("annotator_id", IDENT, D)
    carried = _carried(rec)
    history: list[dict[str, str]] = []
    for k, turn in enumerate(TURNS):
        key = f"{turn}_turn_prompt"
        if k > 0 and not rec.has(key):
            break
        prompt = _text(rec, key, tally)
        if prompt is None:
            if k == 0:
                raise rec.fail(key, "the first user message (a non-empty string)", rec.row[key])
            later = [t for t in TURNS[k + 1 :] if rec.row.get(f"{t}_turn_prompt") not in (None, "")]
            tally.skipped["turns after a missing turn"] += len(later)
            break
        label = rec.get(f"{turn}_turn_preferred_response", TEXT, D, null=True)
        if label is None or not label.strip():
            tally.skipped["turns without a preferred response"] += 1
            break
        found = PREFERRED.match(label.strip().lower())
        if not found:
            raise rec.fail(
                f"{turn}_turn_preferred_response",
                "one of 'response_a', 'response_b', 'response_c', 'response_d'",
                label,
            )
        pick = found.group(1)
        texts = {x: _text(rec, f"{turn}_turn_response_{x}", tally) for x in LETTERS}
        messages = [*history, user(prompt)]
        if texts[pick] is None:
            tally.drop("empty response", 3)
            tally.skipped["turns whose preferred response is empty (conversation ends)"] += 1
            break
        for other in LETTERS:
            if other == pick:
                continue
            if texts[other] is None:
                tally.drop("empty response")
                continue
            if texts[other] == texts[pick]:
                tally.drop("identical responses")
                continue
            yield {
                "id": f"{cid}:{k}:{pick}>{other}",
                "prompt": messages,
                "chosen": texts[pick],
                "rejected": texts[other],
                "user_id": annotator,
                "turn": k,
                "conversation_id": cid,
                "chosen_position": pick,
                "rejected_position": other,
                **carried,
            }
        history = [*messages, assistant(texts[pick])]


def pairs(sources: list, opts: CommunityAlignmentOptions, tally: Tally) -> Iterator[dict]:
    tally.layout = "conversations (wide)"
    for rec in tally.each(sources):
        yield from _conversation(rec, tally)


CONVERTER = Converter(
    name="community-alignment",
    title="Community Alignment (facebook/community-alignment-dataset)",
    hub_id="facebook/community-alignment-dataset",
    options=CommunityAlignmentOptions,
    pairs=pairs,
    rules=(
        "Per turn the preferred of four candidates is chosen against each other one (3 pairs); "
        "no margin (a single pick) and no model names (one model wrote all four; positions a-d "
        "kept as chosen_position, rejected_position). A later turn's prompt is the earlier "
        "prompts with the preferred responses; a conversation stops at its first missing turn. "
        "Identical or empty candidates are dropped and counted; <|end_of_text|> is removed. "
        "user_id = annotator_id; is_pregenerated_first_prompt (and wave) is the sampling field."
    ),
    group_by="user_id",
    splits=("train", "filtered"),
    text_fields=tuple(
        f"{t}_turn_{s}"
        for t in TURNS
        for s in (
            "prompt",
            "response_a",
            "response_b",
            "response_c",
            "response_d",
            "responses",
            "preferred_response",
            "feedback",
        )
    )
    + ("conversation_id", "annotator_id"),
)
