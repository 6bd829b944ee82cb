"""Best-of-n curves of a candidate pool (DESIGN.md section 8): the math, on arrays only.

Every RM's scores of the pool are standardized per RM over the whole pool (z-scores), so
that proxy curves of different RMs share one scale and an ensemble of runs reads them
alike. For each n, the expected value of the best-of-n pick by that RM, exactly from the N
candidates sorted by it (``rmlens.stats.best_of_n``), is averaged over prompts:

    curve(n) = mean over prompts p of E[v(best of n by RM among the N candidates of p)]

for v = the gold reward, the RM's own z-score (the proxy curve), the response's words
and each shortcut's indicator. An audit's row averages its runs' single-RM curves; its
ensembles pick by a combination of the runs' z-scores:

    mean: mean_r z_r    min: min_r z_r    uwo: mean_r z_r - lambda var_r z_r

The oracle picks by gold itself (the ceiling). Intervals resample runs and prompts together
(the ensembles are rebuilt from each draw's runs); the oracle resamples prompts.

The gold's fall is cross-fitted (``rmlens.stats.cross_fitted_fall``): the prompts are split
in two halves once (seeded), each half's peak n is read from the other half's curve, and
the fall is gold there minus gold at the largest n, so that noise alone gives 0 on average.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

from rmlens.stats import (
    best_of_n,
    bootstrap_runs,
    cross_fitted_fall,
    kl_best_of_n,
    percentile_interval,
    run_weights,
    spearman_rows,
)

_trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy 2 renamed it


def default_ns(n_candidates: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to N, and N itself.

    Examples
    --------
    >>> default_ns(6)
    (1, 2, 4, 6)
    """
    ns = [1 << k for k in range(n_candidates.bit_length()) if 1 << k <= n_candidates]
    return tuple(dict.fromkeys([*ns, n_candidates]))


def standardize(scores: np.ndarray) -> np.ndarray:
    """z-scores of each RM's rewards over the whole pool: (R, P, N) -> (R, P, N)."""
    flat = scores.reshape(len(scores), -1)
    scale = flat.std(axis=1)
    scale[scale == 0] = 1.0
    return (scores - flat.mean(axis=1)[:, None, None]) / scale[:, None, None]


def combine_runs(z: np.ndarray, kind: str, weights: np.ndarray | None = None,
                 lam: float = 0.5) -> np.ndarray:  # fmt: skip
    """Combine runs' z-scores (R, P, N) into one score (P, N); ``weights`` (R,): how often
    each run is drawn (a bootstrap draw), all ones by default."""
    w = np.ones(len(z)) if weights is None else np.asarray(weights, dtype=float)
    if kind == "min":
        return z[w > 0].min(axis=0)
    mean = np.tensordot(w, z, axes=1) / w.sum()
    if kind == "mean":
        return mean
    var = np.tensordot(w, (z - mean) ** 2, axes=1) / w.sum()
    return mean - lam * var


@dataclass
class Curves:
    """One RM row of the pool: mean curves over prompts, their bootstrap draws, and the
    proxy-gold Spearman.

    ``values`` names the rows of ``curve`` (K = len(ns)): ``proxy`` first, then the pool's
    values (``gold``, ``words``, shortcut shares). ``draws`` is (n_boot, len(values), K).
    """

    values: tuple[str, ...]
    curve: np.ndarray  # (len(values), K)
    draws: np.ndarray | None  # (n_boot, len(values), K)
    spearman: float
    spearman_draws: np.ndarray | None  # (n_boot,)
    per_run: np.ndarray | None = None  # (R, len(values), K): single-RM rows only
    per_run_spearman: np.ndarray | None = None  # (R,)
    fall: float = float("nan")  # the gold's cross-fitted fall (module docstring)
    fall_draws: np.ndarray | None = None  # (n_boot,)
    per_run_fall: np.ndarray | None = None  # (R,)


