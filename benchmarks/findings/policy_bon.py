"""Best-of-n overoptimization on a policy's own samples, and whether the audit foresees it
(Gao et al. 2023's synthetic-gold protocol; Coste et al. 2024's ensembles; issue 59).

- the gold, standing for the human judge: a LoRA SmolLM2-135M-Instruct RM trained on the
  HH-RLHF harmless pairs (human labels), a tenth of the prompts held out to measure it;
- the policy: SmolLM2-135M-Instruct at temperature 1, ``MAX_NEW_TOKENS`` new tokens, on the
  HH prompts whose chat text is at most ``MAX_PROMPT`` tokens (``rmlens data candidates
  --policy-model``): ``N_RESPONSES`` samples to each of ``POOL_PROMPTS`` held-out prompts
  (the pool), two to each other prompt, their pair labelled by the gold;
- the proxies: frozen MiniLM heads trained on ``SIZES`` of those labelled pairs at three
  seeds, each a brute-force audit of ``RUNS`` runs (``rmlens memorize``), so that every
  proxy is a run whose training pairs the audit has measured; ensembles of each audit's runs
  (mean, min, uncertainty-weighted: mean - 0.5 var of the runs' z-scores);
- best-of-n by each proxy (``rmlens overoptimize``), the gold in standard deviations of the
  pool's gold, against KL_bon = log n - (n - 1) / n.

A peak read from the curve it is measured on favours a fall (noise alone puts the maximum
above the last point), so the fall is cross-fitted (``rmlens.stats.cross_fitted_fall``, as
``rmlens overoptimize``'s ``gold_drop``): the prompts are split in two halves, each half's
peak n is read from the other half's curve, and the fall is the gold at that n minus the
gold at n = N, averaged over prompts (0 where the curve only rises). Intervals resample
prompts and runs (prompts and seeds for ensembles).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from findings.common import fig, memorized
from findings.verdicts import judged
from rmlens.data import load_candidates, load_pairs, to_text
from rmlens.memorization import AuditConfig, audit
from rmlens.stats import (
    best_of_n,
    cross_fitted_fall,
    kl_best_of_n,
    percentile_interval,
    spearman,
)

POLICY = GOLD = "smollm2-135m"
POOL_PROMPTS, N_RESPONSES, MAX_NEW_TOKENS = 200, 64, 48
MAX_PROMPT = 160  # tokens of the policy's chat text; longer HH prompts are left out
GOLD_HELD_OUT, GOLD_EPOCHS, GOLD_LENGTH = 0.1, 2, 256
GOLD_PRECISION = "bf16"  # the gold is a fixed function: its precision only has to be one
SIZES, SEEDS, RUNS = (300, 1200), (0, 1, 2), 20
FOLDS = AuditConfig().folds  # each proxy run trains on FOLDS - 1 of the folds
ENSEMBLES, UWO = ("mean", "min", "uwo"), 0.5
NS = (1, 2, 4, 8, 16, 32, 64)
CHUNK = 25  # prompts per saved part of the samples (a restart resumes there)
N_BOOT = 1000
COMMAND = "python benchmarks/findings.py overoptimization-policy"
SOURCE = ("Gao et al. 2023, Scaling Laws for Reward Model Overoptimization; Coste et al. "
          "2024, Reward Model Ensembles Help Mitigate Overoptimization")  # fmt: skip


def policy_prompts(hh: Path) -> list[str]:
    """The HH prompts (distinct transcripts) whose chat text the policy reads in at most
    ``MAX_PROMPT`` tokens, in file order."""
    from transformers import AutoTokenizer

    from rmlens.backbones import prompt_text, resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(POLICY)[0])
    distinct = list(dict.fromkeys(load_pairs(hh).prompt.map(to_text)))
    lengths = [len(tokenizer(prompt_text(tokenizer, p), add_special_tokens=False).input_ids)
               for p in distinct]  # fmt: skip
    return [p for p, n in zip(distinct, lengths) if n <= MAX_PROMPT]


def gold_rm(work: Path, hh: Path) -> tuple[Path, dict]:
    """The gold RM (trained once, then read back) and its accuracy on its training pairs
    and on the held-out tenth of the HH prompts."""
    from rmlens.hub import train
    from rmlens.rewards import TrainConfig

    pairs = load_pairs(hh)
    prompts = pd.Series(pairs.prompt.unique())
    held = pairs.prompt.isin(set(prompts.sample(frac=GOLD_HELD_OUT, random_state=0)))
    out = work / "gold"
    if not (out / "rm_config.json").exists():
        config = TrainConfig(model=GOLD, max_length=GOLD_LENGTH, epochs=GOLD_EPOCHS, seed=0,
                             device="cpu")  # fmt: skip
        train(pairs[~held].reset_index(drop=True), config, out=out,
              eval_data=pairs[held].reset_index(drop=True), quiet=True)  # fmt: skip
    last = json.loads((out / "history.json").read_text())[-1]
    return out, {"train": last.get("train_accuracy"), "held_out": last.get("eval_accuracy"),
                 "n_train": int((~held).sum()), "n_held_out": int(held.sum())}  # fmt: skip


def saved(folder: Path, key: str, make):
    """``make()``'s JSON-able result, kept in ``folder/key.json`` (written whole, once)."""
    path = folder / f"{key}.json"
    if path.exists():
        return json.loads(path.read_text())
    value = make()
    folder.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".part")
    partial.write_text(json.dumps(value))
    partial.replace(path)
    return value


