"""UltraFeedback: the binarized pairs (``HuggingFaceH4/ultrafeedback_binarized``) or the raw
release with four rated completions per instruction (``openbmb/UltraFeedback``).

The judge is GPT-4, so there is no user id. The binarized set has no model names; they are
recovered by an exact join to the raw release (same instruction, same response text) with
``models_from``, and every response the join cannot name is counted in the report.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from rmlens._errors import InputError
from rmlens._params import Config
from rmlens.data.converters._common import (
    IDENT,
    LIST,
    MAPPING,
    MESSAGES,
    NUMBER,
    TEXT,
    TIES,
    TIES_HELP,
    Record,
    Tally,
    is_empty,
    is_missing,
    user,
)
from rmlens.data.converters._registry import Converter
from rmlens.data.converters._source import read_sources

D = "UltraFeedback"
BINARIZED_ID = "HuggingFaceH4/ultrafeedback_binarized"
RAW_ID = "openbmb/UltraFeedback"
ASPECTS = ("instruction_following", "honesty", "truthfulness", "helpfulness")
SCORES = ("overall", "fine-grained", *ASPECTS)
PLACEHOLDER = "N/A"  # the binarized set's text for a missing completion


@dataclass
class UltraFeedbackOptions(Config):
    """Options of the UltraFeedback converter."""

    ties: str = field(default="drop", metadata={"help": TIES_HELP})
    variant: str = field(
        default="auto",
        metadata={
            "help": "binarized (one pair per row), raw (four rated completions per row) "
            "or auto (from the fields)."
        },
    )
    score: str = field(
        default="overall",
        metadata={
            "help": "Raw release: the score that orders completions: overall "
            "(overall_score, as the binarized set), fine-grained (fine-grained_score) or "
            "one aspect rating (instruction_following, honesty, truthfulness, "
            "helpfulness)."
        },
    )
    models_from: str | None = field(
        default=None,
        metadata={
            "help": "Binarized set: the raw release (file, folder or hub id) to recover "
            "model names from, by an exact join on instruction and response text."
        },
    )

    _constraints = {"ties": TIES, "variant": ("auto", "binarized", "raw"), "score": SCORES}


def _variant(sources: list, opts: UltraFeedbackOptions) -> str:
    if opts.variant != "auto":
        variant = opts.variant
    else:
        fields = set(sources[0].fields)
        if "completions" in fields:
            variant = "raw"
        elif {"chosen", "rejected"} <= fields:
            variant = "binarized"
        else:
            raise InputError(
                f"{sources[0].name}: not an UltraFeedback file: expected field 'completions' "
                f"(raw release) or 'chosen' and 'rejected' (binarized); fields here: "
                f"{', '.join(sources[0].fields[:12])}"
            )
    if variant == "binarized" and opts.score != "overall":
        raise InputError(
            f"`score` {opts.score}: applies to the raw release only; the binarized "
            "set is ordered by overall_score"
        )
    if variant == "raw" and opts.models_from:
        raise InputError(
            "`models_from`: applies to the binarized set only; the raw release names its models"
        )
    return variant


def prompt_id(text: str) -> str:
    """The binarized set's ``prompt_id``: sha256 of the instruction, in hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _completion_score(item: Record, score: str) -> float | None:
    """The completion's score; None when it is unrated ('N/A' or null)."""
    if score in ("overall", "fine-grained"):
        name = "overall_score" if score == "overall" else "fine-grained_score"
        value = item.raw(name, D)
    else:
        annotations = item.get("annotations", MAPPING, D)
        aspect = Record(annotations.get(score) or {}, f"{item.where}, annotations.{score}")
        if score not in annotations:
            raise item.missing(f"annotations.{score}", D)
        name, value = f"annotations.{score}.Rating", aspect.raw("Rating", D)
    if is_missing(value):
        return None
    ok, number = NUMBER.parse(value)
    if ok:
        return number
    if isinstance(value, str):
        return None
    raise item.fail(name, "a number or a numeric string ('1'-'5')", value)


def _raw(sources: list, opts: UltraFeedbackOptions, tally: Tally) -> Iterator[dict[str, Any]]:
    for rec in tally.each(sources):
        instruction = rec.get("instruction", TEXT, D)
        pid = prompt_id(instruction)
        completions = []
        for k, c in enumerate(rec.get("completions", LIST, D)):
            if not isinstance(c, dict):
                raise rec.fail("completions", "a list of completion objects", c)
            item = Record(c, f"{rec.where}, completions item {k + 1}")
            completions.append(
                (
                    k,
                    item.get("model", IDENT, D),
                    item.get("response", TEXT, D, null=True),
                    item.opt("principle", TEXT),
                    _completion_score(item, opts.score),
                )
            )
        unrated = sum(c[4] is None for c in completions)
        tally.skipped[f"completions without a numeric {opts.score} score ('N/A')"] += unrated
        for a, b in combinations(completions, 2):
            if is_empty(a[2]) or is_empty(b[2]):
                tally.drop("empty response")
            elif a[4] is None or b[4] is None:
                tally.drop(f"{opts.score} score not a number ('N/A')")
            elif a[2] == b[2]:
                tally.drop("identical responses")
            elif a[4] == b[4] and opts.ties == "drop":
                tally.drop("tie (equal scores)")
            else:
                hi, lo = (b, a) if b[4] > a[4] else (a, b)
                yield {
                    "id": f"{pid[:16]}:{hi[0]}>{lo[0]}",
                    "prompt": [user(instruction)],
                    "chosen": hi[2],
                    "rejected": lo[2],
                    "chosen_model": hi[1],
                    "rejected_model": lo[1],
                    "margin": hi[4] - lo[4],
                    "prompt_id": pid,
                    "source": rec.opt("source", TEXT),
                    "chosen_principle": hi[3],
                    "rejected_principle": lo[3],
                    "chosen_score": hi[4],
                    "rejected_score": lo[4],
                    "chosen_index": hi[0],
                    "rejected_index": lo[0],
                }