class PoolCurves:
    """Curves of every RM on one pool: values (k, P, N) named ``names`` (``gold`` among
    them), the n of best-of-n, and the bootstrap's prompt and run draws."""

    def __init__(self, values: np.ndarray, names: tuple[str, ...], ns, *, n_boot: int,
                 seed: int):  # fmt: skip
        self.values, self.names, self.ns = values, names, tuple(int(n) for n in ns)
        self.kl = kl_best_of_n(self.ns)
        self.gold = values[names.index("gold")]
        self.gold_ranks = rankdata(self.gold, axis=-1)
        self.n_boot = n_boot
        self.rng = np.random.default_rng(seed)
        n_prompts = self.gold.shape[0]
        self.prompt_w = run_weights(bootstrap_runs(n_prompts, n_boot, self.rng), n_prompts)
        # its own generator: the bootstrap's draws stay those of a pool read without it
        split = np.random.default_rng([seed, 1]).permutation(n_prompts) < n_prompts // 2
        self.half = split if n_prompts >= 2 else None
        self.g = 1 + names.index("gold")  # gold's row of a per-prompt result (proxy first)

    def _fall(self, gold: np.ndarray) -> np.ndarray:
        """Per prompt, the cross-fitted fall of gold curves (..., P, K); NaN for one prompt."""
        if self.half is None:
            return np.full(gold.shape[:-1], np.nan)
        return cross_fitted_fall(gold, self.half)

    def _per_prompt(self, score: np.ndarray) -> np.ndarray:
        """(1 + k, P, K): best-of-n by ``score`` (P, N) of the score itself and each value."""
        return best_of_n(score, np.concatenate([score[None], self.values]), self.ns)

    def _mean(self, per_prompt: np.ndarray, prompt_w: np.ndarray) -> np.ndarray:
        return np.tensordot(per_prompt, prompt_w, axes=([1], [0])) / prompt_w.sum()

    def oracle(self) -> Curves:
        """Best-of-n by gold itself: its proxy row is gold's."""
        per = self._per_prompt(self.gold)  # (1 + k, P, K)
        curve = per.mean(axis=1)
        fall = self._fall(per[self.g])
        draws = fall_draws = None
        if self.n_boot:
            norm = self.prompt_w.sum(1)
            draws = np.einsum("vpk,bp->bvk", per, self.prompt_w) / norm[:, None, None]
            fall_draws = self.prompt_w @ fall / norm
        names = ("proxy", *self.names)
        return Curves(names, curve, draws, 1.0, None, fall=float(fall.mean()),
                      fall_draws=fall_draws)  # fmt: skip

    def runs(self, z: np.ndarray) -> Curves:
        """The mean of single-RM curves over runs z (R, P, N)."""
        per = np.stack([self._per_prompt(zr) for zr in z])  # (R, 1 + k, P, K)
        rho = spearman_rows(z, self.gold_ranks, b_ranked=True)  # (R, P): within prompts
        per_run = per.mean(axis=2)
        fall = self._fall(per[:, self.g])  # (R, P)
        names = ("proxy", *self.names)
        draws = rho_draws = fall_draws = None
        if self.n_boot:
            run_w = run_weights(bootstrap_runs(len(z), self.n_boot, self.rng), len(z))
            norm = run_w.sum(1) * self.prompt_w.sum(1)  # (B,)
            by_prompt = np.einsum("rvpk,bp->brvk", per, self.prompt_w)
            draws = np.einsum("brvk,br->bvk", by_prompt, run_w) / norm[:, None, None]
            finite = np.isfinite(rho).astype(float)  # a prompt whose gold is constant: no rho
            rho_draws = (np.einsum("rp,br,bp->b", np.nan_to_num(rho), run_w, self.prompt_w)
                         / np.einsum("rp,br,bp->b", finite, run_w, self.prompt_w))
            fall_draws = np.einsum("rp,br,bp->b", fall, run_w, self.prompt_w) / norm
        return Curves(names, per_run.mean(0), draws, float(np.nanmean(rho)), rho_draws,
                      per_run=per_run, per_run_spearman=np.nanmean(rho, axis=1),
                      fall=float(fall.mean()), fall_draws=fall_draws,
                      per_run_fall=fall.mean(axis=1))  # fmt: skip

    def ensemble(self, z: np.ndarray, kind: str, lam: float) -> Curves:
        """Best-of-n by an ensemble of runs z (R, P, N); each draw rebuilds it from its runs."""
        score = combine_runs(z, kind, lam=lam)
        per = self._per_prompt(score)
        rho = spearman_rows(score, self.gold_ranks, b_ranked=True)
        names = ("proxy", *self.names)
        draws = rho_draws = fall_draws = None
        if self.n_boot:
            run_w = run_weights(bootstrap_runs(len(z), self.n_boot, self.rng), len(z))
            draws = np.empty((self.n_boot, len(names), len(self.ns)))
            rho_draws, fall_draws = np.empty(self.n_boot), np.empty(self.n_boot)
            for b in range(self.n_boot):
                score = combine_runs(z, kind, run_w[b], lam)
                v = self.prompt_w[b]
                drawn = self._per_prompt(score)
                draws[b] = self._mean(drawn, v)
                fall_draws[b] = self._fall(drawn[self.g]) @ v / v.sum()
                r = spearman_rows(score, self.gold_ranks, b_ranked=True)
                rho_draws[b] = np.dot(np.nan_to_num(r), v) / np.dot(np.isfinite(r), v)
        return Curves(names, per.mean(axis=1), draws, float(np.nanmean(rho)), rho_draws,
                      fall=float(self._fall(per[self.g]).mean()),
                      fall_draws=fall_draws)  # fmt: skip