def digest(texts) -> str:
    return hashlib.sha1("\x00".join(map(str, texts)).encode()).hexdigest()[:16]


def policy_samples(work: Path, prompts: list[str], gold: Path) -> tuple[Path, Path, dict]:
    """The pool and the gold-labelled pairs (``rmlens.data.candidates_from_policy``), each
    part of the samples and of the gold's scores saved as it finishes; what they cost."""
    from rmlens.backbones import load_policy, resolve_precision, sample_responses
    from rmlens.data import candidates_from_policy, save_pairs
    from rmlens.hub import load_rm

    folder = work / "samples"
    pool_path, pairs_path = folder / "pool.parquet", folder / "pairs.parquet"
    cost_path = folder / "cost.json"
    if pool_path.exists() and pairs_path.exists() and cost_path.exists():
        return pool_path, pairs_path, json.loads(cost_path.read_text())
    precision = resolve_precision("auto", "cpu", task="generate")
    lm, tokenizer = load_policy(POLICY, precision=precision)
    rm = load_rm(gold, device="cpu", precision=GOLD_PRECISION)

    def write(chunk: list[str], n: int, seed: int) -> dict:
        start = time.perf_counter()
        responses = sample_responses(lm, tokenizer, chunk, n, max_new_tokens=MAX_NEW_TOKENS,
                                     seed=seed)  # fmt: skip
        tokens = sum(len(tokenizer(r, add_special_tokens=False).input_ids)
                     for rs in responses for r in rs)  # fmt: skip
        return {"responses": responses, "seconds": time.perf_counter() - start,
                "tokens": tokens}  # fmt: skip

    def writer(batch: list[str], n: int) -> list[list[str]]:
        out = []
        for i in range(0, len(batch), CHUNK):
            chunk = batch[i : i + CHUNK]
            part = saved(folder / "parts", f"n{n}-{digest(chunk)}",
                         lambda chunk=chunk, i=i: write(chunk, n, seed=i))  # fmt: skip
            out += part["responses"]
        return out

    def score(texts: list[str], responses: list[str]) -> np.ndarray:
        out = []
        for i in range(0, len(texts), 2048):
            p, r = texts[i : i + 2048], responses[i : i + 2048]

            def make(p=p, r=r) -> dict:
                start = time.perf_counter()
                return {"scores": rm.score(p, r).tolist(), "seconds": time.perf_counter() - start}

            out += saved(folder / "gold", digest(p + r), make)["scores"]
        return np.asarray(out)

    pool, pairs = candidates_from_policy(prompts, writer, score, n_responses=N_RESPONSES,
                                         holdout=POOL_PROMPTS / len(prompts), seed=0)  # fmt: skip
    parts = [json.loads(p.read_text()) for p in sorted((folder / "parts").glob("*.json"))]
    scored = [json.loads(p.read_text()) for p in sorted((folder / "gold").glob("*.json"))]
    cost = {"policy_precision": precision, "gold_precision": GOLD_PRECISION,
            "generated_tokens": sum(p["tokens"] for p in parts),
            "generate_seconds": sum(p["seconds"] for p in parts),
            "gold_texts": sum(len(s["scores"]) for s in scored),
            "gold_seconds": sum(s["seconds"] for s in scored)}  # fmt: skip
    save_pairs(pool, pool_path)
    save_pairs(pairs, pairs_path)
    cost_path.write_text(json.dumps(cost, indent=1))
    return pool_path, pairs_path, cost


