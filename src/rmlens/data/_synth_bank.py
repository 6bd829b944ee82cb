"""Text material for the synthetic generator, read once from ``synth_bank.json``.

The file holds, under lower-case keys, what this module exposes as upper-case tuples:

- ``TOPICS``: (task, five sound tips, three wrong tips). Tips are imperative verb phrases in
  lower case without a final period, so that every template can take any of them.
- ``QUESTIONS``, ``PREFIXES``: how a prompt asks for a task (``{task}``).
- ``GOOD``, ``MEDIOCRE``, ``WRONG``, ``EVASIVE``, ``RUDE``, ``INCOMPLETE``: response
  templates (``{task}``, tips ``{a}``, ``{b}``, ``{c}``); ``FILLER``: padding sentences.
- ``TASTES``: one idiosyncratic taste per user, two closing sentences of the same shape and
  length that differ in one theme. In that user's taste pairs one response ends with each;
  the user prefers one of the two (chosen by the seed). No other user's pairs contain
  either, so the contrast cannot be learned from other users.
- ``MODELS``: the names of the systems that "wrote" the responses.
"""

from __future__ import annotations

import json
from pathlib import Path

_BANK = json.loads((Path(__file__).with_name("synth_bank.json")).read_text(encoding="utf-8"))

TOPICS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = tuple(
    (t["task"], tuple(t["good"]), tuple(t["wrong"])) for t in _BANK["topics"]
)
QUESTIONS: tuple[str, ...] = tuple(_BANK["questions"])
PREFIXES: tuple[str, ...] = tuple(_BANK["prefixes"])
GOOD: tuple[str, ...] = tuple(_BANK["good"])
MEDIOCRE: tuple[str, ...] = tuple(_BANK["mediocre"])
WRONG: tuple[str, ...] = tuple(_BANK["wrong"])
EVASIVE: tuple[str, ...] = tuple(_BANK["evasive"])
RUDE: tuple[str, ...] = tuple(_BANK["rude"])
INCOMPLETE: tuple[str, ...] = tuple(_BANK["incomplete"])
FILLER: tuple[str, ...] = tuple(_BANK["filler"])
TASTES: tuple[tuple[str, str], ...] = tuple((a, b) for a, b in _BANK["tastes"])
MODELS: tuple[str, ...] = tuple(_BANK["models"])
