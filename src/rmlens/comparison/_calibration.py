"""The post-hoc reference row: a Bradley-Terry audit's run scores, length-calibrated.

Huang et al. 2024 (arXiv 2409.17407) subtract from each reward a LOWESS fit of reward on
response length, f(len(y)), fitted on all the RM's scored responses. Here each run is one
RM, so each run's rewards of every pair it scored (chosen and rejected pooled) are
calibrated on their own:

    r'_ir = r_ir - f_r(len(y_i))       f_r = LOWESS(run r's rewards ~ length in characters)

and every figure computed from run scores (held-out accuracy, slices, reward-length
correlation, TM/TG/CM by margin) is computed again from r'. The function is
``rmlens.evaluation.calibrate_length``; when the installed rmlens lacks it, there is no
reference row and the notes say so.
"""

from __future__ import annotations

import numpy as np

import rmlens.evaluation as evaluation
from rmlens.comparison._audit import Audit

SUFFIX = "length calibration"


def calibrator():
    """``rmlens.evaluation.calibrate_length``, or None when this rmlens has none."""
    return getattr(evaluation, "calibrate_length", None)


def character_lengths(texts) -> np.ndarray:
    """Characters of each response text, (n,) (the unit ``calibrate_length`` expects)."""
    return np.fromiter((len(str(t)) for t in texts), dtype=float, count=len(texts))


def length_calibrated(audit: Audit, calibrate) -> Audit:
    """``audit`` with each run's rewards length-calibrated (module docstring), labelled
    ``"<label> + length calibration"``."""
    chars_c = character_lengths(audit.table["chosen"])
    chars_r = character_lengths(audit.table["rejected"])
    r_c, r_r = audit.r_chosen.copy(), audit.r_rejected.copy()
    for j in range(len(audit.runs)):
        rows = np.flatnonzero(np.isfinite(r_c[:, j]) & np.isfinite(r_r[:, j]))
        rewards = np.concatenate([r_c[rows, j], r_r[rows, j]])
        lengths = np.concatenate([chars_c[rows], chars_r[rows]])
        if rewards.size == 0:
            continue
        calibrated = np.asarray(calibrate(rewards, lengths), dtype=float)
        r_c[rows, j], r_r[rows, j] = calibrated[: rows.size], calibrated[rows.size:]
    return audit.with_scores(r_c, r_r, label=f"{audit.label} + {SUFFIX}", reference=SUFFIX)
