"""Options of the HTML report (one source of truth for the Python API and the CLI)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rmlens._params import Config, non_negative_int


def _int_at_least(low: int):
    return lambda x: non_negative_int(x) and x >= low


@dataclass
class ReportConfig(Config):
    """Options of :func:`rmlens.report.write_report`.

    Attributes
    ----------
    max_points : int, default=20000
        Most pairs drawn as points on the memorization map; the extremes (highest and lowest
        CM, TM and TG) are always kept, the rest is a seeded random sample, and a density
        layer and the marginal histograms always cover every pair.
    top_k : int, default=20
        Rows in the tables of the most memorized and the least generalized pairs.
    max_text_chars : int, default=4000
        Longest prompt, chosen or rejected text embedded per pair for the details panel;
        longer texts are cut (the full text stays in ``memorization.csv``).
    max_page_mb : float, default=19.0
        Size the page must stay under; embedded texts are cut shorter until it does.
    seed : int, default=0
        Seed of the point sample.
    """

    max_points: int = field(
        default=20000,
        metadata={"help": "most pairs drawn as points on the map (extremes always kept)"},
    )
    top_k: int = field(
        default=20,
        metadata={"help": "rows in the most-memorized and least-generalized tables"},
    )
    max_text_chars: int = field(
        default=4000,
        metadata={"help": "longest prompt/response text embedded per pair (full text in CSV)"},
    )
    max_page_mb: float = field(
        default=19.0,
        metadata={"help": "size limit of report.html in MB; embedded texts are cut to fit"},
    )
    seed: int = field(default=0, metadata={"help": "seed of the point sample"})

    _constraints = {
        "max_points": (_int_at_least(1), "an int >= 1"),
        "top_k": (_int_at_least(1), "an int >= 1"),
        "max_text_chars": (_int_at_least(20), "an int >= 20"),
        "max_page_mb": (
            lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 6,
            "a number >= 6 (Plotly alone takes about 5 MB)",
        ),
        "seed": (non_negative_int, "an int >= 0"),
    }
