"""``ex-vs-im``: explicit against implicit RMs under token and domain shifts (Razin et
al.), at several seeds (issue 49; ``benchmarks/findings.py ex-vs-im`` runs it)."""

from __future__ import annotations

import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from findings.common import HH, SEEDS, SQUALITY, interval_texts
from findings.verdicts import judged
from rmlens.data import load_pairs


def persona_scores(seed: int, work: Path) -> pd.DataFrame:
    """``rmlens generalize --task persona`` with pretrained SmolLM2-135M-Instruct (LoRA, the
    command's defaults) at one seed, resumed where it stopped: each RM's rewards on every
    split, with each pair's prompt (a statement: the bootstrap's unit)."""
    from rmlens.generalization import GeneralizeConfig, generalize
    from rmlens.generalization._generalize import build_splits

    config = GeneralizeConfig(task="persona")
    config = config.replace(train=config.train.replace(seed=seed))
    out = work / f"persona-seed{seed}"
    if not (out / "scores.parquet").exists():
        generalize(None, config, out=out, quiet=True)
    prompts = pd.concat([frame[["id", "prompt"]].assign(split=name)
                         for name, frame in build_splits(None, config).items()])  # fmt: skip
    scores = pd.read_parquet(out / "scores.parquet")
    return scores.merge(prompts, on=["split", "id"], how="left").assign(seed=seed)


def accuracy(scores: pd.DataFrame) -> float:
    """Pairwise accuracy, a tie counting 1/2."""
    return float(np.mean((scores.r_chosen > scores.r_rejected)
                         + 0.5 * (scores.r_chosen == scores.r_rejected)))  # fmt: skip


def seed_drops(scores: pd.DataFrame, shift: str) -> pd.DataFrame:
    """Per seed and RM, held-out accuracy in distribution minus under ``shift``; and
    ``gap``, IM's drop minus EX's (the difference of differences)."""
    rows = {}
    for seed, s in scores.groupby("seed"):
        row = {rm: accuracy(s[(s.rm == rm) & (s.split == "in_distribution")])
               - accuracy(s[(s.rm == rm) & (s.split == shift)])
               for rm in ("explicit", "implicit")}  # fmt: skip
        rows[seed] = {**row, "gap": row["implicit"] - row["explicit"]}
    return pd.DataFrame.from_dict(rows, orient="index")


def drop_figures(scores: pd.DataFrame, shift: str, label: str) -> list:
    """EX's and IM's accuracy drops under ``shift`` and IM's minus EX's: the mean over
    seeds with its 95% t-interval over seeds (training noise dominates here: one seed's
    gap can take either sign, so an interval over pairs within seeds would be too narrow)."""
    from scipy.stats import t

    per_seed = seed_drops(scores, shift)
    n = len(per_seed)
    half = t.ppf(0.975, n - 1) * per_seed.std(ddof=1) / np.sqrt(n)
    names = {"explicit": "EX-RM", "implicit": "IM-RM", "gap": "IM-RM's drop minus EX-RM's"}
    pairs = int((scores.split == shift).sum() / 2 / n)  # two RMs score each pair, per seed
    return [{"key": f"{shift}:{k}", "label": f"{label}: {names[k]}",
             "value": float(per_seed[k].mean()), "lo": float(per_seed[k].mean() - half[k]),
             "hi": float(per_seed[k].mean() + half[k]), "n": pairs,
             "unit": "held-out accuracy drop", "claimed": None,
             "per_seed": [float(v) for v in per_seed[k]]}
            for k in ("explicit", "implicit", "gap")]  # fmt: skip


def seeds_text(fig: dict) -> str:
    return ", ".join(f"{v:+.3f}" for v in fig["per_seed"])


DOMAIN_HH, DOMAIN_SQUALITY = 300, 150  # HH pairs to train and test on; SQuALITY pairs


