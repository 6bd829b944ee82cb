"""Does a fit explain anything? The held-out R^2 floor below which features are not ranked.

A regressor whose held-out R^2 (group K-fold, ``Attributor.fit_``'s ``r2``) is below
``R2_FLOOR`` predicts the held-out pairs' target no better than (or worse than) their mean.
Its SHAP values then rank the features by how it fit run noise, and so do the fits to each
half of the runs: a high rank correlation between the halves (the stability figures,
``_stability``) says only that the same features were used to fit noise. Such a
(target, regressor) is *not informative*: it is warned about, its features are shown as not
informative instead of ranked, and its stability figures are not judged. The importance and
fit tables keep the numbers, with an ``informative`` column.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

R2_FLOOR = 0.01  # held-out R^2 below this (or NaN): the fit explains nothing, nothing ranked
MEANINGLESS = "means nothing: the fit is not informative"  # shown for its stability figures


def informative(r2: float) -> bool:
    """Whether a fit of held-out ``r2`` explains anything: ``r2 >= R2_FLOOR`` (NaN: no).

    Parameters
    ----------
    r2 : float
        The fit's held-out R².

    Returns
    -------
    bool
    """
    r2 = float(r2)
    return bool(np.isfinite(r2) and r2 >= R2_FLOOR)


def informative_column(fit: pd.DataFrame) -> pd.Series:
    """:func:`informative` per row of a fit table.

    Parameters
    ----------
    fit : DataFrame
        The fit table.

    Returns
    -------
    Series of bool
        From each row's ``r2``; True where the table has none.
    """
    if "r2" not in fit.columns:
        return pd.Series(True, index=fit.index)
    return pd.to_numeric(fit.r2, errors="coerce").map(informative).astype(bool)


def not_informative(r2: float) -> str:
    """What is shown instead of the top features of a fit that explains nothing.

    Parameters
    ----------
    r2 : float
        The fit's held-out R^2 (NaN when there is none).

    Returns
    -------
    str
        ``"not informative (held-out R² -0.060 < floor 0.01)"``; for a NaN (or infinite)
        ``r2``, that there is no held-out R² and why there may be none.
    """
    r2 = float(r2)
    if not np.isfinite(r2):
        return "not informative (no held-out R²: too few pairs, groups or features)"
    return f"not informative (held-out R² {r2:.3f} < floor {R2_FLOOR:g})"


def r2_title(target: str, regressor: str, r2: float | None) -> str:
    """A plot panel's title: ``"CM - mlp (held-out R² -0.06, not informative)"``."""
    title = f"{str(target).upper()} - {regressor}"
    if r2 is None:
        return title
    r2 = float(r2)
    shown = f"{r2:.2f}" if np.isfinite(r2) else "n/a"
    return f"{title} (held-out R² {shown}{'' if informative(r2) else ', not informative'})"


def fit_warnings(fit: pd.DataFrame) -> list[str]:
    """One plain warning per (target, regressor) whose fit explains nothing.

    A fit is warned about when its held-out ``r2`` is below ``R2_FLOOR`` or NaN.

    Parameters
    ----------
    fit : DataFrame
        The fit table (``target, regressor, r2`` and, when computed, the stability columns).

    Returns
    -------
    list of str
    """
    if "r2" not in fit.columns:
        return []
    warnings = []
    for _, row in fit.iterrows():
        r2 = float(row["r2"])
        if informative(r2):
            continue
        name = f"the {str(row['target']).upper()} {row['regressor']} fit"
        if np.isfinite(r2):
            text = (f"{name} explains nothing (held-out R² {r2:.3f} < floor {R2_FLOOR:g}): "
                    "its features are not ranked")
        else:
            text = f"{name} has no held-out R² (too few pairs, groups or features)"
        rho = float(row.get("rank_spearman", np.nan))
        if np.isfinite(rho):
            text += (f", and the stability of its ranking (rank correlation {rho:.2f}) "
                     "means nothing")
        warnings.append(text)
    return warnings
