"""Training-free debiasing through the SAE lens (`rmlens sae DIR --out DEBIASED_DIR`): does
projecting shortcut latents out of every run's head cut the shortcut's use while held-out
accuracy stays within 1 point of the undebiased RM (SteerRM's goal)?

Synthetic pairs (``rmlens.synthesize``: a signature phrase opens every response of the
signature model, which wins its pairs; padded, longer responses win others; quality decides
half the pairs) audited on the offline ``minilm`` backbone with the audit's defaults (frozen
logistic heads, bt, 25 runs), ``rmlens sae`` on its defaults, then ``rmlens.sae.debias``
with the rule's defaults (``sae_debias``) and with ``min_correlation`` 0.3 (``sae_debias_r03``,
a looser tie). ``rmlens compare`` reads the three side by side, and best-of-n picks from two
candidate pools with a gold reward (shortcuts independent of quality, and anti-correlated
with it). Prints:

- the latents each rule picked, with why and their name cards' correlates;
- per row: held-out accuracy with its interval and its difference from bt (compare's,
  paired over runs); accuracy on the pairs each planted mechanism decided (quality, length,
  model identity: the held-out pairs of each run, mean over runs); |corr(reward margin,
  length difference)| (Pearson over each run's held-out pairs, words of chosen minus
  rejected, mean and std over runs, as ``benchmarks/guided.py``) and its cut against bt;
  compare's Spearman(reward, words) and low-margin accuracy; gold at the largest n of
  best-of-n (mean of single runs) in each pool;
- the goal, checked per row: held-out accuracy within 0.01 of bt, on all held-out pairs and
  on those quality decided, and the shortcut's use cut (model-identity pairs' accuracy
  toward chance, or |corr| with length down).

    python benchmarks/sae_debias.py [--pairs 1500] [--users 30] [--runs 25] [--seed 0]
        [--prompts 100] [--responses 64] [--out DIR]

Not part of the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

GOAL_ACCURACY = 0.01  # held-out accuracy within 1 point of bt
MECHANISMS = ("quality", "length", "model_identity")


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def held_out(audit):
    """Margins (n_pairs, n_runs) and held-out mask of an audit (``load_audit``)."""
    return audit.margins, audit.held_out


def per_run(values: list[float]) -> tuple[float, float]:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else float("nan")


def row_figures(audit, length: np.ndarray) -> dict:
    """Mechanism accuracies and |corr(margin, length difference)| on held-out pairs."""
    from rmlens.stats import pairwise_correct

    d, held = held_out(audit)
    mech = audit.table["mechanism"].astype(str).to_numpy()
    out = {}
    for m in MECHANISMS:
        accs = [pairwise_correct(d[held[:, r] & (mech == m), r]).mean()
                for r in range(d.shape[1]) if (held[:, r] & (mech == m)).any()]  # fmt: skip
        out[m] = per_run(accs)
    corr = [abs(np.corrcoef(d[held[:, r], r], length[held[:, r]])[0, 1])
            for r in range(d.shape[1])]  # fmt: skip
    out["corr"] = per_run(corr)
    return out


def gold_at_n(path: Path) -> dict[str, float]:
    summary = json.loads(path.read_text())["summary"]
    return {r["audit"]: r["gold_at_max_n"] for r in summary if r["kind"] == "runs"}


def cell(value, lo=None, hi=None, signed=False) -> str:
    if value is None or not np.isfinite(value):
        return "-"
    fmt = "{:+.3f}" if signed else "{:.3f}"
    text = fmt.format(value)
    if lo is not None and hi is not None and np.isfinite(lo) and np.isfinite(hi):
        text += f" [{fmt.format(lo)}, {fmt.format(hi)}]"
    return text


def say_latents(name: str, found) -> None:
    print(f"\n{name}: {len(found.latents)} latent(s) suppressed")
    for latent in found.latents:
        card = found.record["cards"].get(f"sae_{latent}", {})
        correlates = ", ".join(f"{c['feature']} {c['spearman']:+.2f}"
                               for c in (card.get("correlates") or [])[:3])  # fmt: skip
        print(f"  sae_{latent}: {found.record['why'].get(str(latent), 'named')}")
        print(f"    card correlates: {correlates}; top response: "
              f"{card.get('top_response', '')[:70]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1500)
    parser.add_argument("--users", type=int, default=30)
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--responses", type=int, default=64)
    parser.add_argument("--out", type=Path, default=None, help="keep everything here")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # the audit's and compare's warnings: figures below
    tmp = tempfile.TemporaryDirectory()
    root = args.out or Path(tmp.name)
    os.environ.setdefault("RMLENS_CACHE", str(root / "cache"))

    import rmlens
    from rmlens.comparison import compare, load_audit, overoptimize
    from rmlens.data import CandidatesConfig, generate_candidates, save_pairs
    from rmlens.data._schema import word_counts
    from rmlens.memorization import AuditConfig, audit
    from rmlens.sae import debias, fit_sae

    pairs = rmlens.synthesize(rmlens.SynthConfig(n_pairs=args.pairs, n_users=args.users,
                                                 seed=args.seed))  # fmt: skip
    bt = root / "bt"
    reused = (bt / "summary.json").is_file()
    t_audit, _ = timed(lambda: audit(pairs, AuditConfig(runs=args.runs, seed=args.seed),
                                     out=bt, quiet=True))  # fmt: skip
    t_sae, lens = timed(lambda: fit_sae(bt, quiet=True))
    rows = {"sae_debias": {}, "sae_debias_r03": {"min_correlation": 0.3}}
    found, t_debias = {}, {}
    for name, settings in rows.items():
        t_debias[name], found[name] = timed(
            lambda n=name, s=settings: debias(bt, out=root / n, quiet=True, **s))
    print(f"## {len(pairs)} synthetic pairs, {args.users} users, {args.runs} runs (minilm, "
          f"logistic heads, bt)")
    ratio = "" if reused else f" ({t_debias['sae_debias'] / t_audit:.1%} of the audit's time)"
    print(f"audit {'reused from --out' if reused else f'{t_audit:.0f} s'}; rmlens sae "
          f"{t_sae:.0f} s (FVU {lens.record['fvu']:.3f}, {lens.record['dead_latents']} dead "
          f"of {lens.sae.n_latents}); debias "
          + ", ".join(f"{n} {t:.1f} s" for n, t in t_debias.items()) + ratio)
    for name in rows:
        say_latents(name, found[name])

    labels = ("bt", *rows)
    t_compare, _ = timed(lambda: compare([root / n for n in labels], out=root / "compare",
                                         labels=labels, probes=False, shap=False,
                                         quiet=True))  # fmt: skip
    figures = pd.read_parquet(root / "compare" / "compare.parquet")
    fig = {(r.audit, r.metric): (r.value, r.lo, r.hi) for r in figures.itertuples()}
    golds = {}
    for policy in ("independent", "anticorrelated"):
        pool = generate_candidates(CandidatesConfig(n_prompts=args.prompts,
                                                    n_responses=args.responses, policy=policy))
        path = save_pairs(pool, root / f"pool-{policy}.jsonl")
        target = root / f"bon-{policy}"
        overoptimize([root / n for n in labels], path, out=target, labels=labels, quiet=True)
        golds[policy] = gold_at_n(target / "overoptimization.json")
    print(f"\ncompare (no probes, no SHAP) {t_compare:.0f} s; best-of-n pools of "
          f"{args.prompts} prompts x {args.responses} candidates")

    table, figs = [], {}
    for name in labels:
        a = load_audit(root / name, name)
        length = word_counts(a.table.chosen) - word_counts(a.table.rejected)
        figs[name] = row_figures(a, length)
    base = figs["bt"]
    goal = {}
    for name in labels:
        f = figs[name]
        cut = 1 - f["corr"][0] / base["corr"][0]
        row = {"row": name,
               "held-out acc": cell(*fig[(name, "heldout_accuracy")]),
               "vs bt": cell(*fig.get((name, "heldout_accuracy_vs_baseline"), (np.nan,) * 3),
                             signed=True),
               **{f"acc {m}": f"{f[m][0]:.3f}" for m in MECHANISMS},
               "|corr| len": f"{f['corr'][0]:.3f} ± {f['corr'][1]:.3f}",
               "cut": f"{cut:+.0%}",
               "Spearman(r, words)": cell(fig[(name, "reward_length_spearman")][0]),
               "low-margin acc": cell(fig.get((name, "slice_low_margin"), (np.nan,))[0])}
        for policy, g in golds.items():
            row[f"gold@N {policy}"] = cell(g.get(name, np.nan))
        table.append(row)
        d_all = fig[(name, "heldout_accuracy")][0] - fig[("bt", "heldout_accuracy")][0]
        d_quality = f["quality"][0] - base["quality"][0]
        goal[name] = {
            "held-out accuracy within 0.01": d_all >= -GOAL_ACCURACY,
            "quality pairs' accuracy within 0.01": d_quality >= -GOAL_ACCURACY,
            "model-identity shortcut cut (its pairs' accuracy down 0.1+)":
                f["model_identity"][0] <= base["model_identity"][0] - 0.1,
            "length shortcut cut (|corr| down 10%+)": cut >= 0.10,
        }  # fmt: skip
    print(pd.DataFrame(table).to_string(index=False))
    print("\nthe goal (cut the shortcut's use, held-out accuracy within 0.01 of bt):")
    for name in rows:
        print(f"  {name}: " + "; ".join(f"{k}: {'yes' if v else 'no'}"
                                       for k, v in goal[name].items()))  # fmt: skip
    print("  (on this data a share of the held-out labels was decided by the shortcuts "
          "themselves, so removing a shortcut costs accuracy on those pairs by design; the "
          "quality pairs' accuracy is the figure SteerRM's goal is about)")


if __name__ == "__main__":
    main()
