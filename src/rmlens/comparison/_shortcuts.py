"""How much the RMs lean on shortcuts: SHAP share of shortcut features, probe flip rates.

SHAP share. ``rmlens.attribution.Attributor`` regresses TG and CM on the pair features of
the audit's memorization table (LightGBM, held-out R^2 by group K-fold, TreeSHAP); the
share of a target's mean |SHAP| that falls on shortcut features is

    share = sum over shortcut features f of I_f / sum over all features f of I_f

with I_f the mean |SHAP| of feature f. Shortcut features: response and prompt lengths
(``len_*``), compliance (``compliance_*``), refusal (``refusal_*``) and model identity
(``chosen_model``, ``rejected_model``). The regressors are fitted once per audit, so the
share has no interval over runs; read it beside the fit's R^2 (near 0: the features explain
little of the target and the share describes noise).

Probe flip rate. Each run's RM (``rmlens.hub.load_rm(audit_dir)``: the experiment as an
ensemble of its runs) scores a sample of pairs before and after each shortcut probe of
``rmlens.evaluation`` edits one response (the chosen, then the rejected); per run, on the
sampled pairs it held out,

    flip_r = share of (pair, side) edits that change the sign of r+ - r- (probe changed text)

and the figure is the mean over runs, with a bootstrap over runs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rmlens.attribution import AttributeConfig, Attributor
from rmlens.stats import run_mean

SHORTCUT_PREFIXES = ("len_", "compliance_", "refusal_")
SHORTCUT_COLUMNS = ("chosen_model", "rejected_model")
SHAP_TARGETS = ("tg", "cm")
REGRESSOR = "lightgbm"


def is_shortcut(feature: str) -> bool:
    """Whether an attribution feature is a shortcut (module docstring)."""
    return feature.startswith(SHORTCUT_PREFIXES) or feature in SHORTCUT_COLUMNS


def shortcut_share(importance: pd.DataFrame) -> float:
    """Share of the total importance on shortcut features, from ``feature, importance`` rows
    of one target and regressor; NaN when the total is 0."""
    total = float(importance["importance"].sum())
    if not total > 0:
        return float("nan")
    mask = importance["feature"].map(is_shortcut).to_numpy(bool)
    return float(importance["importance"].to_numpy(float)[mask].sum() / total)


def shap_shares(table: pd.DataFrame, group_by: str | None, seed: int) -> list[dict]:
    """Per target (TG, CM): the shortcut share, the fit's held-out R^2, pairs, and the
    shortcut features ranked by importance (at most 5)."""
    config = AttributeConfig(targets=SHAP_TARGETS, regressors=(REGRESSOR,), tokenizer=None,
                             seed=seed, plots=False)  # fmt: skip
    fitted = Attributor(config=config).fit(table, group_by=group_by, quiet=True)
    out = []
    for target in SHAP_TARGETS:
        imp = fitted.importance_
        imp = imp[(imp.target == target) & (imp.regressor == REGRESSOR)]
        fit = fitted.fit_[(fitted.fit_.target == target) & (fitted.fit_.regressor == REGRESSOR)]
        short = imp[imp.feature.map(is_shortcut)].sort_values("importance", ascending=False)
        out.append({
            "target": target,
            "share": shortcut_share(imp),
            "r2": float(fit.r2.iloc[0]) if len(fit) else float("nan"),
            "n": int(fit.n_pairs.iloc[0]) if len(fit) else 0,
            "top": short.feature.head(5).tolist(),
        })  # fmt: skip
    return out


def probe_sample(ids: pd.Index, n: int, seed: int) -> np.ndarray:
    """A seeded sample of ``n`` of the ``ids`` (all when n is 0 or more than there are), in
    the ids' order."""
    if not n or n >= len(ids):
        return np.asarray(ids)
    rows = np.sort(np.random.default_rng([seed, 11]).choice(len(ids), n, replace=False))
    return np.asarray(ids)[rows]


def probe_flips(audit, sample_ids, draws, *, device: str = "auto", quiet: bool = True) -> dict:
    """Flip rate of every registered probe on the sampled pairs each run held out.

    Returns ``{probe: (value, draws (n_boot,), n)}`` with ``n`` the sampled pairs held out
    by at least one run whose text the probe changed. Runs are matched to the ensemble's
    members by name (``runs/<run>``).
    """
    # lazy: torch, transformers, scipy load only when this runs
    from rmlens.evaluation import PROBES
    from rmlens.hub import load_rm, member_scores

    rm = load_rm(audit.path, device=device)
    names = [int(n) for n in getattr(rm, "names", [])]
    column = {run: j for j, run in enumerate(audit.runs)}
    keep = [m for m, n in enumerate(names) if n in column]  # members with finished runs
    rows = audit.ids.get_indexer(pd.Index(sample_ids))
    pairs = audit.table.iloc[rows].reset_index(drop=True)
    held = audit.held_out[rows][:, [column[names[m]] for m in keep]]  # (n, n_members)
    before_c = member_scores(rm, pairs.prompt, pairs.chosen, quiet=quiet)[keep]  # (M, n)
    before_r = member_scores(rm, pairs.prompt, pairs.rejected, quiet=quiet)[keep]
    d = (before_c - before_r).T  # (n, M)
    out = {}
    for name, probe in PROBES.items():
        flips = np.zeros(held.shape)
        edits = np.zeros(held.shape)
        touched = np.zeros(len(pairs), dtype=bool)
        for side in ("chosen", "rejected"):
            edited = [probe.apply(x) for x in pairs[side]]
            changed = np.array([e != o for e, o in zip(edited, pairs[side])], dtype=bool)
            if not changed.any():
                continue
            idx = np.flatnonzero(changed)
            new = member_scores(rm, [pairs.prompt[i] for i in idx], [edited[i] for i in idx],
                                quiet=quiet)[keep].T  # (k, M)
            old = (before_c if side == "chosen" else before_r)[:, idx].T
            after = d[idx] + (new - old) * (1 if side == "chosen" else -1)
            cells = held[idx]
            flips[idx] += cells * (np.sign(after) != np.sign(d[idx]))
            edits[idx] += cells
            touched[idx] = True
        with np.errstate(invalid="ignore", divide="ignore"):
            per_member = flips.sum(0) / edits.sum(0)  # (M,)
        per_run = np.full(len(audit.runs), np.nan)
        per_run[[column[names[m]] for m in keep]] = per_member
        value, boot = run_mean(per_run, draws)
        out[name] = (value, boot, int((touched & held.any(1)).sum()))
    return out
