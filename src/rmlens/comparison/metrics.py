"""The comparison's metrics: names, families (one plot each), plain labels, warnings, and
a figure as the tables write it (:func:`figure_text`), for the report, the command line and
whoever reads ``compare.parquet``.

A metric's row in ``compare.parquet`` is ``audit, family, metric, value, lo, hi, n,
detail``; probe metrics are named ``probe_flip_<probe>`` after the registered probes.
"""

from __future__ import annotations

import math

from rmlens.rewards.objectives import BradleyTerry

CHANCE = 0.5
NEAR_CHANCE = 0.05  # an accuracy within this of chance (or below it) is warned about

# metric -> (family, label); the order is the order of tables and plots
METRICS: dict[str, tuple[str, str]] = {
    "heldout_accuracy": ("accuracy", "held-out accuracy"),
    "heldout_accuracy_vs_baseline": ("accuracy", "held-out accuracy minus the baseline's"),
    "worst_group_accuracy": ("accuracy", "worst-group held-out accuracy"),
    "slice_chosen_shorter": ("slices", "accuracy, chosen response shorter"),
    "slice_minority_model": ("slices", "accuracy, chosen by the least-preferred system"),
    "slice_chosen_refusal": ("slices", "accuracy, chosen response a refusal"),
    "slice_quality": ("slices", "accuracy, pairs decided by quality (synthetic)"),
    "slice_quality_chosen_shorter": (
        "slices", "accuracy, quality pairs whose better response is shorter (synthetic)"
    ),
    "slice_low_margin": ("margin", "accuracy, low-margin tercile"),
    "cm_margin_low": ("margin", "mean CM, low-margin tercile"),
    "cm_margin_mid": ("margin", "mean CM, mid-margin tercile"),
    "cm_margin_high": ("margin", "mean CM, high-margin tercile"),
    "cm_margin_low_minus_high": ("margin", "mean CM, low- minus high-margin tercile"),
    "cm_margin_spearman": ("margin", "Spearman(CM, margin)"),
    "tg_low_margin": ("margin", "mean TG, low-margin tercile"),
    "reward_length_spearman": ("shortcuts", "Spearman(reward, words), held-out"),
    "shap_shortcut_share_tg": ("shortcuts", "shortcut share of SHAP, TG"),
    "shap_shortcut_share_cm": ("shortcuts", "shortcut share of SHAP, CM"),
}
FAMILIES = {
    "accuracy": "Held-out accuracy",
    "slices": "Counter-bias slices (held-out accuracy)",
    "margin": "By preference margin: accuracy and memorization",
    "shortcuts": "Shortcut reliance",
    "probes": "Shortcut-probe flip rates (held-out)",
}
PROBE_PREFIX = "probe_flip_"
ACCURACY_METRICS = ("heldout_accuracy", "worst_group_accuracy", "slice_chosen_shorter",
                    "slice_minority_model", "slice_chosen_refusal", "slice_quality",
                    "slice_quality_chosen_shorter", "slice_low_margin")  # fmt: skip
BASELINE = BradleyTerry.name  # the objective the others' cost in held-out accuracy is from
DIFFERENCES = ("heldout_accuracy_vs_baseline", "cm_margin_low_minus_high")  # shown signed
# figures that rest on `n` pairs: under `min_group_pairs` of them a figure is "few" (greyed,
# shown with its n and no interval, never flagged nor judged a winner)
COUNTED_FAMILIES = ("accuracy", "slices", "margin")
# |Spearman(CM, margin)| under this (or under 2 / sqrt(n - 1), twice a correlation's noise
# over n pairs) is no clear direction of memorization by margin
NO_DIRECTION = 0.1


def family(metric: str) -> str:
    if metric.startswith(PROBE_PREFIX):
        return "probes"
    return METRICS[metric][0]


def label(metric: str) -> str:
    """The metric in words, for tables and plots."""
    if metric.startswith(PROBE_PREFIX):
        return f"flip rate, {metric[len(PROBE_PREFIX):]}"
    return METRICS.get(metric, (None, metric))[1]


def order(metric: str) -> int:
    names = list(METRICS)
    return names.index(metric) if metric in names else len(names)


def _finite(x) -> bool:
    try:
        return x is not None and not isinstance(x, bool) and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def figure_text(value, lo=None, hi=None, n=None, few: bool = False, signed: bool = False) -> str:
    """A figure as shown in tables: ``value [lo, hi]`` (3 decimals, with a sign when
    ``signed``: a difference), an en dash when it is missing. A figure on few pairs
    (``few``) is ``value (n N)``: no interval, which over a pair or two says nothing (a
    single pair's accuracy draws as 0.000 [0.000, 0.000])."""
    if not _finite(value):
        return "\u2013"
    form = "+.3f" if signed else ".3f"
    text = f"{float(value):{form}}"
    if few and n is not None:
        return f"{text} (n {int(n)})"
    if _finite(lo) and _finite(hi):
        text += f" [{float(lo):{form}}, {float(hi):{form}}]"
    return text


def few_pairs(metric: str, n, min_pairs: int) -> bool:
    """A figure of a counted family (``COUNTED_FAMILIES``) on fewer than ``min_pairs``
    pairs."""
    counted = METRICS.get(metric, ("",))[0] in COUNTED_FAMILIES  # probes, SHAP: not counted
    return counted and _finite(n) and n < min_pairs


def direction_floor(n=None) -> float:
    """The |Spearman(CM, margin)| a direction needs over ``n`` pairs: ``NO_DIRECTION`` or
    2 / sqrt(n - 1), whichever is larger (``NO_DIRECTION`` when n is unknown)."""
    if not _finite(n):
        return NO_DIRECTION
    return max(NO_DIRECTION, 2 / math.sqrt(n - 1)) if n > 1 else math.inf


def cm_margin_direction(spearman, n=None, low_minus_high_lo=None,
                        low_minus_high_hi=None) -> str:  # fmt: skip
    """Which way CM goes with margin: ``"rises"``, ``"falls"`` or ``"unclear"``.

    Unclear when |Spearman(CM, margin)| is under ``NO_DIRECTION`` or under 2 / sqrt(n - 1)
    (twice the noise level of a correlation over n pairs), or when the interval of CM's
    low-minus-high-margin tercile difference lies wholly on the side the correlation
    denies (CM falling with margin means low minus high > 0).
    """
    if not _finite(spearman) or abs(spearman) < direction_floor(n):
        return "unclear"
    way = "falls" if spearman < 0 else "rises"
    lo, hi = low_minus_high_lo, low_minus_high_hi
    if _finite(lo) and _finite(hi) and ((way == "falls" and hi < 0) or (way == "rises" and lo > 0)):
        return "unclear"
    return way


def near_chance(metric: str, value: float) -> bool:
    """An accuracy within ``NEAR_CHANCE`` of chance, or below it."""
    return (metric in ACCURACY_METRICS and isinstance(value, float) and math.isfinite(value)
            and value <= CHANCE + NEAR_CHANCE)  # fmt: skip
