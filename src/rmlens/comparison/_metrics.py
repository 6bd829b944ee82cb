"""The comparison's metrics: names, families (one plot each), plain labels, warnings.

A metric's row in ``compare.parquet`` is ``audit, family, metric, value, lo, hi, n,
detail``; probe metrics are named ``probe_flip_<probe>`` after the registered probes.
"""

from __future__ import annotations

import math

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
BASELINE = "bt"  # the objective the others' cost in held-out accuracy is measured from
DIFFERENCES = ("heldout_accuracy_vs_baseline", "cm_margin_low_minus_high")  # shown signed


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


def figure_text(value, lo=None, hi=None, n=None, few: bool = False, signed: bool = False) -> str:
    """A figure as shown in tables: ``value [lo, hi]`` (3 decimals, with a sign when
    ``signed``: a difference), ``(n N)`` after it when few pairs stand behind it, an en dash
    when it is missing."""
    finite = lambda x: x is not None and math.isfinite(float(x))  # noqa: E731
    if not finite(value):
        return "\u2013"
    form = "+.3f" if signed else ".3f"
    text = f"{float(value):{form}}"
    if finite(lo) and finite(hi):
        text += f" [{float(lo):{form}}, {float(hi):{form}}]"
    return text + (f" (n {int(n)})" if few and n is not None else "")


def near_chance(metric: str, value: float) -> bool:
    """An accuracy within ``NEAR_CHANCE`` of chance, or below it."""
    return (metric in ACCURACY_METRICS and isinstance(value, float) and math.isfinite(value)
            and value <= CHANCE + NEAR_CHANCE)  # fmt: skip
