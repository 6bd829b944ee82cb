"""Chatbot Arena conversations (``lmsys/chatbot_arena_conversations``): one vote -> one pair.

``winner`` is ``model_a``, ``model_b``, ``tie`` or ``tie (bothbad)``: two different
judgements (both fine vs both bad), so the two kinds of tie have their own options and
counts. The vote covers the whole conversation: with one turn the prompt is the shared user
message and the responses are the two answers; with more turns the two sides' histories
differ, so the pair keeps both whole conversations after the first user message (or drops
them with ``multi_turn="drop"``). Responses are message lists in both cases (TRL's
conversational layout), so a column never mixes text and messages.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rmlens._params import Config
from rmlens.data.converters._common import (
    BOOLEAN,
    IDENT,
    INTEGER,
    MAPPING,
    MESSAGES,
    NUMBER,
    TEXT,
    TIES,
    Record,
    Tally,
    is_empty,
)
from rmlens.data.converters._registry import Converter

D = "Chatbot Arena"
WINNERS = ("model_a", "model_b", "tie", "tie (bothbad)")


@dataclass
class ChatbotArenaOptions(Config):
    """Options of the Chatbot Arena converter."""

    ties: str = field(
        default="drop",
        metadata={"help": "Votes 'tie' (both good): drop them or keep them with margin 0."},
    )
    bothbad: str = field(
        default="drop",
        metadata={
            "help": "Votes 'tie (bothbad)' (both bad), a judgement of its own: drop "
            "them or keep them with margin 0."
        },
    )
    multi_turn: str = field(
        default="keep",
        metadata={
            "help": "Battles of more than one turn: keep (whole conversations after the "
            "first user message as chosen and rejected) or drop."
        },
    )

    _constraints = {"ties": TIES, "bothbad": TIES, "multi_turn": ("keep", "drop")}


def _flagged(rec: Record) -> dict[str, Any]:
    out: dict[str, Any] = {}
    moderation = rec.opt("openai_moderation", MAPPING)
    if moderation is not None:
        out["moderation_flagged"] = Record(moderation, rec.where).opt("flagged", BOOLEAN)
    toxic = rec.opt("toxic_chat_tag", MAPPING)
    if toxic is not None:
        flags = [v.get("flagged") for v in toxic.values() if isinstance(v, dict)]
        out["toxic_chat_flagged"] = any(bool(f) for f in flags) if flags else None
    return out


def _battle(rec: Record, opts: ChatbotArenaOptions, tally: Tally) -> dict[str, Any] | None:
    winner = rec.get("winner", TEXT, D)
    if winner not in WINNERS:
        raise rec.fail("winner", "one of " + ", ".join(repr(w) for w in WINNERS), winner)
    a, b = rec.get("conversation_a", MESSAGES, D), rec.get("conversation_b", MESSAGES, D)
    turn = rec.get("turn", INTEGER, D)
    for name, conv in (("conversation_a", a), ("conversation_b", b)):
        if conv[0]["role"] != "user" or conv[-1]["role"] != "assistant":
            raise rec.fail(
                name,
                "a conversation from a user message to an assistant answer",
                [m["role"] for m in conv],
            )
    users_a = [m["content"] for m in a if m["role"] == "user"]
    if users_a != [m["content"] for m in b if m["role"] == "user"]:
        raise rec.fail(
            "conversation_b", "the same user messages as conversation_a", rec.row["conversation_b"]
        )
    if turn != len(users_a):
        raise rec.fail("turn", f"the number of user messages ({len(users_a)})", turn)
    if winner == "tie" and opts.ties == "drop":
        tally.drop("tie")
        return None
    if winner == "tie (bothbad)" and opts.bothbad == "drop":
        tally.drop("tie (bothbad)")
        return None
    if len(users_a) > 1 and opts.multi_turn == "drop":
        tally.drop("multi-turn battle")
        return None
    if is_empty(a[-1]["content"]) or is_empty(b[-1]["content"]):
        tally.drop("empty response")
        return None
    # chosen and rejected are always message lists (TRL's conversational layout), so one
    # column never mixes strings and lists: [answer] for one turn, the rest for more turns
    prompt, resp_a, resp_b = a[:1], a[1:], b[1:]
    if resp_a == resp_b:
        tally.drop("identical responses")
        return None
    model_a, model_b = rec.get("model_a", IDENT, D), rec.get("model_b", IDENT, D)
    b_won = winner == "model_b"
    return {
        "id": rec.get("question_id", IDENT, D),
        "prompt": prompt,
        "chosen": resp_b if b_won else resp_a,
        "rejected": resp_a if b_won else resp_b,
        "user_id": rec.get("judge", IDENT, D),
        "chosen_model": model_b if b_won else model_a,
        "rejected_model": model_a if b_won else model_b,
        "margin": 1.0 if winner in ("model_a", "model_b") else 0.0,
        "winner": winner,
        "chosen_side": "b" if b_won else "a",
        "turn": turn,
        "question_id": rec.row["question_id"],
        "anony": rec.opt("anony", BOOLEAN),
        "language": rec.opt("language", TEXT),
        "tstamp": rec.opt("tstamp", NUMBER),
        **_flagged(rec),
    }


def pairs(sources: list, opts: ChatbotArenaOptions, tally: Tally) -> Iterator[dict[str, Any]]:
    tally.layout = "battles"
    for rec in tally.each(sources):
        pair = _battle(rec, opts, tally)
        if pair is not None:
            yield pair


CONVERTER = Converter(
    name="chatbot-arena",
    title="Chatbot Arena conversations (lmsys/chatbot_arena_conversations)",
    hub_id="lmsys/chatbot_arena_conversations",
    options=ChatbotArenaOptions,
    pairs=pairs,
    rules=(
        "One pair per vote: the winning side is chosen, margin 1 (a binary vote). 'tie' and "
        "'tie (bothbad)' are two judgements with their own options (--ties, --bothbad) and "
        "counts; kept ties get margin 0 and keep winner. prompt = the first user message; "
        "chosen and rejected are message lists: the answer for one-turn battles, the whole "
        "rest of the conversation for longer ones, whose histories differ (--multi-turn drop "
        "leaves them out). user_id = judge; anony (the closest to a sampling field) and the "
        "moderation flags are kept."
    ),
    group_by="user_id",
)
