"""HelpSteer2 (``nvidia/HelpSteer2``): the preference subset, or pairs of rated rows.

Preference rows: ``preference_strength`` -3..3, negative = response 1 better, so chosen is
``response_1`` when it is below 0; ``margin = |strength|``; 0 is a tie. Rating rows: two
consecutive rows with the same prompt answer it with two models; the one with the higher
rating (``attribute``, default helpfulness) is chosen, margin = the rating difference.
Labels aggregate about three annotators without ids, and model names were not released.
Multi-turn prompts join turns with ``<extra_id_1>`` markers and become chat messages.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmlens._errors import InputError
from rmlens._params import Config
from rmlens.data.converters._common import (
    INTEGER,
    NUMBER,
    TEXT,
    TIES,
    TIES_HELP,
    Record,
    Tally,
    is_empty,
)
from rmlens.data.converters._registry import Converter
from rmlens.data.converters._source import data_files

D = "HelpSteer2"
ATTRIBUTES = ("helpfulness", "correctness", "coherence", "complexity", "verbosity")
MARKER = re.compile(r"\n?<extra_id_1>(User|Assistant)\n")


@dataclass
class HelpSteer2Options(Config):
    """Options of the HelpSteer2 converter."""

    ties: str = field(default="drop", metadata={"help": TIES_HELP})
    subset: str = field(
        default="auto",
        metadata={
            "help": "preference (response_1/response_2 with preference_strength), "
            "ratings (consecutive rated rows) or auto (from the fields; the preference "
            "subset for a folder or the hub)."
        },
    )
    attribute: str = field(
        default="helpfulness",
        metadata={
            "help": "Ratings subset: the attribute that orders a pair "
            "(helpfulness, correctness, coherence, complexity, verbosity)."
        },
    )

    _constraints = {
        "ties": TIES,
        "subset": ("auto", "preference", "ratings"),
        "attribute": ATTRIBUTES,
    }


def parse_prompt(text: str, rec: Record) -> list[dict[str, str]]:
    """``"u1\\n<extra_id_1>Assistant\\na1\\n<extra_id_1>User\\nu2"`` -> chat messages."""
    parts = MARKER.split(text)
    messages = [{"role": "user", "content": parts[0]}]
    for role, content in zip(parts[1::2], parts[2::2]):
        messages.append({"role": role.lower(), "content": content})
    if any("<extra_id_1>" in m["content"] for m in messages):
        raise rec.fail(
            "prompt",
            "turns joined by '\\n<extra_id_1>User\\n' or '\\n<extra_id_1>Assistant\\n'",
            text,
        )
    return messages


def _subset(sources: list, opts: HelpSteer2Options) -> str:
    if opts.subset != "auto":
        return opts.subset
    fields = set(sources[0].fields)
    if "preference_strength" in fields:
        return "preference"
    if "response" in fields and set(ATTRIBUTES) & fields:
        first = sources[0].rows[0].get(ATTRIBUTES[0])
        if isinstance(first, list):
            raise InputError(
                f"{sources[0].name}: the disagreements subset (one rating per annotator, no "
                "annotator ids) has no pairs to convert; use the preference subset or the "
                "rated rows (train/validation)"
            )
        return "ratings"
    raise InputError(
        f"{sources[0].name}: not a HelpSteer2 file: expected field 'preference_strength' "
        f"(preference subset) or 'response' with ratings; fields here: "
        f"{', '.join(sources[0].fields[:12])}"
    )


def _preference(sources: list, opts: HelpSteer2Options, tally: Tally) -> Iterator[dict]:
    for rec in tally.each(sources):
        strength = rec.get("preference_strength", INTEGER, D)
        if not -3 <= strength <= 3:
            raise rec.fail("preference_strength", "an integer from -3 to 3", strength)
        one, two = (
            rec.get("response_1", TEXT, D, null=True),
            rec.get("response_2", TEXT, D, null=True),
        )
        if is_empty(one) or is_empty(two):
            tally.drop("empty response")
            continue
        if strength == 0 and opts.ties == "drop":
            tally.drop("tie (preference_strength 0)")
            continue
        chosen, rejected = (one, two) if strength <= 0 else (two, one)
        yield {
            "id": f"preference:{rec.loc}",
            "prompt": parse_prompt(rec.get("prompt", TEXT, D), rec),
            "chosen": chosen,
            "rejected": rejected,
            "margin": float(abs(strength)),
            "preference_strength": strength,
            "chosen_response": 1 if strength <= 0 else 2,
            "split": rec.opt("split", TEXT),
            "source_row": rec.loc,
        }


def _ratings(sources: list, opts: HelpSteer2Options, tally: Tally) -> Iterator[dict]:
    group: list[Record] = []

    def flush() -> Iterator[dict]:
        for k in range(0, len(group) - 1, 2):
            yield from _rated_pair(group[k], group[k + 1], opts, tally)
        if len(group) % 2:
            tally.skipped["rated rows without a partner (odd count for a prompt)"] += 1

    for rec in tally.each(sources):
        prompt = rec.get("prompt", TEXT, D)
        if group and prompt != group[0].row["prompt"]:
            yield from flush()
            group = []
        group.append(rec)
    yield from flush()


def _rated_pair(a: Record, b: Record, opts: HelpSteer2Options, tally: Tally) -> Iterator[dict]:
    name = opts.attribute
    ra, rb = a.get(name, NUMBER, D), b.get(name, NUMBER, D)
    ta, tb = a.get("response", TEXT, D, null=True), b.get("response", TEXT, D, null=True)
    if is_empty(ta) or is_empty(tb):
        tally.drop("empty response")
        return
    if ta == tb:
        tally.drop("identical responses")
        return
    if ra == rb and opts.ties == "drop":
        tally.drop(f"tie (equal {name})")
        return
    (hi, hs), (lo, ls) = ((b, rb), (a, ra)) if rb > ra else ((a, ra), (b, rb))
    yield {
        "id": f"ratings:{hi.loc}>{lo.loc}",
        "prompt": parse_prompt(a.row["prompt"], a),
        "chosen": hi.row["response"],
        "rejected": lo.row["response"],
        "margin": hs - ls,
        "chosen_score": hs,
        "rejected_score": ls,
        "chosen_row": hi.loc,
        "rejected_row": lo.loc,
        **{f"chosen_{k}": hi.opt(k, NUMBER) for k in ATTRIBUTES},
        **{f"rejected_{k}": lo.opt(k, NUMBER) for k in ATTRIBUTES},
    }


def pairs(sources: list, opts: HelpSteer2Options, tally: Tally) -> Iterator[dict[str, Any]]:
    tally.layout = _subset(sources, opts)
    if tally.layout == "preference":
        yield from _preference(sources, opts, tally)
    else:
        yield from _ratings(sources, opts, tally)


def _folder_files(folder: Path, split: str | None, opts: HelpSteer2Options) -> list[Path]:
    files = data_files(folder)
    preference = [p for p in files if "preference" in p.name]
    if opts.subset in ("auto", "preference") and preference:
        return preference
    if opts.subset == "preference":
        return []
    wanted = split or "train"
    return [p for p in files if p.name.startswith(wanted) and "preference" not in p.name]


CONVERTER = Converter(
    name="helpsteer2",
    title="HelpSteer2 (nvidia/HelpSteer2)",
    hub_id="nvidia/HelpSteer2",
    options=HelpSteer2Options,
    pairs=pairs,
    rules=(
        "Preference subset: chosen = response_1 if preference_strength < 0 else response_2, "
        "margin = |strength| (1-3), strength 0 is a tie; the split field is kept. Ratings: "
        "consecutive rows with the same prompt pair up (1-2, 3-4), margin = difference of "
        "--attribute (0-4). No user ids (about 3 annotators per label) and no model names; "
        "multi-turn prompts (<extra_id_1> markers) become chat messages; group by prompt."
    ),
    group_by=None,
    hub_args=lambda opts: {} if opts.subset == "ratings" else {"data_dir": "preference"},
    folder_files=_folder_files,
)
