"""PRISM (``HannahRoseKirk/prism-alignment``): slider-rated responses per turn -> pairs.

Turn 0: up to four different models answer and every response is rated 1-100; later turns:
the top-rated model answers twice. Within a turn every two responses with different scores
make a pair (chosen = higher score, margin = score difference). The prompt of turn t is the
user message and the chosen (``if_chosen``) response of every earlier turn, then the user
message of turn t; PRISM's role ``model`` becomes ``assistant``. Both files of the release
(``conversations.jsonl``, ``utterances.jsonl``) give the same pairs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from rmlens._errors import InputError
from rmlens._params import Config
from rmlens.data.converters._common import (
    BOOLEAN,
    IDENT,
    INTEGER,
    LIST,
    NUMBER,
    TEXT,
    TIES,
    TIES_HELP,
    Record,
    Tally,
    assistant,
    is_empty,
    user,
)
from rmlens.data.converters._registry import Converter
from rmlens.data.converters._source import data_files

D = "PRISM"
EMPTY = "EMPTY STRING"  # how PRISM stores an empty model response
LAYOUTS = ("auto", "conversations", "utterances")
MODEL_ROLES = ("model", "assistant")


@dataclass
class PrismOptions(Config):
    """Options of the PRISM converter."""

    ties: str = field(default="drop", metadata={"help": TIES_HELP})
    layout: str = field(
        default="auto",
        metadata={
            "help": "PRISM file to read: conversations (one row per conversation), utterances "
            "(one row per rated response) or auto (from the fields; conversations for a "
            "folder or the hub)."
        },
    )

    _constraints = {"ties": TIES, "layout": LAYOUTS}


@dataclass
class Response:
    text: str | None
    model: str
    score: float
    chosen: bool
    within: int
    utterance_id: str | None = None

    @property
    def empty(self) -> bool:
        return is_empty(self.text) or self.text.strip() == EMPTY


@dataclass
class Turn:
    user: str | None = None
    responses: list[Response] = field(default_factory=list)
    interaction_id: str | None = None


@dataclass
class Conversation:
    conversation_id: str
    user_id: str
    conversation_type: str
    balanced: bool | None
    turns: dict[int, Turn] = field(default_factory=dict)


def _layout(sources: list, forced: str) -> str:
    if forced != "auto":
        return forced
    fields = set(sources[0].fields) if sources else set()
    if "conversation_history" in fields:
        return "conversations"
    if {"model_response", "interaction_id"} & fields:
        return "utterances"
    shown = ", ".join(sources[0].fields[:12]) if sources else "none"
    raise InputError(
        f"{sources[0].name}: not a PRISM conversations or utterances file: expected field "
        f"'conversation_history' (conversations.jsonl) or 'model_response' (utterances.jsonl); "
        f"fields here: {shown}"
    )


def _response(rec: Record, text_field: str) -> Response:
    return Response(
        text=rec.get(text_field, TEXT, D, null=True),
        model=rec.get("model_name", IDENT, D),
        score=rec.get("score", NUMBER, D),
        chosen=rec.get("if_chosen", BOOLEAN, D),
        within=rec.get("within_turn_id", INTEGER, D),
        utterance_id=rec.opt("utterance_id", IDENT),
    )


def _from_conversations(records: Iterable[Record]) -> Iterator[Conversation]:
    for rec in records:
        conv = Conversation(
            rec.get("conversation_id", IDENT, D),
            rec.get("user_id", IDENT, D),
            rec.get("conversation_type", TEXT, D),
            rec.opt("included_in_balanced_subset", BOOLEAN),
        )
        history = rec.get("conversation_history", LIST, D)
        for k, message in enumerate(history, 1):
            where = f"{rec.where}, conversation_history item {k}"
            if not isinstance(message, dict):
                raise rec.fail("conversation_history", "a list of message objects", history)
            item = Record(message, where)
            turn = conv.turns.setdefault(item.get("turn", INTEGER, D), Turn())
            role = item.get("role", TEXT, D)
            if role == "user":
                if turn.user is not None:
                    raise InputError(f"{where}: a second user message in turn {message['turn']}")
                turn.user = item.get("content", TEXT, D)
            elif role in MODEL_ROLES:
                turn.responses.append(_response(item, "content"))
            else:
                raise item.fail("role", "'user' or 'model'", role)
        yield conv


def _from_utterances(records: Iterable[Record]) -> list[Conversation]:
    convs: dict[str, Conversation] = {}
    for rec in records:
        cid = rec.get("conversation_id", IDENT, D)
        conv = convs.setdefault(
            cid,
            Conversation(
                cid,
                rec.get("user_id", IDENT, D),
                rec.get("conversation_type", TEXT, D),
                rec.opt("included_in_balanced_subset", BOOLEAN),
            ),
        )
        if rec.get("user_id", IDENT, D) != conv.user_id:
            raise rec.fail(
                "user_id", f"{conv.user_id!r} like the other rows of {cid}", rec.row["user_id"]
            )
        number = rec.get("turn", INTEGER, D)
        iid = rec.get("interaction_id", IDENT, D)
        prompt = rec.get("user_prompt", TEXT, D)
        turn = conv.turns.setdefault(number, Turn(prompt, [], iid))
        if turn.interaction_id != iid:
            raise rec.fail(
                "interaction_id",
                f"{turn.interaction_id!r} like the other rows of {cid} turn {number}",
                iid,
            )
        if turn.user != prompt:
            raise rec.fail("user_prompt", f"the same text on every row of {iid}", prompt)
        turn.responses.append(_response(rec, "model_response"))
    return list(convs.values())


def _history(conv: Conversation, t: int) -> tuple[list[dict[str, str]] | None, str]:
    """The prompt of turn ``t`` along the chosen path, or None and why it cannot be rebuilt."""
    messages = []
    for u in range(t + 1):
        turn = conv.turns.get(u)
        if turn is None or is_empty(turn.user):
            return None, "prompt not rebuilt: an earlier turn or its user message is missing"
        messages.append(user(turn.user))
        if u == t:
            break
        texts = list(dict.fromkeys(r.text for r in turn.responses if r.chosen))
        if len(texts) != 1:
            how = "no" if not texts else "several different"
            return None, f"prompt not rebuilt: {how} chosen responses in an earlier turn"
        if is_empty(texts[0]) or texts[0].strip() == EMPTY:
            return None, "prompt not rebuilt: the chosen response of an earlier turn is empty"
        messages.append(assistant(texts[0]))
    return messages, ""


def _pairs_of(conv: Conversation, opts: PrismOptions, tally: Tally) -> Iterator[dict[str, Any]]:
    for t in sorted(conv.turns):
        turn = conv.turns[t]
        responses = sorted(turn.responses, key=lambda r: r.within)
        tally.skipped["empty responses ('EMPTY STRING')"] += sum(r.empty for r in responses)
        prompt, why = _history(conv, t)
        for a, b in combinations(responses, 2):
            if a.empty or b.empty:
                tally.drop("empty response")
                continue
            if prompt is None:
                tally.drop(why)
                continue
            if a.text == b.text:
                tally.drop("identical responses")
                continue
            if a.score == b.score:
                if opts.ties == "drop":
                    tally.drop("tie (equal scores)")
                    continue
                hi, lo = (b, a) if b.chosen and not a.chosen else (a, b)
            else:
                hi, lo = (a, b) if a.score > b.score else (b, a)
            row = {
                "id": f"{conv.conversation_id}:{t}:{hi.within}>{lo.within}",
                "prompt": prompt,
                "chosen": hi.text,
                "rejected": lo.text,
                "user_id": conv.user_id,
                "chosen_model": hi.model,
                "rejected_model": lo.model,
                "margin": float(hi.score - lo.score),
                "conversation_type": conv.conversation_type,
                "turn": t,
                "same_model": hi.model == lo.model,
                "conversation_id": conv.conversation_id,
                "chosen_score": hi.score,
                "rejected_score": lo.score,
                "chosen_within_turn_id": hi.within,
                "rejected_within_turn_id": lo.within,
            }
            if conv.balanced is not None:
                row["included_in_balanced_subset"] = conv.balanced
            if turn.interaction_id is not None:
                row["interaction_id"] = turn.interaction_id
                row["chosen_utterance_id"] = hi.utterance_id
                row["rejected_utterance_id"] = lo.utterance_id
            yield row


def pairs(sources: list, opts: PrismOptions, tally: Tally) -> Iterator[dict[str, Any]]:
    tally.layout = _layout(sources, opts.layout)
    records = tally.each(sources)
    if tally.layout == "conversations":
        convs: Iterable[Conversation] = _from_conversations(records)
    else:
        convs = _from_utterances(records)
    for conv in convs:
        yield from _pairs_of(conv, opts, tally)


def _folder_files(folder: Path, split: str | None, opts: PrismOptions) -> list[Path]:
    for layout in ("conversations", "utterances") if opts.layout == "auto" else (opts.layout,):
        found = [p for p in data_files(folder) if layout in p.name]
        if found:
            return found
    return []


CONVERTER = Converter(
    name="prism",
    title="PRISM (HannahRoseKirk/prism-alignment)",
    hub_id="HannahRoseKirk/prism-alignment",
    options=PrismOptions,
    pairs=pairs,
    rules=(
        "Every two responses of one turn with different scores (1-100 slider) make a pair; "
        "margin = score difference (1-99). Turn 0 compares different models, later turns "
        "two samples of the one chosen model: column same_model says which. The prompt of a "
        "later turn is rebuilt from the history along the chosen (if_chosen) path, role "
        "'model' -> 'assistant'. 'EMPTY STRING' responses are dropped and counted. user_id = "
        "the participant; conversation_type is the sampling field; turn is 0-based."
    ),
    group_by="user_id",
    hub_args=lambda opts: {
        "name": "utterances" if opts.layout == "utterances" else "conversations"
    },
    folder_files=_folder_files,
)
