"""The written rules that turn a finding's figures into its verdict (issue 59, item 6).

A claim is tested in one or more settings (an RM, a shift, a data set). Each setting is a
``Part``: one figure's 95% interval and what the claim says of it, its direction and, where
the source gives one, its size. ``decide`` applies ``RULES`` to the parts; it is the only
place a finding's verdict is given (``verdicts.py`` says which figures each finding's claim
rests on; the findings page prints ``RULES``).

Only stdlib here: the documentation build reads ``RULES`` from this file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
PARTLY, NOT_TESTABLE = "partly", "not testable here"
MISSING = "missing"  # a part's outcome only: the figure's interval is not at hand
RULES = (
    (REPRODUCED, "in each claimed setting the figure's 95% interval excludes 0 (no effect) on "
     "the claimed side, over seeds where training noise dominates, and does not lie wholly "
     "below the claimed size where the source claims one."),
    (NOT_REPRODUCED, "in some setting the interval excludes the claimed effect (it lies "
     "wholly on the other side of 0, or below the claimed size), and in none is the claim "
     "reproduced."),
    (INCONCLUSIVE, "no setting excludes the claimed effect, and some interval holds both 0 "
     "and the claimed effect."),
    (PARTLY, "some settings are reproduced and others not reproduced."),
    (NOT_TESTABLE, "no figure measured here can test the claim."),
)  # fmt: skip
VERDICTS = tuple(label for label, _ in RULES)


@dataclass(frozen=True)
class Part:
    """One claimed setting of a finding.

    Parameters
    ----------
    figure : str
        The finding's figure key (or, where it is missing, the figure the rules need).
    sign : {1, -1, 0}
        The claimed direction from ``null``: above, below, or either way.
    lo, hi : float or None
        The figure's 95% interval; None where the finding lacks it.
    size : float or None
        The least effect the source claims, in the claimed direction (a distance from
        ``null``); None where it claims a direction only.
    null : float, default=0.0
        The figure's value under no effect ("0" in ``RULES``): 1 for the agreement of two
        rankings, chance for an overlap.
    data : str or None, default=None
        The kind of data the setting measures, where a claim may hold on one kind and not
        on another: each kind then gets its own verdict too (``decide_by_data``).
    """

    figure: str
    sign: int
    lo: float | None
    hi: float | None
    size: float | None = None
    null: float = 0.0
    data: str | None = None

    def __post_init__(self) -> None:
        if self.sign not in (1, -1, 0):
            raise ValueError(f"Part {self.figure!r}: sign must be 1, -1 or 0, got {self.sign}")
        if self.size is not None and not self.size > 0:
            raise ValueError(f"Part {self.figure!r}: size must be > 0, got {self.size}")
        if (self.lo is None) != (self.hi is None):
            raise ValueError(f"Part {self.figure!r}: give both lo and hi, or neither")
        if self.lo is not None and not self.lo <= self.hi:
            raise ValueError(f"Part {self.figure!r}: lo must be <= hi, got {self.lo} > {self.hi}")


def outcome(part: Part) -> str:
    """One setting's outcome under ``RULES``: reproduced, not reproduced, inconclusive, or
    missing (no interval)."""
    if part.lo is None:
        return MISSING
    lo, hi = part.lo - part.null, part.hi - part.null
    if part.sign == 0:
        if lo > 0 or hi < 0:
            return REPRODUCED
        inside = part.size is not None and -part.size < lo and hi < part.size
        return NOT_REPRODUCED if inside else INCONCLUSIVE
    lo, hi = sorted((part.sign * lo, part.sign * hi))  # the claimed side is now > 0
    missed = hi <= 0 if part.size is None else hi < part.size
    if missed:
        return NOT_REPRODUCED  # no value of the claimed effect is in the interval
    return REPRODUCED if lo > 0 else INCONCLUSIVE


def combine(outcomes: Sequence[str]) -> str:
    """The verdict of a claim over settings whose outcomes are all known: a claim made of
    each setting fails where one setting fails, and holds only where all hold."""
    if not outcomes:
        return NOT_TESTABLE
    if all(o == REPRODUCED for o in outcomes):
        return REPRODUCED
    if NOT_REPRODUCED in outcomes:
        return PARTLY if REPRODUCED in outcomes else NOT_REPRODUCED
    return INCONCLUSIVE


@dataclass(frozen=True)
class Verdict:
    """``decide``'s answer: ``label`` is None where a missing interval could change it."""

    label: str | None
    parts: tuple[Part, ...]
    outcomes: tuple[str, ...]

    def record(self) -> dict:
        """Which rule decided, and each part's outcome: the finding's ``verdict_rule``."""
        parts = []
        for part, said in zip(self.parts, self.outcomes):
            row = {"figure": part.figure}
            if said != MISSING:  # what is claimed of a missing figure: ``verdicts.CLAIMS``
                row["sign"] = part.sign
                row.update({"size": part.size} if part.size is not None else {})
                row.update({"null": part.null} if part.null != 0 else {})
            row.update({"data": part.data} if part.data is not None else {})
            parts.append({**row, "outcome": said})
        return {"rule": self.label, "parts": parts}


def decide(parts: Sequence[Part]) -> Verdict:
    """A finding's verdict from its claimed settings, by ``RULES``.

    A part without an interval leaves the verdict standing only when every outcome it could
    have gives the same verdict; otherwise ``label`` is None.

    Examples
    --------
    >>> decide([Part("a", 1, 0.1, 0.3), Part("b", 1, -0.2, 0.4)]).label
    'inconclusive'
    >>> decide([Part("a", 1, 0.1, 0.3), Part("b", 1, -0.4, -0.2)]).label
    'partly'
    """
    outcomes = tuple(outcome(p) for p in parts)
    known = [o for o in outcomes if o != MISSING]
    fills = product((REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE), repeat=len(outcomes) - len(known))
    labels = {combine([*known, *fill]) for fill in fills}
    return Verdict(labels.pop() if len(labels) == 1 else None, tuple(parts), outcomes)


def decide_by_data(parts: Sequence[Part]) -> dict[str, str | None]:
    """The verdict of each kind of data on its own settings (``Part.data``), in the order
    the kinds first appear; parts of no kind count for none. None as in ``decide``.

    Examples
    --------
    >>> decide_by_data([Part("a", 1, 0.4, 0.6, data="ranked"),
    ...                 Part("b", 1, -0.1, 0.1, data="ratings")])
    {'ranked': 'reproduced', 'ratings': 'inconclusive'}
    """
    kinds = dict.fromkeys(p.data for p in parts if p.data is not None)
    return {kind: decide([p for p in parts if p.data == kind]).label for kind in kinds}