def proxy_audits(work: Path, pairs: pd.DataFrame) -> dict[tuple[int, int], Path]:
    """A frozen MiniLM brute-force audit of ``size`` labelled pairs at each seed: its runs
    are the proxies."""
    paths = {}
    for size in SIZES:
        for seed in SEEDS:
            path = work / "proxies" / f"{size}-seed{seed}"
            chosen = pairs.sample(size, random_state=seed).reset_index(drop=True)
            audit(chosen, AuditConfig(model="minilm", runs=RUNS, estimator="brute", seed=seed),
                  out=path, quiet=True)  # fmt: skip
            paths[size, seed] = path
    return paths


def z_scores(path: Path, pool: pd.DataFrame, features: dict) -> np.ndarray:
    """Each run's rewards of the pool as z-scores over the pool, (R, P, N)."""
    from rmlens.hub import load_rm, member_scores

    scores = member_scores(load_rm(path, device="cpu"), list(pool.prompt), list(pool.response),
                           features=features)  # fmt: skip
    scores = scores.reshape(len(scores), pool.prompt_id.nunique(), -1)
    flat = scores.reshape(len(scores), -1)
    return (scores - flat.mean(1)[:, None, None]) / flat.std(1)[:, None, None]


def ensemble(z: np.ndarray, kind: str) -> np.ndarray:
    """The runs' z-scores (R, P, N) combined into one proxy (P, N)."""
    if kind == "min":
        return z.min(axis=0)
    return z.mean(axis=0) - (UWO * z.var(axis=0) if kind == "uwo" else 0.0)


def boot(values: np.ndarray, rng, n_boot: int = N_BOOT) -> tuple[float, float]:
    """95% interval of the mean of ``values`` (units, P), resampling units and prompts."""
    u, p = values.shape
    draws = [values[rng.integers(0, u, u)][:, rng.integers(0, p, p)].mean()
             for _ in range(n_boot)]  # fmt: skip
    return percentile_interval(draws)


def training_figures(path: Path) -> pd.DataFrame:
    """Per run of an audit: the mean CM and the memorized share of the pairs it trained on."""
    table = pd.read_parquet(path / "memorization.parquet")
    plan = pd.read_parquet(path / "plan.parquet")
    rows = []
    for run, part in plan[plan.in_train].groupby("run"):
        mine = table[table.group.astype(str).isin(part.group.astype(str))]
        rows.append({"run": int(run), "cm": float(mine.cm.mean()), "memorized": memorized(mine)})
    return pd.DataFrame(rows).set_index("run")


