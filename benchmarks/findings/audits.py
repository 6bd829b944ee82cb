"""``memorization-modes`` and ``memorization-trust``: how far a frozen, a paired and a
one-checkpoint audit agree with each other and with brute-force retraining of a fine-tuned
RM (issue 49; ``benchmarks/findings.py`` runs them)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import numpy as np
import pandas as pd

from findings.common import (
    RUNS,
    SQUALITY,
    figure,
    frozen_audit,
    held_out_accuracy,
    interval_texts,
    memorized,
)
from findings.verdicts import judged
from rmlens.data import load_pairs
from rmlens.memorization import AuditConfig, audit, cm_links
from rmlens.stats import group_draws, percentile_interval, spearman


def finetuned_audit(pairs: pd.DataFrame, group_by: str, out: Path) -> pd.DataFrame:
    """The 5-run paired audit of ``finetune_paired.py``'s LoRA MiniLM (Gauss-Newton through
    the adapters and head), at 256 tokens; resumed where it stopped."""
    from finetune_paired import LORA, PAIRED_RUNS

    config = AuditConfig(model="minilm", max_length=256, mode="finetune", train=LORA,
                         runs=PAIRED_RUNS, estimator="paired", group_by=group_by, n_boot=0)
    audit(pairs, config, out=out, quiet=True)
    return pd.read_parquet(out / "memorization.parquet")


def reliability(out: Path) -> float:
    """CM's split-half reliability (Spearman-Brown), as the audit's summary gives it."""
    summary = json.loads((out / "summary.json").read_text())
    return float(summary["reliability"]["cm"]["spearman_brown"])


def agreement(a: pd.DataFrame, b: pd.DataFrame, n_boot: int = 1000) -> dict:
    """CM's Spearman between two audits of the same pairs (``a``'s groups the bootstrap's
    units), and the share of each one's top tenth by CM that the other's top tenth holds."""
    b = b.set_index("id").loc[a.id]
    x, y = a.cm.to_numpy(float), b.cm.to_numpy(float)
    draws = group_draws(a.group.to_numpy(), n_boot, 0)
    k = len(x) // 10

    def top_overlap(i: np.ndarray) -> float:
        m = len(i) // 10
        top_x, top_y = set(np.argsort(-x[i])[:m]), set(np.argsort(-y[i])[:m])
        return len(top_x & top_y) / m

    lo, hi = percentile_interval([spearman(x[i], y[i]) for i in draws])
    olo, ohi = percentile_interval([top_overlap(i) for i in draws])
    return {"spearman": spearman(x, y), "lo": lo, "hi": hi, "n_pairs": len(x),
            "overlap": top_overlap(np.arange(len(x))), "overlap_lo": olo, "overlap_hi": ohi,
            "top": k}  # fmt: skip


def memorization_modes(work: Path) -> dict:
    squality = load_pairs(SQUALITY)
    squality["question"] = squality.passage_id.astype(str) + ": " + squality.prompt
    frozen = frozen_audit(squality, "question", work / "squality-by-question")
    tuned = finetuned_audit(squality, "question", work / "squality-lora-paired")
    both = agreement(frozen, tuned)
    rel = {"frozen": reliability(work / "squality-by-question"),
           "tuned": reliability(work / "squality-lora-paired")}
    ceiling = float(np.sqrt(rel["frozen"] * rel["tuned"]))
    links = {"frozen": cm_links(frozen), "tuned": cm_links(tuned)}
    chance = both["top"] / both["n_pairs"]
    figures = [
        {"key": "cm", "label": "CM of the frozen and the fine-tuned audit, across pairs",
         "value": both["spearman"], "lo": both["lo"], "hi": both["hi"],
         "n": both["n_pairs"], "unit": "Spearman", "claimed": None},
        {"key": "top", "label": f"share of one mode's top tenth by CM ({both['top']} pairs) "
         f"in the other's (chance {chance:.2f})", "value": both["overlap"],
         "lo": both["overlap_lo"], "hi": both["overlap_hi"], "n": both["n_pairs"],
         "unit": "share", "claimed": None},
        figure("frozen_margin", "frozen audit: CM with the margin", links["frozen"]["margin"]),
        figure("tuned_margin", "fine-tuned audit: CM with the margin", links["tuned"]["margin"]),
    ]  # fmt: skip
    fig = {f["key"]: f for f in figures}
    f = interval_texts(fig, ".2f")
    share = fig["cm"]["value"] / ceiling
    margins = fig["frozen_margin"], fig["tuned_margin"]
    margin_alike = margins[0]["lo"] <= margins[1]["hi"] and margins[1]["lo"] <= margins[0]["hi"]
    how_far = ("in large part" if share >= 0.8 else "in part" if fig["cm"]["lo"] > 0
               else "not at all")  # fmt: skip
    reading = (
        f"On the same {both['n_pairs']} SQuALITY pairs, grouped by question, a frozen audit "
        f"(MiniLM features, a logistic head per run, 50 brute-force runs) and a fine-tuned one "
        f"(LoRA MiniLM, 5 paired Gauss-Newton runs) rank pairs by CM at Spearman {f['cm']}, "
        f"against a ceiling of {ceiling:.2f} that their own reliabilities allow "
        f"({rel['frozen']:.2f} and {rel['tuned']:.2f}): {share:.2f} of "
        f"it. Of one audit's {both['top']} most memorized pairs, {f['top']} are among the "
        f"other's (chance {chance:.2f}). CM's link with the margin is {f['frozen_margin']} "
        f"frozen and {f['tuned_margin']} fine-tuned. "
        + f"So a frozen audit speaks for the fine-tuned RM's memorization {how_far}"
        + ("." if margin_alike else ", and not for how its CM follows the margin.")
    )
    return judged({
        "name": "memorization-modes",
        "title": "Frozen and fine-tuned audits of the same pairs",
        "claim": "What a frozen audit (a head on fixed features, as the memorization paper "
        "measured) finds memorized is what a fine-tuned RM memorizes: the two rank pairs "
        "alike, share their most memorized pairs, and follow the margin alike.",
        "source": "Verhoeven et al. (frozen heads); the question asked of rmlens in issue 49",
        "command": "python benchmarks/findings.py memorization-modes",
        "data": f"SQuALITY human-evaluation pairs ({len(squality)}), grouped by question "
        f"(100); frozen MiniLM, {RUNS} brute-force runs; LoRA MiniLM (rank 8, lr 3e-4, at most "
        f"4 epochs with patience 1, 256 tokens), 5 paired Gauss-Newton runs; 95% bootstrap "
        f"over questions",
        "figures": figures,
        "headline": ["cm", "top"],
        "verdict": None,  # by the written rules: verdicts.judged
        "reading": reading,
        "tables": [{"caption": "Each audit",
                    "columns": ["audit", "CM reliability", "mean CM", "memorized",
                                "held-out accuracy"],
                    "rows": [[name, f"{rel[key]:.3f}", f"{table.cm.mean():.3f}",
                              f"{memorized(table):.0%}",
                              f"{held_out_accuracy(work / folder)['mean']:.3f}"]
                             for name, key, table, folder in (
                                 ("frozen", "frozen", frozen, "squality-by-question"),
                                 ("fine-tuned", "tuned", tuned, "squality-lora-paired"))]}],
        "measured": datetime.date.today().isoformat(),
    })  # fmt: skip


TRUST = "minilm-hh-1000"  # finetune_paired.py's setting: the 1,000 shortest HH pairs
TRUST_REFERENCE_RUNS = 25
CHECKPOINT_FROZEN = 0.095  # one-checkpoint (LoRA SmolLM2) against frozen, 200 OASST pairs
TRUST_WORDS = ((0.7, "closely"), (0.4, "roughly"), (0.2, "loosely"), (-1.0, "hardly"))


def how_far(rho: float) -> str:
    """A Spearman with brute-force retraining in one word."""
    return next(word for floor, word in TRUST_WORDS if rho >= floor)


def trust_sentence(fig: dict, rel_ref: float) -> str:
    """How far to trust each audit's CM, in one plain sentence, from the figures."""
    rho = {k: fig[f"reference:{k}"]["value"] for k in ("paired", "checkpoint", "frozen")}
    words = {how_far(rho["paired"]), how_far(rho["checkpoint"])}
    return (
        f"CM from a paired audit ({rho['paired']:.2f}) or a one-checkpoint audit "
        f"({rho['checkpoint']:.2f}) orders pairs "
        + (words.pop() if len(words) == 1 else
           f"{how_far(rho['paired'])} and {how_far(rho['checkpoint'])} respectively")
        + f" as retraining the fine-tuned RM does, and a frozen audit's ({rho['frozen']:.2f}) "
        f"{how_far(rho['frozen'])}"
        + ("; read each as a ranking of many pairs, not as one pair's verdict"
           if max(rho.values()) < 0.7 else "")
        + f" (the retrainings' own CM has a split-half reliability of {rel_ref:.2f}, which "
        "caps any agreement with it)."
    )