def domain_pairs() -> pd.DataFrame:
    """The HH-RLHF harmless pairs (the shortest within 128 SmolLM2 tokens) and the SQuALITY
    pairs of the domain shift, each with its ``domain``."""
    from helpers.pairs import shortest

    columns = ["id", "prompt", "chosen", "rejected"]
    hh = shortest(load_pairs(HH), "smollm2-135m", DOMAIN_HH, 128)[columns]
    squality = load_pairs(SQUALITY).sample(DOMAIN_SQUALITY, random_state=0)[columns]
    return pd.concat([hh.assign(domain="hh-rlhf"), squality.assign(domain="squality")],
                     ignore_index=True)  # fmt: skip


def domain_scores(seed: int, work: Path, pairs: pd.DataFrame) -> pd.DataFrame:
    """``rmlens generalize`` on ``domain_pairs``' HH pairs (80% of their prompts trained on,
    20% held out, and those rewritten by the built-in token shifts) with the SQuALITY pairs
    as the domain shift, at one seed."""
    from rmlens.generalization import GeneralizeConfig, generalize

    config = GeneralizeConfig(domain_col="domain", train_domains="hh-rlhf")
    config = config.replace(train=config.train.replace(seed=seed))
    out = work / f"domain-seed{seed}"
    if not (out / "scores.parquet").exists():
        generalize(pairs, config, out=out, quiet=True)
    return pd.read_parquet(out / "scores.parquet").assign(seed=seed)