def overoptimization_policy(work: Path, hh: Path) -> list[dict]:
    from rmlens.comparison import overoptimize

    work = work / "overoptimization-policy"
    prompts = policy_prompts(hh)
    gold, gold_accuracy = gold_rm(work, hh)
    pool_path, pairs_path, cost = policy_samples(work, prompts, gold)
    pool, pairs = load_candidates(pool_path), load_pairs(pairs_path)
    audits = proxy_audits(work, pairs)
    labels = {key: f"{key[0]} pairs, seed {key[1]}" for key in audits}
    overoptimize(list(audits.values()), pool_path, out=work / "bon", ns=NS,
                 labels=list(labels.values()), quiet=True)  # fmt: skip
    gold_z = pool.gold.to_numpy(float)
    gold_z = ((gold_z - gold_z.mean()) / gold_z.std()).reshape(pool.prompt_id.nunique(), -1)
    rng = np.random.default_rng(0)
    half = rng.permutation(len(gold_z)) < len(gold_z) // 2
    features: dict = {}
    curves, falls, runs = {}, {}, []
    for (size, seed), path in audits.items():
        z = z_scores(path, pool, features)
        single = np.stack([best_of_n(zr, gold_z[None], NS)[0] for zr in z])  # (R, P, K)
        curves.setdefault(("single", size), []).append(single)
        fall = cross_fitted_fall(single, half)  # (R, P)
        falls.setdefault(("single", size), []).append(fall)
        trained = training_figures(path)
        runs += [{"size": size, "seed": seed, "fall": float(f.mean()),
                  **trained.loc[r].to_dict()} for r, f in enumerate(fall)]  # fmt: skip
        for kind in ENSEMBLES:
            curve = best_of_n(ensemble(z, kind), gold_z[None], NS)[0]  # (P, K)
            curves.setdefault((kind, size), []).append(curve[None])
            falls.setdefault((kind, size), []).append(cross_fitted_fall(curve, half)[None])
    oracle = best_of_n(gold_z, gold_z[None], NS)[0]
    return finding(curves, falls, pd.DataFrame(runs), oracle, gold_accuracy, cost,
                   len(pairs), rng)  # fmt: skip


def finding(curves, falls, runs, oracle, gold_accuracy, cost, n_pairs, rng) -> list[dict]:
    figures, rows = [], []
    kl = kl_best_of_n(NS)
    names = {"single": "single proxies", "mean": "ensemble mean", "min": "ensemble min",
             "uwo": "ensemble mean - 0.5 var"}  # fmt: skip
    for (kind, size), parts in falls.items():
        fall = np.concatenate(parts)  # (units, P): runs, or seeds for an ensemble
        lo, hi = boot(fall, rng)
        n_of = "runs and prompts" if kind == "single" else "seeds and prompts"
        figures.append(fig(f"fall:{kind}:{size}", f"{names[kind]}, {size} pairs: the gold's "
                           "fall from its cross-fitted peak to n = 64", fall.mean(), lo, hi,
                           fall.shape[1], "gold sd", n_of))  # fmt: skip
        curve = np.concatenate(curves[kind, size]).mean(axis=(0, 1))
        rows.append([names[kind], str(size), *(f"{g:+.2f}" for g in curve)])
    for kind in ENSEMBLES:
        for size in SIZES:
            gap = (np.concatenate(falls["single", size]).mean(0)
                   - np.concatenate(falls[kind, size]).mean(0))[None]  # fmt: skip
            lo, hi = boot(gap, rng)
            figures.append(fig(f"softening:{kind}:{size}", f"{names[kind]}, {size} pairs: the "
                               "single proxies' fall minus the ensemble's", gap.mean(), lo, hi,
                               gap.shape[1], "gold sd", "prompts"))  # fmt: skip
    rows.append(["oracle (picks by the gold)", "", *(f"{g:+.2f}" for g in oracle.mean(0))])
    table = {"caption": "Gold of the best-of-n pick, in sd of the pool's gold from its mean "
             "(n = 1: a random sample)",
             "columns": ["proxy", "pairs", *(f"n={n} (KL {k:.2f})" for n, k in zip(NS, kl))],
             "rows": rows}  # fmt: skip
    bon = record("overoptimization-policy", figures, [table], gold_accuracy, cost, n_pairs)
    bon["reading"] = (gold_reading(gold_accuracy) + " "
                      + bon_reading({f["key"]: f for f in figures}, curves, oracle))
    return [judged(bon), audit_link(runs, gold_accuracy, cost, n_pairs, rng)]


