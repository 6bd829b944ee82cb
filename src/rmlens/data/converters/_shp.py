"""Stanford Human Preferences (``stanfordnlp/SHP``): two Reddit comments on one post -> a pair.

``labels`` is 1 when comment A is preferred. ``score_ratio`` is the preferred comment's
score over the other's (>= 1 whichever side won), so the margin is ``log(score_ratio)``
(or the ratio itself), never a ratio of A over B. Pairs of one post share comments, so
audits should group by post (``--group-by post_id``), and the card advises capping the
pairs per post. Collective votes: no user id; the responses are human, so no model names.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmlens._params import Config, non_negative, positive_int
from rmlens.data.converters._common import IDENT, INTEGER, NUMBER, TEXT, Record, Tally, is_empty
from rmlens.data.converters._registry import Converter
from rmlens.data.converters._source import data_files

D = "SHP"
RATIO_TOLERANCE = 1e-3


@dataclass
class ShpOptions(Config):
    """Options of the SHP converter."""

    margin_from: str = field(
        default="log-ratio",
        metadata={
            "help": "SHP margin: log-ratio (log of score_ratio, 0 = equal scores) or "
            "ratio (score_ratio itself, >= 1)."
        },
    )
    min_ratio: float = field(
        default=1.0,
        metadata={
            "help": "SHP: drop pairs whose score_ratio is below this (the card suggests "
            "filtering weak preferences, e.g. 2)."
        },
    )
    max_per_post: int | None = field(
        default=None,
        metadata={
            "help": "SHP: keep at most this many pairs per post, those with the largest "
            "score_ratio (default: all)."
        },
    )

    _constraints = {
        "margin_from": ("log-ratio", "ratio"),
        "min_ratio": (lambda x: non_negative(x), "a number >= 0"),
        "max_per_post": (lambda n: n is None or positive_int(n), "an int > 0 (or None: no cap)"),
    }


def _comment(rec: Record, side: str) -> tuple[str | None, str, int]:
    return (
        rec.get(f"human_ref_{side}", TEXT, D, null=True),
        rec.get(f"c_root_id_{side}", IDENT, D),
        rec.get(f"score_{side}", INTEGER, D),
    )


def _pair(rec: Record, opts: ShpOptions, tally: Tally) -> dict[str, Any] | None:
    label = rec.get("labels", INTEGER, D)
    if label not in (0, 1):
        raise rec.fail("labels", "1 (comment A preferred) or 0 (comment B preferred)", label)
    a, b = _comment(rec, "A"), _comment(rec, "B")
    (ct, cid, cs), (rt, rid, rs) = (a, b) if label == 1 else (b, a)
    ratio = rec.get("score_ratio", NUMBER, D)
    if ratio < 1:
        raise rec.fail(
            "score_ratio", "the preferred comment's score over the other's (>= 1)", ratio
        )
    if cs < rs:
        raise rec.fail(
            "labels", f"the side with the higher score (score_A {a[2]}, score_B {b[2]})", label
        )
    if rs > 0 and abs(cs / rs - ratio) > RATIO_TOLERANCE * ratio:
        tally.notes["score_ratio differs from the ratio of the two scores"] += 1
    history = rec.get("history", TEXT, D, null=True)
    if is_empty(history):
        tally.drop("empty post (history)")
        return None
    if is_empty(ct) or is_empty(rt):
        tally.drop("empty response")
        return None
    if ct == rt:
        tally.drop("identical responses")
        return None
    if ratio < opts.min_ratio:
        tally.drop("score_ratio below --min-ratio")
        return None
    domain = rec.get("domain", TEXT, D)
    subreddit, _, split = domain.rpartition("_")
    post = rec.get("post_id", IDENT, D)
    return {
        "id": f"{post}:{cid}>{rid}",
        "prompt": history,
        "chosen": ct,
        "rejected": rt,
        "margin": math.log(ratio) if opts.margin_from == "log-ratio" else ratio,
        "post_id": post,
        "subreddit": subreddit or domain,
        "split": split if subreddit else None,
        "domain": domain,
        "score_ratio": ratio,
        "chosen_comment_id": cid,
        "rejected_comment_id": rid,
        "chosen_score": cs,
        "rejected_score": rs,
        "chosen_side": "A" if label == 1 else "B",
        "upvote_ratio": rec.opt("upvote_ratio", NUMBER),
        "seconds_difference": rec.opt("seconds_difference", NUMBER),
    }


def _capped(rows: list[dict[str, Any]], cap: int | None, tally: Tally) -> Iterator[dict]:
    """At most ``cap`` pairs per post: the largest score ratios, in file order."""
    if cap is None:
        yield from rows
        return
    by_post: dict[str, list[int]] = {}
    for k, row in enumerate(rows):
        by_post.setdefault(row["post_id"], []).append(k)
    keep = set()
    for ks in by_post.values():
        keep.update(sorted(ks, key=lambda k: -rows[k]["score_ratio"])[:cap])
    tally.drop("over --max-per-post", len(rows) - len(keep))
    yield from (row for k, row in enumerate(rows) if k in keep)


def pairs(sources: list, opts: ShpOptions, tally: Tally) -> Iterator[dict[str, Any]]:
    tally.layout = "comment pairs"
    rows = [p for rec in tally.each(sources) if (p := _pair(rec, opts, tally)) is not None]
    yield from _capped(rows, opts.max_per_post, tally)


def _folder_files(folder: Path, split: str | None, opts: ShpOptions) -> list[Path]:
    """The SHP repository layout: ``<subreddit>/<split>.json`` (JSON lines)."""
    return data_files(folder, split)


CONVERTER = Converter(
    name="shp",
    title="Stanford Human Preferences (stanfordnlp/SHP)",
    hub_id="stanfordnlp/SHP",
    options=ShpOptions,
    pairs=pairs,
    rules=(
        "chosen = human_ref_A if labels == 1 else human_ref_B; prompt = history (the post). "
        "margin = log(score_ratio), the preferred comment's score over the other's (>= 1 "
        "whichever side won; --margin-from ratio keeps the ratio). Pairs of one post share "
        "comments: group audits by post (memorize --group-by post_id); --max-per-post caps "
        "them. No user ids (collective votes) and no models (human comments); subreddit and "
        "the comment ids are kept."
    ),
    group_by="post_id",
    folder_files=_folder_files,
)