def cm_table(cm: np.ndarray, ids: pd.Index, groups: pd.Series) -> pd.DataFrame:
    return pd.DataFrame({"id": ids, "cm": cm, "group": groups.loc[ids].to_numpy()})


def ceiling_share(m, ref, folds: int, n_boot: int = 400) -> dict:
    """CM's Spearman with the reference over the ceiling sqrt(rel rel_ref) that both audits'
    reliabilities allow, with a 95% bootstrap over pairs that recomputes all three."""
    from finetune_paired import rows_of, share

    rows = m.ids.get_indexer(ref.ids)
    m, ref = rows_of(m, rows), rows_of(ref, np.arange(len(ref.ids)))
    draws = group_draws(np.arange(len(ref.ids)), n_boot, 0)
    lo, hi = percentile_interval([share(rows_of(m, i), rows_of(ref, i), folds) for i in draws])
    return {"spearman": share(m, ref, folds), "lo": lo, "hi": hi, "n_pairs": len(ref.ids)}


def trust_audits(work: Path) -> dict:
    """The brute-force reference, the 5-run paired audit, the one-checkpoint audit and the
    frozen audit of ``TRUST``'s pairs, each resumed where it stopped: their folders."""
    from finetune_paired import PAIRED_RUNS, SETTINGS, checkpoint_rm, config_of, pairs_of

    from rmlens.memorization import audit_rm

    setting = SETTINGS[TRUST]
    pairs, config = pairs_of(setting), config_of(setting)
    folder = work / "trust"
    out = {"reference": folder / f"{TRUST}-ref", "paired": folder / f"{TRUST}-paired",
           "checkpoint": folder / f"{TRUST}-checkpoint", "frozen": folder / f"{TRUST}-frozen"}
    audit(pairs, config.replace(runs=TRUST_REFERENCE_RUNS, seed=1, estimator="brute"),
          out=out["reference"], quiet=True)  # fmt: skip
    audit(pairs, config.replace(runs=PAIRED_RUNS, seed=0, estimator="paired"), out=out["paired"],
          quiet=True)  # fmt: skip
    rm = checkpoint_rm(setting, pairs, folder / f"{TRUST}-checkpoint-rm")
    audit_rm(pairs, rm, out=out["checkpoint"], quiet=True)
    frozen_audit(pairs, config.group_by, out["frozen"], max_length=128)
    return out