def audit_link(runs: pd.DataFrame, gold_accuracy, cost, n_pairs, rng) -> dict:
    """Whether a proxy's training pairs, as its audit reads them, foretell its fall: across
    all proxies (the data sizes differ), and within each audit (one size and seed: what the
    audit adds beyond the size of the data)."""
    figures = []
    for name, label in (("memorized", "the memorized share"), ("cm", "the mean CM")):
        x, y = runs[name].to_numpy(), runs.fall.to_numpy()
        draws = [spearman(x[r], y[r]) for r in (rng.integers(0, len(x), len(x))
                                                 for _ in range(N_BOOT))]  # fmt: skip
        lo, hi = percentile_interval(draws)
        figures.append(fig(f"link:{name}", f"{label} of a proxy's training pairs against its "
                           "gold's fall, across proxies", spearman(x, y), lo, hi, len(x),
                           "Spearman", "proxies"))  # fmt: skip
    groups = [g for _, g in runs.groupby(["size", "seed"])]
    within = [np.mean([spearman(g.memorized.to_numpy()[r], g.fall.to_numpy()[r])
                       for g in groups for r in [rng.integers(0, len(g), len(g))]])
              for _ in range(N_BOOT)]  # fmt: skip
    lo, hi = percentile_interval(within)
    value = np.mean([spearman(g.memorized.to_numpy(), g.fall.to_numpy()) for g in groups])
    figures.append(fig("link:memorized:within", "the same within each audit (one size and "
                       "seed), mean over audits", value, lo, hi, len(runs), "Spearman",
                       "proxies"))  # fmt: skip
    by_size = runs.groupby("size")[["memorized", "cm", "fall"]].mean()
    rows = [[str(s), f"{r.memorized:.3f}", f"{r.cm:+.3f}", f"{r.fall:+.3f}"]
            for s, r in by_size.iterrows()]  # fmt: skip
    table = {"caption": "The proxies by training size (means over seeds and runs)",
             "columns": ["pairs audited", "memorized share", "mean CM", "gold fall (sd)"],
             "rows": rows}  # fmt: skip
    found = record("overoptimization-audit", figures, [table], gold_accuracy, cost, n_pairs)
    found["reading"] = link_reading({f["key"]: f for f in figures}, by_size)
    return judged(found)


def way(f: dict, up: str, down: str, none: str) -> str:
    """Which side of 0 an interval lies on, in words."""
    return up if f["lo"] > 0 else down if f["hi"] < 0 else none


def text(f: dict) -> str:
    return f"{f['value']:+.2f} [{f['lo']:+.2f}, {f['hi']:+.2f}]"


def gold_reading(gold_accuracy: dict) -> str:
    """Why the gold may stand for the human judge, and how far."""
    most = max(SIZES) * (FOLDS - 1) // FOLDS
    return (
        f"The gold stands for the human judge as Gao et al.'s does: it learned from human "
        f"judgments of these prompts ({gold_accuracy['n_train']:,} HH pairs, against at "
        f"most {most} gold-labelled pairs for any proxy run), and it is a fine-tuned 135M "
        f"model where the proxies are linear heads on a frozen 22M encoder. It is an "
        f"imperfect judge ({gold_accuracy['held_out']:.0%} accurate on held-out human "
        f"pairs), but the protocol needs only a fixed reward that the proxies learn from its "
        f"labels alone: what it measures is how far a proxy learned from few labels drifts "
        f"from the function that gave them."
    )


def bon_reading(figs: dict, curves: dict, oracle: np.ndarray) -> str:
    """What the curves and falls say, in words, from the figures as measured."""
    said = []
    for size in SIZES:
        curve = np.concatenate(curves["single", size]).mean(axis=(0, 1))
        f = figs[f"fall:single:{size}"]
        said.append(
            f"With {size} pairs audited, the single proxies' gold peaks at {curve.max():+.2f} "
            f"sd at n = {NS[int(curve.argmax())]} and ends at {curve[-1]:+.2f} at n = {NS[-1]}; "
            f"its cross-fitted fall is {text(f)} sd, "
            + way(f, "so it peaks and falls", "so it still rises at n = 64",
                  "not distinguishable from no fall") + ".")
    ensembles = []
    for kind in ENSEMBLES:
        parts = [f"{text(figs[f'softening:{kind}:{size}'])} ({size} pairs)" for size in SIZES]
        ensembles.append(f"{kind} {', '.join(parts)}")
    return (
        " ".join(said) + f" The oracle, picking by the gold itself, reaches "
        f"{oracle.mean(0)[-1]:+.2f} sd at n = {NS[-1]}. The ensembles' softening (the single "
        f"proxies' fall minus the ensemble's, in gold sd; above 0: the ensemble falls less): "
        + "; ".join(ensembles) + ". KL_bon reaches log 64 - 63/64 = 3.17 nats here; Gao et al. "
        "read falls out to 10 nats, which needs n of about 60,000 samples per prompt."
    )