def _model_index(models_from: str) -> dict[str, dict[str, Any]]:
    """instruction -> {"source": ..., "responses": {text: {(model, principle), ...}}}."""
    raw = dataclasses.replace(CONVERTER, hub_id=RAW_ID, splits=("train",))
    index: dict[str, dict[str, Any]] = {}
    for records in read_sources(raw, models_from, None, UltraFeedbackOptions(variant="raw")):
        if records.rows and "completions" not in records.fields:
            raise InputError(
                f"{records.name} (`models_from`): not the raw UltraFeedback "
                f"release: no field 'completions'"
            )
        for i, row in enumerate(records.rows):
            rec = Record(row, records.where(i))
            entry = index.setdefault(
                rec.get("instruction", TEXT, D),
                {"source": rec.opt("source", TEXT), "responses": defaultdict(set)},
            )
            for k, c in enumerate(rec.get("completions", LIST, D)):
                item = Record(c, f"{rec.where}, completions item {k + 1}")
                text = item.get("response", TEXT, D, null=True)
                if text is not None:
                    entry["responses"][text].add(
                        (item.get("model", IDENT, D), item.opt("principle", TEXT))
                    )
    return index


def _join(index: dict | None, instruction: str, text: str, tally: Tally) -> tuple[Any, Any]:
    """(model, principle) of one response by exact join, or (None, None) counted as missing."""
    if index is None:
        return None, None
    entry = index.get(instruction)
    if entry is None:
        tally.notes["model names missing: instruction not in --models-from"] += 1
        return None, None
    found = entry["responses"].get(text)
    if not found:
        tally.notes["model names missing: response text not in --models-from"] += 1
        return None, None
    if len({m for m, _ in found}) > 1:
        tally.notes["model names missing: same response text from several models"] += 1
        return None, None
    tally.notes["model names joined (responses)"] += 1
    return next(iter(found))


def _binarized(sources: list, opts: UltraFeedbackOptions, tally: Tally) -> Iterator[dict]:
    index = _model_index(opts.models_from) if opts.models_from else None
    if index is None:
        tally.notes["no model names (pass --models-from with the raw release)"] += 1
    for rec in tally.each(sources):
        chosen = rec.get("chosen", MESSAGES, D)
        rejected = rec.get("rejected", MESSAGES, D)
        for name, messages in (("chosen", chosen), ("rejected", rejected)):
            if messages[-1]["role"] != "assistant":
                raise rec.fail(
                    name, "messages ending with the assistant's response", messages[-1]["role"]
                )
        if chosen[:-1] != rejected[:-1]:
            raise rec.fail(
                "rejected", "the same messages as 'chosen' before the response", rec.row["rejected"]
            )
        text = rec.get("prompt", TEXT, D)
        pid = rec.opt("prompt_id", IDENT) or prompt_id(text)
        sc, sr = rec.get("score_chosen", NUMBER, D), rec.get("score_rejected", NUMBER, D)
        c, r = chosen[-1]["content"], rejected[-1]["content"]
        if any(is_empty(x) or x.strip() == PLACEHOLDER for x in (c, r)):
            tally.drop(f"empty or placeholder response ('{PLACEHOLDER}')")
            continue
        if sr > sc:
            raise rec.fail(
                "score_rejected",
                f"<= score_chosen ({sc:g}): the chosen completion has the top overall_score",
                sr,
            )
        if c == r:
            tally.drop("identical responses")
            continue
        if sc == sr and opts.ties == "drop":
            tally.drop("tie (equal scores)")
            continue
        row = {"id": pid, "prompt": chosen[:-1] or [user(text)], "chosen": c, "rejected": r}
        if index is not None:
            (cm, cp), (rm, rp) = _join(index, text, c, tally), _join(index, text, r, tally)
            row.update(chosen_model=cm, rejected_model=rm)
        row.update(margin=sc - sr, prompt_id=pid, chosen_score=sc, rejected_score=sr)
        if index is not None:
            entry = index.get(text) or {}
            row.update(source=entry.get("source"), chosen_principle=cp, rejected_principle=rp)
        yield row


def pairs(sources: list, opts: UltraFeedbackOptions, tally: Tally) -> Iterator[dict[str, Any]]:
    tally.layout = _variant(sources, opts)
    if tally.layout == "raw":
        yield from _raw(sources, opts, tally)
    else:
        yield from _binarized(sources, opts, tally)


CONVERTER = Converter(
    name="ultrafeedback",
    title=f"UltraFeedback ({BINARIZED_ID}, {RAW_ID})",
    hub_id=lambda opts: RAW_ID if opts.variant == "raw" else BINARIZED_ID,
    options=UltraFeedbackOptions,
    pairs=pairs,
    rules=(
        "GPT-4 feedback, no user id (group by prompt). Binarized: one pair per row, margin = "
        "score_chosen - score_rejected (0 is a tie: rejected was drawn at random), model names "
        "only through --models-from (an exact join on instruction and response text; misses "
        "are counted, never guessed). Raw: every two of the four completions with different "
        "scores (--score) make a pair with their model and principle (the sampling field); "
        "'N/A' ratings are counted and left out."
    ),
    group_by=None,
    splits=("train_prefs", "train"),
)
