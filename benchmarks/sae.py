"""`rmlens sae` on a realistic synthetic audit: is the planted shortcut found by the data?

Synthetic pairs (``rmlens.synthesize``: a signature phrase opens every response of the
signature model, which wins its pairs; padded, longer responses win others) audited on the
offline ``minilm`` backbone with the audit's defaults (frozen logistic heads, 25 runs), then
``rmlens sae`` on its defaults, ``rmlens attribute --features sae`` on its defaults but for
``--regressors`` (LightGBM only unless told; ``--sae-latents``'s default 64 latents join, so
both regressors take about 6 minutes on 2 cores), and ``rmlens sae`` again (the SAE
reused; the cards now read the SHAP shares). Prints:

- the SAE: FVU on held-out responses (raw and standardized features), dead latents;
- the signature latent (the latent most correlated, Spearman over the responses, with
  ``model=<signature model>``; its top responses must open with the phrase) and the length
  latent (largest |Spearman| with ``len_words``): their correlation, their head-weight rank
  (by |mean weight| over runs) and their rank by mean |SHAP| (LightGBM) for TG, among the
  SAE latents and among all features. The recovery rule: both within the top 10 latents
  for TG;
- times: the audit; ``rmlens sae`` with the audit's embedding cache warm; the same lens
  on a baseline that encodes every response again (no cache), as a lens built outside
  rmlens would, as a ratio; the second ``rmlens sae`` (SAE reused) against the first.

    python benchmarks/sae.py [--pairs 1500] [--users 30] [--runs 25] [--seed 0]
        [--regressors lightgbm] [--out DIR]

Not part of the tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

TOP = 10  # the recovery rule: rank among the SAE latents by mean |SHAP| for TG


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def latent_of(cards: list[dict], feature: str, signed: bool) -> dict:
    """The card whose correlation with ``feature`` is largest (by |rho| unless ``signed``)."""
    def rho(card: dict) -> float:
        for c in card["correlates_all"]:
            if c["feature"] == feature:
                return c["spearman"] if signed else abs(c["spearman"])
        return -1.0

    return max(cards, key=rho)


def with_correlations(cards: list[dict], table) -> list[dict]:
    """Each card with its full correlation row (``correlations.parquet``)."""
    rows = table.set_index("latent")
    for card in cards:
        row = rows.loc[card["latent"]]
        card["correlates_all"] = [{"feature": f, "spearman": float(v)} for f, v in row.items()
                                  if v == v]  # fmt: skip
    return cards


def shap_rank(card: dict, target: str = "tg") -> tuple:
    s = (card.get("shap") or {}).get(target)
    return (s["rank_among_latents"], s["rank"], s["share"]) if s else (None, None, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1500)
    parser.add_argument("--users", type=int, default=30)
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--regressors", default="lightgbm", help="comma-separated")
    parser.add_argument("--out", type=Path, default=None, help="keep the audit here")
    args = parser.parse_args()
    tmp = tempfile.TemporaryDirectory()
    out = args.out or Path(tmp.name) / "audit"
    # the audit's own embedding cache, kept beside a kept audit (a resumed one encodes nothing)
    os.environ["RMLENS_CACHE"] = str(out.parent / f"{out.name}-cache")
    for old in [out / "sae", *out.glob("attribution*")]:  # a lens from an earlier run
        if old.is_dir():
            shutil.rmtree(old)
        elif old.exists():
            old.unlink()

    import numpy as np
    import torch

    import rmlens
    from rmlens.backbones import featurize
    from rmlens.sae import fit_sae, fit_topk
    from rmlens.sae._responses import audit_responses

    synth = rmlens.SynthConfig(n_pairs=args.pairs, n_users=args.users, seed=args.seed)
    pairs = rmlens.synthesize(synth)
    print(f"synthetic pairs: {len(pairs)}, users {args.users}, runs {args.runs}, torch threads "
          f"{torch.get_num_threads()}")
    t_audit, _ = timed(lambda: rmlens.audit(pairs, rmlens.AuditConfig(runs=args.runs,
                                                                      seed=args.seed),
                                            out=out, quiet=True))  # fmt: skip
    print(f"audit (minilm, frozen logistic heads): {t_audit:7.1f} s")

    t_lens, lens = timed(lambda: fit_sae(out, quiet=True))
    r = lens.record
    print(f"rmlens sae (cache warm, {r['n_encoded']} texts encoded): {t_lens:7.1f} s")
    print(f"SAE: {r['settings']['n_latents']} latents, k={r['settings']['k']}, "
          f"{r['n_responses']} responses ({r['n_heldout']} held out), d={r['d']}")
    print(f"FVU on held-out responses: {r['fvu']:.3f} (standardized features "
          f"{r['fvu_standardized']:.3f}); dead latents: {r['dead_latents']}")

    # baseline: the same lens with every response encoded again (no embedding cache)
    resp = audit_responses(out, quiet=True)
    table = rmlens.ExperimentDir(out).read_table("memorization.parquet")
    t_encode, _ = timed(lambda: featurize(resp.backbone, table, cache_dir=False, quiet=True,
                                          format=resp.format))
    s = lens.record["settings"]
    x = (resp.x - resp.x.mean(0)) / np.maximum(resp.x.std(0), 1e-6)
    t_train, _ = timed(lambda: fit_topk(x, n_latents=s["n_latents"], k=s["k"],
                                        epochs=s["epochs"], lr=s["lr"],
                                        batch_size=s["batch_size"], seed=s["seed"]))
    baseline = t_encode + t_train
    print(f"baseline (encode every response again, {t_encode:.1f} s, + the SAE fit, "
          f"{t_train:.1f} s): {baseline:.1f} s; ratio baseline / rmlens sae: "
          f"{baseline / t_lens:.1f}x")

    regressors = tuple(args.regressors.split(","))
    t_attr, attributor = timed(lambda: rmlens.attribute(out, features=("sae",),
                                                        regressors=regressors, quiet=True))
    fit = attributor.fit_
    print(f"rmlens attribute --features sae --regressors {args.regressors}: {t_attr:.1f} s, "
          f"{len(attributor.design_.names)} features (R^2: "
          + ", ".join(f"{t}/{g} {v:.2f}" for t, g, v in zip(fit.target, fit.regressor, fit.r2))
          + ")")
    t_again, lens = timed(lambda: fit_sae(out, quiet=True))
    print(f"rmlens sae again (SAE reused: {lens.record['reused']}): {t_again:7.1f} s; ratio "
          f"first / again: {t_lens / t_again:.1f}x")

    cards = with_correlations(lens.cards, lens.correlations)
    by_weight = sorted(cards, key=lambda c: -abs(c["head_weight"]["mean"] or 0))
    weight_rank = {c["latent"]: i + 1 for i, c in enumerate(by_weight)}
    n_latents = len(cards)
    print(f"\nrecovery (rule: rank <= {TOP} among the SAE latents ({n_latents} active, the "
          f"--sae-latents most varied joined) by mean |SHAP| "
          "of LightGBM for TG)")
    ok = True
    for what, feature, signed in (("signature", f"model={synth.signature_model}", True),
                                  ("length", "len_words", False)):
        card = latent_of(cards, feature, signed)
        rho = next(c["spearman"] for c in card["correlates_all"] if c["feature"] == feature)
        among, rank, share = shap_rank(card)
        share = float("nan") if share is None else share
        opens = sum(t["text"].startswith(synth.signature_phrase) for t in card["top_responses"])
        hit = among is not None and among <= TOP
        ok &= hit
        print(f"  {what:9s} latent {card['name']:8s} rho {rho:+.2f} ({feature}); head-weight "
              f"rank {weight_rank[card['latent']]} (mean {card['head_weight']['mean']:+.3f} "
              f"± {card['head_weight']['std']:.3f}); TG SHAP rank {among} among latents, "
              f"{rank} among all features (share {share:.3f}); top responses opening with "
              f"the phrase: {opens}/{len(card['top_responses'])}  "
              f"{'ok' if hit else 'MISSED'}")
    print(f"recovered: {'yes' if ok else 'no'}")
    tmp.cleanup()


if __name__ == "__main__":
    main()
