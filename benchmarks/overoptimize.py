"""`rmlens overoptimize` at P x N candidates x R runs, against what a user would write.

Three timings, each against a baseline run in this process:

1. Scoring. rmlens encodes every unique (prompt, response) once through the embedding
   cache and applies each run's head to the features (one matrix product per run). The
   baseline scores each run's RM on its own (``rm.score``, which encodes all texts again):
   timed for one run and multiplied by R (a full R would take R times the encoding).
2. The estimator. The exact best-of-n expectation (``rmlens.stats.best_of_n``, one sort
   per prompt) against Monte Carlo best-of-n (draw n of the N candidates without
   replacement, keep the proxy's best; ``--draws`` draws per prompt and n), with the Monte
   Carlo curve's largest error against the exact one.
3. End to end: ``overoptimize`` on a cold cache and again on a warm one (what a second
   look costs), with ``--n-boot`` bootstrap draws.

    python benchmarks/overoptimize.py [--audit DIR] [--prompts 200] [--responses 256]
        [--runs 25] [--pairs 2000]

Without ``--audit`` it first audits ``--pairs`` synthetic pairs with ``--runs`` runs
(minilm, the logistic head; not timed). Prints times and ratios. Not part of the tests.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def monte_carlo_best_of_n(proxy, values, ns, draws, rng) -> np.ndarray:
    """Best-of-n by sampling: per prompt and n, ``draws`` subsets of n candidates."""
    n_prompts, n_candidates = proxy.shape
    out = np.empty((n_prompts, len(ns)))
    for k, n in enumerate(ns):
        picks = np.argsort(rng.random((draws, n_prompts, n_candidates)), axis=2)[..., :n]
        rows = np.arange(n_prompts)[None, :, None]
        best = np.take_along_axis(picks, proxy[rows, picks].argmax(axis=2)[..., None], 2)
        out[:, k] = values[rows[..., 0], best[..., 0]].mean(axis=0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--audit", type=Path, help="an audit directory on synthetic pairs")
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--responses", type=int, default=256)
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--draws", type=int, default=200, help="Monte Carlo draws per n")
    parser.add_argument("--n-boot", type=int, default=1000)
    args = parser.parse_args()

    import rmlens
    from rmlens.comparison._bon_curves import default_ns
    from rmlens.comparison._overoptimize import read_pool
    from rmlens.data import CandidatesConfig, generate_candidates, save_pairs
    from rmlens.hub import load_rm
    from rmlens.stats import best_of_n

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ["RMLENS_CACHE"] = str(tmp / "cache")
        audit = args.audit
        if audit is None:
            audit = tmp / "audit"
            pairs = rmlens.synthesize(rmlens.SynthConfig(n_pairs=args.pairs))
            rmlens.audit(pairs, out=audit, runs=args.runs, quiet=True)
        pool = generate_candidates(CandidatesConfig(n_prompts=args.prompts,
                                                    n_responses=args.responses))  # fmt: skip
        path = save_pairs(pool, tmp / "pool.jsonl")
        os.environ["RMLENS_CACHE"] = str(tmp / "cache_pool")  # the pool: a cold cache

        start = time.perf_counter()
        found = rmlens.overoptimize([audit], path, out=tmp / "oo", n_boot=args.n_boot,
                                               quiet=True)  # fmt: skip
        cold = time.perf_counter() - start
        start = time.perf_counter()
        rmlens.overoptimize([audit], path, out=tmp / "oo", n_boot=args.n_boot,
                                       quiet=True)  # fmt: skip
        warm = time.perf_counter() - start
        runs = int(found.runs["run"].nunique())

        rm = load_rm(audit)
        one = rm.members[0]
        one.cache_dir = False  # the baseline: a run's RM scoring on its own, no shared cache
        prompts, responses = list(pool["prompt"]), list(pool["response"])
        start = time.perf_counter()
        one.score(prompts, responses)
        per_run = time.perf_counter() - start

        p = read_pool(path)
        z = np.random.default_rng(0).normal(size=p.shape)
        gold = p.values[p.names.index("gold")]
        ns = default_ns(p.shape[1])
        start = time.perf_counter()
        exact = best_of_n(z, gold, ns)
        t_exact = time.perf_counter() - start
        start = time.perf_counter()
        sampled = monte_carlo_best_of_n(z, gold, ns, args.draws, np.random.default_rng(0))
        t_mc = time.perf_counter() - start
        error = np.abs(sampled.mean(0) - exact.mean(0)).max()

    cells = f"{args.prompts} prompts x {args.responses} candidates"
    print(f"{cells}, {runs} runs; {len(pool):,} candidates, "
          f"{pool[['prompt', 'response']].drop_duplicates().shape[0]:,} unique texts")
    print(f"overoptimize, cold cache (encode + {runs} heads + curves, n_boot {args.n_boot}): "
          f"{cold:7.1f} s")
    print(f"overoptimize, warm cache:                                     {warm:7.1f} s")
    print(f"scoring, one run's RM on its own (rm.score, no cache):       {per_run:7.1f} s; "
          f"x {runs} runs = {per_run * runs:.0f} s; ratio to the cold run "
          f"{per_run * runs / cold:.1f}x")
    print(f"best-of-n over {len(ns)} n: exact {t_exact * 1e3:.1f} ms, Monte Carlo with "
          f"{args.draws} draws {t_mc * 1e3:.0f} ms (ratio {t_mc / t_exact:.0f}x), its largest "
          f"error on the mean curve {error:.4f}")


if __name__ == "__main__":
    main()