def link_reading(figs: dict, by_size: pd.DataFrame) -> str:
    small, large = by_size.iloc[0], by_size.iloc[-1]
    across, within = figs["link:memorized"], figs["link:memorized:within"]
    return (
        "Across the proxies, the memorized share of a proxy's training pairs "
        + way(across, "rises with", "falls with", "does not clearly follow")
        + f" how far its gold falls (Spearman {text(across)}; the mean CM "
        f"{text(figs['link:cm'])}). The proxies of {by_size.index[0]} pairs have "
        f"{small.memorized:.0%} of their pairs memorized and fall by {small.fall:+.3f} sd; "
        f"those of {by_size.index[-1]} pairs {large.memorized:.0%} and {large.fall:+.3f}. "
        f"Within one audit, where the size and seed are fixed and only the folds a run "
        f"trains on differ, the link is {text(within)}: "
        + way(within, "the audit tells apart the proxies that hack more beyond the size of "
              "their data", "the proxies with more memorized pairs fall less", "what it adds "
              "beyond the size of the data is not measurable at this size")
        + "."
    )


def record(name: str, figures: list, tables: list, gold_accuracy: dict, cost: dict,
           n_pairs: int) -> dict:  # fmt: skip
    claims = {
        "overoptimization-policy": (
            "Best-of-n on a policy's samples: optimize harder against a proxy RM and the "
            "pick's gold reward rises, peaks and falls; ensembles of proxies soften the fall",
            SOURCE),
        "overoptimization-audit": (
            "The audit foresees reward hacking: the more of a proxy's training pairs it "
            "finds memorized, the further that proxy's best-of-n gold falls",
            "rmlens (the question the audit exists to answer)"),
    }  # fmt: skip
    claim, source = claims[name]
    return {
        "name": name,
        "title": claim.split(":")[0] if ":" in claim else claim,
        "claim": claim,
        "source": source,
        "command": COMMAND,
        "data": data_text(gold_accuracy, cost, n_pairs),
        "figures": figures,
        "headline": [f["key"] for f in figures if f["key"].startswith(("fall:single",
                                                                        "link:"))][:2],
        "verdict": None,  # by the written rules: verdicts.judged
        "reading": "",
        "tables": tables,
        "measured": datetime.date.today().isoformat(),
    }


def data_text(gold_accuracy: dict, cost: dict, n_pairs: int) -> str:
    rate = cost["generated_tokens"] / cost["generate_seconds"]
    sizes, seeds = " and ".join(map(str, SIZES)), ", ".join(map(str, SEEDS))
    return (
        f"Gold: a LoRA SmolLM2-135M-Instruct RM trained on {gold_accuracy['n_train']} "
        f"HH-RLHF harmless pairs, {gold_accuracy['held_out']:.3f} accurate on "
        f"{gold_accuracy['n_held_out']} held out by prompt, scoring in "
        f"{cost['gold_precision']}. Policy: SmolLM2-135M-Instruct, {N_RESPONSES} samples of "
        f"at most {MAX_NEW_TOKENS} tokens at temperature 1 to each of {POOL_PROMPTS} held-out "
        f"HH prompts, in {cost['policy_precision']}. Proxies: frozen MiniLM heads, the "
        f"{RUNS} runs ({FOLDS}-fold) of brute-force audits of {sizes} of the {n_pairs} "
        f"gold-labelled pairs of its samples to other prompts, at seeds {seeds}. Cost on 2 "
        f"CPU cores: {cost['generated_tokens']:,} tokens generated in "
        f"{cost['generate_seconds'] / 60:.0f} min ({rate:.0f} tokens/s), "
        f"{cost['gold_texts']:,} texts scored by the gold in "
        f"{cost['gold_seconds'] / 60:.0f} min."
    )