def ex_vs_im(work: Path) -> dict:
    scores = pd.concat([persona_scores(seed, work) for seed in SEEDS], ignore_index=True)
    shifts = {"token_shift": "persona, answers in other words (Certainly / Not really)",
              **{f"token_shift:{name}": f"persona, rewritten by {name}"
                 for name in ("synonyms", "casing", "punctuation", "whitespace")
                 if (scores.split == f"token_shift:{name}").any()}}  # fmt: skip
    figures = [f for shift, label in shifts.items() for f in drop_figures(scores, shift, label)]
    pairs = domain_pairs()
    domain = pd.concat([domain_scores(seed, work, pairs) for seed in SEEDS], ignore_index=True)
    hh_shifts = {"domain_shift": "HH-RLHF to SQuALITY (a domain shift)",
                 **{f"token_shift:{name}": f"HH-RLHF rewritten by {name}"
                    for name in ("synonyms", "casing", "punctuation", "whitespace")
                    if (domain.split == f"token_shift:{name}").any()}}  # fmt: skip
    figures += [{**f, "key": f"hh:{f['key']}"} for shift, label in hh_shifts.items()
                for f in drop_figures(domain, shift, label)]  # fmt: skip
    fig = {f["key"]: f for f in figures}
    gap, moved = fig["token_shift:gap"], fig["hh:domain_shift:gap"]
    rewrites = [fig[f"{shift}:gap"] for shift in shifts if shift != "token_shift"]
    shown = [f for f in rewrites if f["lo"] > 0]
    hh_tokens = [fig[f"hh:{shift}:gap"] for shift in hh_shifts if shift != "domain_shift"]
    rows = [[rm, split, *(f"{accuracy(s[(s.rm == rm) & (s.split == split)]):.3f}"
                          for _, s in scores.groupby("seed"))]
            for rm in ("explicit", "implicit")
            for split in ("train", "in_distribution", *shifts, "token_shift:train_prompts")]
    hh_rows = [[rm, split, *(f"{accuracy(s[(s.rm == rm) & (s.split == split)]):.3f}"
                             for _, s in domain.groupby("seed"))]
               for rm in ("explicit", "implicit")
               for split in ("train", "in_distribution", *hh_shifts)]  # fmt: skip
    f = interval_texts(fig, "+.3f")
    reading = (
        f"With pretrained SmolLM2-135M-Instruct, trained on the persona's answers \"Yes\" / "
        f"\"Sure\" against \"No\" / \"Never\" and tested on held-out statements answered "
        f"\"Certainly\" / \"Absolutely\" against \"Not really\" / \"Nope\", the explicit RM "
        f"loses {f['token_shift:explicit']} of its held-out accuracy and the implicit RM "
        f"{f['token_shift:implicit']}: the implicit RM loses {f['token_shift:gap']} more "
        f"(mean over {len(SEEDS)} seeds, per seed {seeds_text(fig['token_shift:gap'])}; 95% "
        f"t-interval over seeds). "
        + ("So the implicit RM leans more on the answers' exact tokens, as the paper finds. "
           if gap["lo"] > 0 else "Across seeds the interval holds 0: at this size the "
           "answers in other words do not tell the two RMs apart. ")
        + ("Rewrites of the same answers that change their tokens but not their words do: "
           + "; ".join(f"{r['label'].split(':')[0]}, {r['value']:+.3f} [{r['lo']:+.3f}, "
                       f"{r['hi']:+.3f}]" for r in shown)
           + " more lost by the implicit RM. " if shown else "")
        + ("".join(f"Under {r['label'].split(':')[0].removeprefix('persona, rewritten by ')} the "
                   f"implicit RM lost more in every seed ({seeds_text(r)}), but {len(SEEDS)} "
                   f"seeds leave the interval across 0 ({r['lo']:+.3f} to {r['hi']:+.3f}). "
                   for r in rewrites if r not in shown and min(r["per_seed"]) > 0))
        + f"On real pairs, trained on HH-RLHF harmless pairs: moved to SQuALITY's story "
        f"answers, the explicit RM loses {f['hh:domain_shift:explicit']} and the implicit RM "
        f"{f['hh:domain_shift:implicit']}, so the implicit RM loses {f['hh:domain_shift:gap']} "
        f"more (per seed {seeds_text(moved)}): "
        + ("less than the explicit RM, as the paper finds for a domain shift. "
           if moved["hi"] < 0 else "more than the explicit RM, which the paper does not find "
           "under a domain shift. " if moved["lo"] > 0 else "the interval holds 0: not shown "
           "to differ from the explicit RM's, so the paper's finding for a domain shift is "
           "neither reproduced nor refuted. ")
        + "HH's held-out answers rewritten with the same meaning: "
        + "; ".join(f"{r['label'].split(':')[0].removeprefix('HH-RLHF rewritten by ')} "
                    f"{r['value']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}]" for r in hh_tokens)
        + " more lost by the implicit RM. "
        + "Each seed takes about ten minutes on 2 CPU cores per task; more seeds would "
        "narrow the t-intervals."
    )
    return judged({
        "name": "ex-vs-im",
        "title": "Explicit against implicit RMs under token and domain shifts",
        "claim": "An implicit RM (the DPO log-ratio) loses more accuracy than an explicit RM "
        "(a linear head on the same backbone) when held-out answers keep their meaning in "
        "other tokens, and not under a shift of domain.",
        "source": "Razin et al. 2025, Why is your language model a poor implicit reward model?",
        "command": "python benchmarks/findings.py ex-vs-im",
        "data": f"the persona task of rmlens generalize (300 statements, 240 trained on, 60 "
        f"held out, 4 answer pairs each); SmolLM2-135M-Instruct with LoRA, the command's "
        f"defaults (2 epochs, lr 5e-4, beta 0.1 for the implicit RM); and, the same way, the "
        f"{DOMAIN_HH} shortest HH-RLHF harmless pairs (128 tokens; 80% of their prompts "
        f"trained on, 20% held out) with {DOMAIN_SQUALITY} SQuALITY pairs as the domain "
        f"shift; seeds {', '.join(map(str, SEEDS))}; 95% t-intervals over seeds",
        "figures": figures,
        "headline": ["token_shift:gap", "hh:domain_shift:gap"],
        "verdict": None,  # by the written rules: verdicts.judged
        "reading": reading,
        "tables": [{"caption": "Persona: accuracy of each RM on each split, by seed",
                    "columns": ["RM", "split", *(f"seed {s}" for s in SEEDS)],
                    "rows": rows},
                   {"caption": "HH-RLHF, and SQuALITY as the domain shift: accuracy of each "
                    "RM on each split, by seed",
                    "columns": ["RM", "split", *(f"seed {s}" for s in SEEDS)],
                    "rows": hh_rows}],
        "measured": datetime.date.today().isoformat(),
    })
