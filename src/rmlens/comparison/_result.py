"""What a comparison found: :class:`Comparison`, made by ``compare`` (``_compare``) and
written by ``_record``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rmlens.comparison import metrics as M


@dataclass
class Comparison:
    """What :func:`compare` found (and wrote).

    Parameters
    ----------
    figures : DataFrame
        ``audit, family, metric, value, lo, hi, n, detail, near_chance``: one row per audit
        and metric (``compare.parquet``); ``lo``/``hi`` the percentile bootstrap interval
        over runs (NaN where the figure is no mean over runs: correlations across pairs,
        SHAP shares), ``n`` the pairs behind the figure, ``detail`` what it is in words,
        ``near_chance`` an accuracy within 0.05 of chance or below (only from
        ``min_group_pairs`` pairs on), ``few_pairs`` a figure of held-out accuracy, a slice
        or memorization by margin on fewer pairs than that (shown with its n, no interval).
    agreement : DataFrame
        ``audit_a, audit_b, score, spearman, n, reliability_a, reliability_b, ceiling,
        above_ceiling``: per pair of audits and score (tm, tg, cm), over the common pairs
        with both scores finite (``n``).
    audits : list of dict
        What each row's audit is (label, path, model, mode, head, objective, runs, ...).
    notes, warnings : list of str
        What the comparison noted and warned about, in words.
    overoptimization : Overoptimization or None
        ``mitigate(..., candidates=...)``: the best-of-n curves of every objective.
    flags : list of str
        The warnings about single figures (an accuracy near or below chance), also in
        ``warnings``; the page folds them into one table of audits by figure.
    details : dict
        Margin terciles, worst groups, slices and SHAP fits per audit, and ``baseline``: the
        row the others' held-out accuracy is measured against (``compare.json``).
    out : Path or None
        The comparison directory (None when nothing was written).
    files : list of str
        The files written into ``out``.
    """

    figures: pd.DataFrame
    agreement: pd.DataFrame
    audits: list[dict]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    out: Path | None = None
    files: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    overoptimization: Any = None

    def wide(self) -> pd.DataFrame:
        """One row per metric, one column per audit: ``value [lo, hi]`` strings.

        Returns
        -------
        DataFrame
            Indexed by metric (in the page's order), one column per audit label; "–" where
            an audit has no such figure.
        """
        f = self.figures.assign(cell=[M.figure_text(r.value, r.lo, r.hi, r.n, r.few_pairs,
                                                     r.metric in M.DIFFERENCES)
                                      for r in self.figures.itertuples()])  # fmt: skip
        table = f.pivot(index="metric", columns="audit", values="cell")
        order = sorted(table.index, key=lambda m: (M.order(m), m))
        labels = [a["label"] for a in self.audits]
        return table.reindex(index=order, columns=labels).fillna("–")