def memorization_trust(work: Path) -> dict:
    from finetune_paired import brute_of
    from helpers.cm import cm_from, reliability_at

    from rmlens.memorization._run_folders import load_matrices

    out = trust_audits(work)
    ref = load_matrices(out["reference"])
    folds = json.loads((out["reference"] / "config.json").read_text())["folds_used"]
    table = pd.read_parquet(out["reference"] / "memorization.parquet").set_index("id")
    groups = table.group
    ref_table = cm_table(cm_from(ref, np.arange(len(ref.runs))), ref.ids, groups)
    paired = load_matrices(out["paired"])
    frozen = load_matrices(out["frozen"])
    checkpoint = pd.read_parquet(out["checkpoint"] / "memorization.parquet")
    audits = {
        "paired": ("5-run paired audit (Gauss-Newton)",
                   cm_table(cm_from(paired, np.arange(len(paired.runs))), paired.ids, groups)),
        "brute5": ("5 brute-force runs (the paired audit's own runs)",
                   cm_table(cm_from(brute_of(paired), np.arange(len(paired.runs))),
                            paired.ids, groups)),
        "checkpoint": ("one-checkpoint audit (one training of every pair)",
                       checkpoint[["id", "cm"]].assign(group=groups.loc[checkpoint.id].to_numpy())),
        "frozen": ("frozen audit (MiniLM features, 50 runs)",
                   cm_table(cm_from(frozen, np.arange(len(frozen.runs))), frozen.ids, groups)),
    }  # fmt: skip
    audits = {key: (label, t[np.isfinite(t.cm)]) for key, (label, t) in audits.items()}
    links = {key: agreement(ref_table[ref_table.id.isin(t.id)], t)
             for key, (_, t) in audits.items()}  # fmt: skip
    figures = [figure(f"reference:{key}", f"{label}, with brute-force retraining", links[key])
               for key, (label, _) in audits.items()]  # fmt: skip
    shares = {"paired": ceiling_share(paired, ref, folds),
              "frozen": ceiling_share(frozen, ref, folds)}
    figures += [{**figure(f"share:{key}", f"{audits[key][0]}: share of the ceiling",
                          shares[key]), "unit": "share of the ceiling"}
                for key in shares]  # fmt: skip
    direct = agreement(audits["checkpoint"][1], audits["frozen"][1])
    figures.append(figure("checkpoint:frozen", "one-checkpoint audit with the frozen audit",
                          direct, claimed=CHECKPOINT_FROZEN))  # fmt: skip
    fig = {f["key"]: f for f in figures}
    f = interval_texts(fig, ".2f")
    rel_ref = reliability_at(ref, len(ref.runs) // folds * folds, folds)
    held = held_out_accuracy(out["reference"])
    reading = (
        f"Against {len(ref.runs)} brute-force retrainings of the same LoRA MiniLM RM (whose "
        f"CM is itself noisy: split-half reliability {rel_ref:.2f}; its RMs reach held-out "
        f"accuracy {held['mean']:.3f}), CM per pair agrees at Spearman "
        f"{f['reference:paired']} for the 5-run paired audit "
        f"({f['share:paired']} of what the two audits' own noise allows), "
        f"{f['reference:checkpoint']} for the one-checkpoint audit, "
        f"{f['reference:brute5']} for 5 brute-force runs, and {f['reference:frozen']} for "
        f"the frozen audit of the same pairs ({f['share:frozen']} of its ceiling). The "
        f"one-checkpoint and frozen audits agree with each other at {f['checkpoint:frozen']} "
        f"(the trial on 200 OASST pairs: {CHECKPOINT_FROZEN}). In one sentence: "
        + trust_sentence(fig, rel_ref))
    return judged({
        "name": "memorization-trust",
        "title": "How far each audit's CM agrees with brute-force retraining",
        "claim": "The paired, one-checkpoint and frozen audits rank pairs by CM as "
        "brute-force retraining of the fine-tuned RM does.",
        "source": "rmlens (issue 49: a new user's one-checkpoint and frozen audits of 200 "
        "OASST pairs agreed at Spearman 0.095)",
        "command": "python benchmarks/findings.py memorization-trust",
        "data": f"the {len(ref.ids):,} shortest HH-RLHF harmless pairs (128 tokens, grouped "
        f"by prompt); LoRA MiniLM (benchmarks/finetune_paired.py's {TRUST}): "
        f"{len(ref.runs)} brute-force runs (plan seed 1) as the reference, the 5-run paired "
        "audit (plan seed 0), the one-checkpoint audit of an RM trained once on every pair, "
        "and a frozen MiniLM audit (50 runs); 95% bootstraps over prompts",
        "figures": figures,
        "headline": ["reference:checkpoint", "reference:frozen"],
        "verdict": None,  # by the written rules: verdicts.judged
        "reading": reading,
        "tables": [],
        "measured": datetime.date.today().isoformat(),
    })