def summarize(curves: Curves, oracle: Curves, kl: np.ndarray, ns, level: float) -> dict:
    """The figures of one RM row: gold at N (where the proxy is highest: its curve only
    rises), the n where gold peaks and its peak, the drop from peak to N (cross-fitted: the
    module docstring), the area between the oracle's and the RM's gold curves over KL, and
    the within-prompt proxy-gold Spearman; each with its interval when there are draws."""
    g = curves.values.index("gold")

    def figures(gold: np.ndarray, top: np.ndarray) -> dict:  # (..., K) each
        return {
            "gold_at_max_n": gold[..., -1],
            "gold_peak": gold.max(-1),
            "oracle_gap_area": _trapezoid(top - gold, kl, axis=-1),
        }

    point = figures(curves.curve[g], oracle.curve[g])
    out = {name: float(value) for name, value in point.items()}
    out["gold_drop"] = curves.fall
    out["peak_n"] = int(ns[int(np.argmax(curves.curve[g]))])
    out["spearman"] = curves.spearman
    if curves.draws is not None:
        top = oracle.draws[:, g] if oracle.draws is not None else oracle.curve[g][None]
        drawn = figures(curves.draws[:, g], top)
        for name, values in drawn.items():
            out[f"{name}_lo"], out[f"{name}_hi"] = percentile_interval(values, level)
        if curves.fall_draws is not None:
            out["gold_drop_lo"], out["gold_drop_hi"] = percentile_interval(curves.fall_draws,
                                                                           level)  # fmt: skip
        if curves.spearman_draws is not None:
            out["spearman_lo"], out["spearman_hi"] = percentile_interval(
                curves.spearman_draws, level)
    for name in curves.values:
        if name not in ("gold", "proxy"):
            out[f"{name}_at_max_n"] = float(curves.curve[curves.values.index(name), -1])
    return out


def run_summaries(curves: Curves, oracle: Curves, kl: np.ndarray, ns) -> list[dict]:
    """The figures of each single run (no intervals): what the audit figures line up with."""
    g = curves.values.index("gold")
    rows = []
    for r, per in enumerate(curves.per_run):
        gold, top = per[g], oracle.curve[g]
        rows.append({"gold_at_max_n": float(gold[-1]), "gold_peak": float(gold.max()),
                     "gold_drop": float(curves.per_run_fall[r]),
                     "oracle_gap_area": float(_trapezoid(top - gold, kl)),
                     "peak_n": int(ns[int(np.argmax(gold))]),
                     "spearman": float(curves.per_run_spearman[r])})  # fmt: skip
    return rows
