"""Options of the HTML report (one source of truth for the Python API and the CLI)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rmlens._errors import InputError


@dataclass
class ReportConfig:
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

    def validate(self) -> ReportConfig:
        """Check every option; raise :class:`~rmlens._errors.InputError` on a bad value."""
        for name, low in (("max_points", 1), ("top_k", 1), ("max_text_chars", 20)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InputError(
                    f"The '{name}' parameter of ReportConfig must be an int >= {low}. "
                    f"Got {value!r}."
                )
        if not isinstance(self.max_page_mb, (int, float)) or not self.max_page_mb >= 6:
            raise InputError(
                "The 'max_page_mb' parameter of ReportConfig must be a number >= 6 "
                f"(Plotly alone takes about 5 MB). Got {self.max_page_mb!r}."
            )
        return self
