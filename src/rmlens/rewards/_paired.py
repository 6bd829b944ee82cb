"""Paired counterfactuals of one frozen-feature run (``FrozenHeadTrainer.fit_score``): what
the trainer hands to ``rmlens.influence``.

The convex head's are Newton steps on its logistic problem (``counterfactuals``), checked
against exact refits on request; an AdamW head's come from its last layer. The objective
sets the logistic problem's offsets and target (``bt_terms``, which the fine-tuned runs'
``influence_scores`` reads too).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from rmlens.influence import counterfactuals, last_layer_counterfactuals, refit
from rmlens.rewards._trainer_base import inside_outside
from rmlens.rewards.objectives import objective_of


def bt_terms(config, margin) -> tuple[np.ndarray | None, float]:
    """The logistic problem's offsets (minus the margin, with ``use_margin``) and target
    (1 - eps for ``label_smoothing``) of a ``HeadConfig`` or ``TrainConfig``."""
    offset = None
    if config.use_margin and margin is not None:
        offset = -np.nan_to_num(np.asarray(margin, dtype=float))
    return offset, objective_of(config).target(config)


def head_influence(rm, f, margin, codes, train_index, val_index):
    """p and p_cf over the damping grid of every usable pair, from the fitted head's last
    layer; ``f`` the prepared features (``chosen``, ``rejected``, ``kept``)."""
    phi_c, u = rm.last_layer(f.chosen)
    phi_r, _ = rm.last_layer(f.rejected)
    inside, outside = inside_outside(len(phi_c), f.kept, train_index, val_index)
    offset, target = bt_terms(rm.config, margin)
    p, p_cf, lambdas = last_layer_counterfactuals(
        phi_c - phi_r, u, codes, inside, outside, offset=offset, target=target
    )
    p[~np.asarray(f.kept, dtype=bool)] = np.nan
    return p, p_cf, lambdas


def convex_paired(rm, f, margin, bias, codes, train_index, val_index, check_exact, seed):
    """p and p_cf of every usable pair (``rmlens.influence.counterfactuals``), and
    the exactness check against ``check_exact`` refits (None without)."""
    inside, outside = inside_outside(len(f.chosen), f.kept, train_index, val_index)
    problem = rm.pair_problem(f.chosen, f.rejected, margin, bias,
                              pair_weights(rm, len(inside), train_index))  # fmt: skip
    keep = f.chosen.shape[1]  # poe: the bias expert's coordinates train, never score
    p = np.full(len(inside), np.nan)
    kept = np.asarray(f.kept, dtype=bool)  # validation pairs too (their quality is shown)
    p[kept] = expit(problem.z[kept, :keep] @ rm.w_[:keep])
    p_cf = counterfactuals(problem, rm.w_, rm.l2_, codes, inside, outside, keep)
    exactness = None
    if check_exact:
        exactness = _check_groups(
            problem, rm, codes, inside, outside, p, p_cf, check_exact, seed, keep
        )
    return p, p_cf, exactness


def pair_weights(rm, n: int, train_index) -> np.ndarray | None:
    """Loss weights c of every pair for the counterfactuals: the training pairs' own
    (``group_dro``'s n q_g / n_g, the audit-guided weights), 1 elsewhere (a pair added with
    its group counts as much as the training pairs' mean weight); None where the objective
    sets them for any pair itself (``weights_of_any_pair``: ``reweight``) or has none."""
    own = getattr(rm, "weight_", None)
    if own is None or rm.objective_.objective.weights_of_any_pair:
        return None
    c = np.ones(n)
    c[np.asarray(train_index, dtype=int)] = own
    return c


def _check_groups(problem, rm, codes, inside, outside, p, p_cf, n, seed, keep) -> dict:
    """Refit the head exactly with ``n`` random groups (of the run's training and held-out
    groups) removed or added; the checked pairs' p, p_cf and p_refit, as lists."""
    eligible = np.unique(codes[inside | outside])
    rng = np.random.default_rng([seed, 11])
    chosen = rng.choice(eligible, size=min(n, len(eligible)), replace=False)
    rows_all, truth = [], []
    for g in np.sort(chosen):
        rows = np.flatnonzero((codes == g) & (inside | outside))
        truth.append(refit(problem, rm.w_, rm.l2_, inside, rows, keep))
        rows_all.append(rows)
    rows = np.concatenate(rows_all)
    return {
        "groups": int(len(chosen)),
        "removed": int(sum(inside[r[0]] for r in rows_all)),
        "p": p[rows].tolist(),
        "p_cf": p_cf[rows].tolist(),
        "p_refit": np.concatenate(truth).tolist(),
    }
