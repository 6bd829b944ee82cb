"""Christian et al.'s four token findings, measured on RMs that rmlens trains (issue 49).

Four LoRA RMs on pretrained SmolLM2-135M-Instruct (``rmlens train``'s defaults, 128
tokens): three seeds on HH-RLHF harmless pairs (the same data and objective) and one on
SQuALITY pairs (other data, the same objective) at a fourth seed, so that every two RMs
differ in their seed (an RM's random head can outweigh what 240 pairs teach it). Each is
trained on 240 pairs and checked on 60 held out by prompt, then swept (``rmlens sweep``)
over every token id of the vocabulary under a positive and a negative prompt. Controls, swept
under the positive prompt: the initial states of the seed-0 and seed-1 RMs (the backbone
with its LoRA and head as initialized, untrained) and an RM trained on the HH pairs with
their sides shuffled (issue 59). The four statistics, each per RM (or pair of RMs) with a
95% bootstrap over tokens (words for the word-level ones):

- agreement: Spearman of two RMs' scores over the tokens, per prompt;
- asymmetry: the skewness of an RM's scores (Fisher-Pearson; 0 for a symmetric
  distribution), and how much two RMs share of their 100 highest against their 100 lowest;
- framing: how steeply the score follows VADER valence among positive words minus among
  negative words, under the positive prompt minus under the negative one (the paper: a
  positive prompt makes RMs more sensitive to positive words, a negative one to negative);
- frequency bias: the score's slope on Zipf word frequency with a valence control
  (``rmlens.tokens.frequency_bias``), in standard deviations of the score per tenfold
  frequency.
"""

from __future__ import annotations

import datetime
import json
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from findings.common import fig
from findings.verdicts import judged
from rmlens.data import load_pairs
from rmlens.stats import percentile_interval, spearman
from rmlens.tokens import DEFAULT_PROMPTS, frequency_bias, moments, sweep, word_features

POSITIVE, NEGATIVE = DEFAULT_PROMPTS[1], DEFAULT_PROMPTS[2]  # the best / worst thing ever
TOKEN_IDS = None  # every id of SmolLM2's 49,152: about 4 minutes per RM and prompt in fp32
TOKEN_RMS = (("hh", 0), ("hh", 1), ("hh", 3), ("squality", 2))  # no two share a seed
# the controls: the trained RMs' initial states (backbone, LoRA as initialized, the random
# head of seeds 0 and 1) and an RM trained on HH pairs whose sides were shuffled (seed 0)
NULL_RMS = (("untrained", 0), ("untrained", 1), ("shuffled", 0))
TRAIN_PAIRS, HELD_OUT = 240, 60
MAX_LENGTH = 128
TOP = 100
N_BOOT = 400
SOURCE = ("Christian et al. 2025, Reward Model Interpretability via Optimal and Pessimal "
          "Tokens")  # fmt: skip
COMMAND = "python benchmarks/findings.py tokens"
TAILS = {1.0: "positive: a long tail of high-scoring tokens",
         -1.0: "negative: a long tail of low-scoring tokens"}


@cache  # the HH pairs are chosen by token count: tokenized once, not once per seed
def token_pairs(data: str, hh: Path, squality: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``TRAIN_PAIRS + HELD_OUT`` pairs of ``data``, split by prompt: HH's shortest within
    ``MAX_LENGTH`` SmolLM2 tokens; SQuALITY's drawn at random (their answers cut there)."""
    from helpers.pairs import shortest

    n = TRAIN_PAIRS + HELD_OUT
    if data == "hh":
        pairs = shortest(load_pairs(hh), "smollm2-135m", n, MAX_LENGTH)
    else:
        pairs = load_pairs(squality).sample(n, random_state=0).reset_index(drop=True)
    prompts = pd.Series(pairs.prompt.unique()).sample(frac=1.0, random_state=0)
    held, count = set(), 0
    for prompt in prompts:
        if count >= HELD_OUT:
            break
        held.add(prompt)
        count += int((pairs.prompt == prompt).sum())
    test = pairs.prompt.isin(held)
    return pairs[~test].reset_index(drop=True), pairs[test].reset_index(drop=True)


def token_rm(data: str, seed: int, work: Path, hh: Path, squality: Path) -> tuple[Path, dict]:
    """The RM trained on ``data`` at ``seed`` (resumed where it stopped) and its accuracy on
    the training and held-out pairs."""
    from rmlens.hub import train
    from rmlens.rewards import TrainConfig

    out = work / "tokens" / f"{data}-seed{seed}"
    fit, held = token_pairs(data, hh, squality)
    if not (out / "rm_config.json").exists():
        config = TrainConfig(model="smollm2-135m", max_length=MAX_LENGTH, device="cpu",
                             seed=seed)  # fmt: skip
        train(fit, config, out=out, eval_data=held, quiet=True)
    last = json.loads((out / "history.json").read_text())[-1]
    return out, {"train": last.get("train_accuracy"), "held_out": last.get("eval_accuracy"),
                 "n_train": len(fit), "n_held_out": len(held)}  # fmt: skip


def boot(stat, n: int, n_boot: int = N_BOOT, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of ``stat(rows)`` over ``n_boot`` resamples of ``n`` rows."""
    rng = np.random.default_rng(seed)
    return percentile_interval([stat(rng.integers(0, n, n)) for _ in range(n_boot)])


def swept(rms: dict[str, Path], out: Path, prompts: list[str]) -> dict[str, pd.DataFrame]:
    """Each RM swept (``rmlens sweep``, resumed where it stopped) under ``prompts``, as one
    row per token (:func:`wide`)."""
    summary = sweep([str(path) for path in rms.values()], out=out, prompts=prompts,
                    max_tokens=TOKEN_IDS, quiet=True)  # fmt: skip
    folders = {m["rm"]: m["folder"] for m in summary["models"].values()}
    return {name: wide(pd.read_parquet(out / folders[str(path)] / "sweep.parquet"))
            for name, path in rms.items()}  # fmt: skip


def wide(table: pd.DataFrame) -> pd.DataFrame:
    """One row per token: its decoded text and its score under each prompt."""
    scores = table.pivot_table(index="token_id", columns="prompt", values="score")
    decoded = table.drop_duplicates("token_id").set_index("token_id").decoded
    return scores.join(decoded).dropna()


def agreement_figures(tables: dict[str, pd.DataFrame]) -> tuple[list, list]:
    """Spearman of each pair of RMs under each prompt, and the overlap of their top and
    bottom ``TOP`` tokens (the asymmetry between the ends)."""
    names = list(tables)
    figures, rows = [], []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            both = tables[a].join(tables[b], lsuffix="_a", rsuffix="_b", how="inner")
            for prompt, word in ((POSITIVE, "best"), (NEGATIVE, "worst")):
                x, y = both[f"{prompt}_a"].to_numpy(), both[f"{prompt}_b"].to_numpy()
                rho = spearman(x, y)
                lo, hi = boot(lambda r, x=x, y=y: spearman(x[r], y[r]), len(x))
                figures.append(fig(f"agreement:{a}:{b}:{word}", f"{a} and {b}, \"{word}\"",
                                   rho, lo, hi, len(x), "Spearman"))  # fmt: skip
                top = len(set(both[f"{prompt}_a"].nlargest(TOP).index)
                          & set(both[f"{prompt}_b"].nlargest(TOP).index)) / TOP  # fmt: skip
                bottom = len(set(both[f"{prompt}_a"].nsmallest(TOP).index)
                             & set(both[f"{prompt}_b"].nsmallest(TOP).index)) / TOP  # fmt: skip
                rows.append([f"{a} / {b}", word, f"{rho:.3f}", f"{top:.0%}", f"{bottom:.0%}"])
    return figures, rows


NULL_PAIRS = (("untrained-seed0", "untrained-seed1"), ("hh-seed0", "untrained-seed0"),
              ("hh-seed1", "untrained-seed1"), ("hh-seed0", "shuffled-seed0"),
              ("untrained-seed0", "shuffled-seed0"))  # fmt: skip


def null_figures(tables: dict[str, pd.DataFrame], nulls: dict[str, pd.DataFrame]
                 ) -> tuple[list, list, list]:  # fmt: skip
    """The controls under the positive prompt: the Spearman of two random heads, of each
    trained RM with its own initial state, and of the shuffled-label RM; each control's
    skewness; and their table rows."""
    every = {**tables, **nulls}
    agree, skew, rows = [], [], []
    for a, b in NULL_PAIRS:
        both = every[a].join(every[b], lsuffix="_a", rsuffix="_b", how="inner")
        x, y = both[f"{POSITIVE}_a"].to_numpy(), both[f"{POSITIVE}_b"].to_numpy()
        lo, hi = boot(lambda r, x=x, y=y: spearman(x[r], y[r]), len(x))
        agree.append(fig(f"null:agreement:{a}:{b}", f"{a} and {b}, \"best\"", spearman(x, y),
                         lo, hi, len(x), "Spearman"))  # fmt: skip
    for name, table in nulls.items():
        x = table[POSITIVE].to_numpy()
        lo, hi = boot(lambda r, x=x: moments(x[r])["skew"], len(x))
        skew.append(fig(f"null:asymmetry:{name}", f"{name}, \"best\"", moments(x)["skew"], lo,
                        hi, len(x), "skewness"))  # fmt: skip
    for f in (*agree, *skew):
        rows.append([f["label"], f["unit"], f"{f['value']:+.3f} [{f['lo']:+.3f}, {f['hi']:+.3f}]"])
    return agree, skew, rows


def valence_slopes(z: np.ndarray, valence: np.ndarray) -> tuple[float, float]:
    """The score's OLS slope on valence among the positive words and among the negative."""
    pos, neg = valence > 0, valence < 0
    return (float(np.polyfit(valence[pos], z[pos], 1)[0]),
            float(np.polyfit(valence[neg], z[neg], 1)[0]))  # fmt: skip


def framing_index(zp: np.ndarray, zn: np.ndarray, valence: np.ndarray) -> float:
    """(positive-word slope - negative-word slope) under the positive prompt, minus the same
    under the negative prompt: > 0 when the prompt's framing steers which words count."""
    pp, pn = valence_slopes(zp, valence)
    np_, nn = valence_slopes(zn, valence)
    return (pp - pn) - (np_ - nn)


def standardized(x: np.ndarray) -> np.ndarray:
    return (x - x.mean()) / x.std()


def rm_figures(name: str, table: pd.DataFrame) -> tuple[list, list, list, list, list]:
    """One RM's asymmetry (skewness), framing and frequency-bias figures, its rows, and how
    alike it ranks the tokens under the two prompts."""
    asym, framing, freq, rows = [], [], [], []
    for prompt, word in ((POSITIVE, "best"), (NEGATIVE, "worst")):
        x = table[prompt].to_numpy()
        lo, hi = boot(lambda r, x=x: moments(x[r])["skew"], len(x))
        skew = moments(x)["skew"]
        asym.append(fig(f"asymmetry:{name}:{word}", f"{name}, \"{word}\"", skew, lo, hi,
                        len(x), "skewness"))  # fmt: skip
        frame = pd.DataFrame({"prompt": prompt, "decoded": table.decoded,
                              "score": standardized(x)})  # fmt: skip
        bias = frequency_bias(frame).iloc[0]
        freq.append(fig(f"frequency:{name}:{word}", f"{name}, \"{word}\"", bias.coef_log_freq,
                        bias.coef_log_freq_lo, bias.coef_log_freq_hi, bias.n_words,
                        "SD per tenfold frequency", "words"))  # fmt: skip
        rows.append([name, word, f"{skew:+.2f}", f"{bias.coef_log_freq:+.3f}",
                     f"{bias.coef_valence:+.3f}", str(int(bias.n_words))])  # fmt: skip
    features = word_features(table.decoded.tolist())
    words = (features.is_word & (features.valence != 0)).to_numpy()
    valence = features.valence.to_numpy()[words]
    zp = standardized(table[POSITIVE].to_numpy())[words]
    zn = standardized(table[NEGATIVE].to_numpy())[words]
    value = framing_index(zp, zn, valence)
    lo, hi = boot(lambda r: framing_index(zp[r], zn[r], valence[r]), len(valence))
    framing.append(fig(f"framing:{name}", name, value, lo, hi, len(valence),
                       "SD per unit valence", "words"))  # fmt: skip
    top = len(set(table[POSITIVE].nlargest(TOP).index)
              & set(table[NEGATIVE].nlargest(TOP).index)) / TOP  # fmt: skip
    prompts = [name, f"{spearman(table[POSITIVE], table[NEGATIVE]):.3f}", f"{top:.0%}"]
    return asym, framing, freq, rows, prompts


def finding(name: str, title: str, claim: str, data: str, figures: list, reading: str,
            tables: list) -> dict:
    """One finding's file, its verdict by the written rules; its headline is every figure
    under the positive prompt (each RM, or pair of RMs), so that the top table shows them
    all, not a chosen one."""
    headline = [f["key"] for f in figures
                if not f["key"].endswith(":worst") and not f["key"].startswith("null:")]
    return judged({"name": name, "title": title, "claim": claim, "source": SOURCE,
                   "command": COMMAND, "data": data, "figures": figures,
                   "headline": headline, "verdict": None, "reading": reading,
                   "tables": tables,
                   "measured": datetime.date.today().isoformat()})  # fmt: skip


def null_rm(kind: str, seed: int, work: Path, hh: Path, squality: Path) -> Path:
    """A control RM on the HH training pairs: ``untrained``, one epoch at a learning rate of
    1e-12 (the backbone, its LoRA and the head as seed ``seed`` initializes them, saved as
    any RM); ``shuffled``, trained as the others on the pairs with each one's sides swapped
    at random (half of them), so that no preference is left to learn."""
    from rmlens.hub import train
    from rmlens.rewards import TrainConfig

    out = work / "tokens" / f"null-{kind}-seed{seed}"
    fit, _ = token_pairs("hh", hh, squality)
    if not (out / "rm_config.json").exists():
        tiny = {"lr": 1e-12, "head_lr": 1e-12, "epochs": 1} if kind == "untrained" else {}
        if kind == "shuffled":
            swap = np.random.default_rng(seed).random(len(fit)) < 0.5
            fit = fit.copy()
            fit.loc[swap, ["chosen", "rejected"]] = fit.loc[swap, ["rejected", "chosen"]].values
        config = TrainConfig(model="smollm2-135m", max_length=MAX_LENGTH, device="cpu",
                             seed=seed, **tiny)  # fmt: skip
        train(fit, config, out=out, quiet=True)
    return out


def tokens(work: Path, hh: Path, squality: Path) -> list[dict]:
    trained = {f"{data}-seed{seed}": token_rm(data, seed, work, hh, squality)
               for data, seed in TOKEN_RMS}  # fmt: skip
    tables = swept({name: path for name, (path, _) in trained.items()}, work / "tokens" / "sweep",
                   [POSITIVE, NEGATIVE])  # fmt: skip
    nulls = swept({f"{kind}-seed{seed}": null_rm(kind, seed, work, hh, squality)
                   for kind, seed in NULL_RMS},
                  work / "tokens" / "sweep-null", [POSITIVE])  # fmt: skip
    quality = [[name, str(q["n_train"]), f"{q['train']:.3f}", str(q["n_held_out"]),
                f"{q['held_out']:.3f}"] for name, (_, q) in trained.items()]  # fmt: skip
    quality_table = {"caption": "The swept RMs: accuracy on their training pairs (last epoch) "
                     "and on pairs held out by prompt",
                     "columns": ["RM", "trained on", "train accuracy", "held out",
                                 "held-out accuracy"], "rows": quality}  # fmt: skip
    agree, agree_rows = agreement_figures(tables)
    null_agree, null_skew, null_rows = null_figures(tables, nulls)
    controls = {"caption": "The controls under \"best\": the trained RMs' initial states "
                "(untrained, the backbone with its LoRA and head as seeds 0 and 1 initialize "
                "them) and an RM trained on the same HH pairs with their sides shuffled",
                "columns": ["RMs", "statistic", "value [95% interval over tokens]"],
                "rows": null_rows}  # fmt: skip
    per_rm = [rm_figures(name, table) for name, table in tables.items()]
    asym = [f for a, _, _, _, _ in per_rm for f in a]
    framing = [f for _, fr, _, _, _ in per_rm for f in fr]
    freq = [f for _, _, fq, _, _ in per_rm for f in fq]
    rm_rows = [row for _, _, _, rows, _ in per_rm for row in rows]
    prompt_rows = [prompts for *_, prompts in per_rm]
    data = (f"four LoRA RMs on pretrained SmolLM2-135M-Instruct ({MAX_LENGTH} tokens, "
            f"rmlens train's defaults): HH-RLHF harmless at seeds 0, 1 and 3, SQuALITY at seed 2, "
            f"each trained on {TRAIN_PAIRS} pairs; swept over every token id of the vocabulary "
            f"(49,152, the special ones left out) under \"{POSITIVE}\" and \"{NEGATIVE}\"; "
            f"the controls (untrained at seeds 0 and 1, HH with shuffled sides at seed 0) "
            f"under \"{POSITIVE}\"; 95% bootstraps over tokens")  # fmt: skip
    return [agreement_finding(agree, agree_rows, quality_table, data, null_agree, controls),
            asymmetry_finding(asym, agree_rows, rm_rows, data, null_skew, controls),
            framing_finding(framing, prompt_rows, data), frequency_finding(freq, rm_rows, data)]


def agreement_finding(figures: list, rows: list, quality: dict, data: str, nulls: list,
                      controls: dict) -> dict:  # fmt: skip
    same = [f for f in figures if f["key"].count(":hh-") == 2]  # agreement:hh-..:hh-..:word
    other = [f for f in figures if "squality" in f["key"]]
    low = max(f["hi"] for f in same) < 0.9
    text = "; ".join(f"{f['label']} {f['value']:.2f} [{f['lo']:.2f}, {f['hi']:.2f}]"
                     for f in figures)  # fmt: skip
    reading = (
        f"Token scores' Spearman between RMs, per prompt: {text}. RMs trained on the same "
        f"HH pairs with the same objective, differing only in their seed, "
        + ("rank the vocabulary differently (Spearman below 0.9 under both prompts), as the "
           f"paper finds across RMs trained on similar objectives "
           f"({min(f['value'] for f in same):.2f} to {max(f['value'] for f in same):.2f}): "
           "at this size the seed alone moves the "
           "vocabulary's ranking. " if low else
           "rank the vocabulary nearly alike; ")
        + "An RM trained on other data (SQuALITY) agrees with them "
        f"at {min(f['value'] for f in other):.2f} to {max(f['value'] for f in other):.2f}. "
        "The intervals are over tokens: they say how well the sweep fixes each Spearman, "
        "not how much another seed would move it. " + null_reading(nulls, same) + " The paper "
        "compares ten public RMs of 2B to 27B parameters over whole vocabularies; here four "
        "135M RMs trained on 240 pairs each, over the whole vocabulary.")
    return finding("tokens-agreement", "Agreement between RMs over the vocabulary",
                   "RMs trained on similar objectives disagree about which tokens score "
                   "highest and lowest.", data, figures + nulls, reading,
                   [quality, {"caption": f"Agreement per pair of RMs and prompt, with the "
                              f"share of their top and bottom {TOP} tokens in common",
                              "columns": ["RMs", "prompt", "Spearman", f"top {TOP} shared",
                                          f"bottom {TOP} shared"], "rows": rows}, controls])


def null_reading(nulls: list, same: list) -> str:
    """What the controls say of the trained RMs' agreement (``same``: the Spearman of RMs
    trained on the same pairs at other seeds)."""
    value = {f["key"].removeprefix("null:agreement:"): f for f in nulls}

    def text(key: str) -> str:
        f = value[key]
        return f"{f['value']:.2f} [{f['lo']:.2f}, {f['hi']:.2f}]"

    random_heads = value["untrained-seed0:untrained-seed1"]
    closer = random_heads["hi"] < min(f["lo"] for f in same)
    inherited = closer and all(  # each trained RM nearer its own initial state than its kin
        value[f"hh-seed{s}:untrained-seed{s}"]["lo"]
        > max(f["hi"] for f in same if f"hh-seed{s}:" in f["key"] + ":") for s in (0, 1))
    meaning = (" So the disagreement is there before training: two random heads on this "
               "backbone rank the vocabulary almost independently, training on the same pairs "
               "brings two seeds closer rather than apart, and each trained RM stays nearer "
               "its own initial state than any RM trained with it. At this size the "
               "disagreement between seeds is inherited from their random heads, not learned."
               if inherited else
               " Training on the same pairs brings two seeds closer than their random heads "
               "were." if closer else "")
    return (f"Controls: the two initial states (random heads of seeds 0 and 1 on the same "
            f"backbone) agree at {text('untrained-seed0:untrained-seed1')}; each trained HH "
            f"RM agrees with its own initial state at {text('hh-seed0:untrained-seed0')} "
            f"(seed 0) and {text('hh-seed1:untrained-seed1')} (seed 1); the RM trained on "
            f"shuffled sides agrees with the seed-0 HH RM at "
            f"{text('hh-seed0:shuffled-seed0')} and with its own initial state at "
            f"{text('untrained-seed0:shuffled-seed0')}." + meaning)


def asymmetry_finding(figures: list, agree_rows: list, rm_rows: list, data: str,
                      nulls: list, controls: dict) -> dict:  # fmt: skip
    signs = {np.sign(f["value"]) for f in figures if f["lo"] > 0 or f["hi"] < 0}
    skewed = [f for f in figures if f["lo"] > 0 or f["hi"] < 0]
    ends = [(float(r[3].rstrip("%")), float(r[4].rstrip("%"))) for r in agree_rows]
    bottom_more = sum(b > t for t, b in ends)
    reading = (
        "Skewness of each RM's token scores: "
        + "; ".join(f"{f['label']} {f['value']:+.2f} [{f['lo']:+.2f}, {f['hi']:+.2f}]"
                    for f in figures)
        + f". {len(skewed)} of {len(figures)} exclude 0"
        + (f", all {TAILS[signs.pop()]}" if len(signs) == 1 and skewed else "")
        + f". Between the ends, two RMs under one prompt share {min(t for t, _ in ends):.0f}% "
        f"to {max(t for t, _ in ends):.0f}% of their {TOP} highest tokens and "
        f"{min(b for _, b in ends):.0f}% to {max(b for _, b in ends):.0f}% of their {TOP} "
        f"lowest (more of the lowest in {bottom_more} of {len(ends)} comparisons)"
        + (": they agree on their highest tokens more than on their lowest" if bottom_more == 0
           else ": they agree on their lowest tokens more than on their highest"
           if bottom_more == len(ends) else "")
        + ". Controls under \"best\", skewness: "
        + "; ".join(f"{f['label']} {f['value']:+.2f} [{f['lo']:+.2f}, {f['hi']:+.2f}]"
                    for f in nulls)
        + ". " + null_skew_reading(figures, nulls)
        + "The paper's asymmetry is read here as these two statistics (rmlens's "
        "operationalization); its own figures are over ten public RMs and whole "
        "vocabularies.")
    return finding("tokens-asymmetry", "High- and low-scoring tokens are encoded "
                   "asymmetrically", "RMs encode high- and low-scoring tokens asymmetrically.",
                   data, figures + nulls, reading,
                   [{"caption": "Per RM and prompt: skewness, and the frequency and valence "
                     "coefficients of the score (in SD)",
                     "columns": ["RM", "prompt", "skewness", "per tenfold frequency",
                                 "per unit valence", "words"], "rows": rm_rows}, controls])


def null_skew_reading(figures: list, nulls: list) -> str:
    """Whether the controls skew as the trained RMs do."""
    trained = {np.sign(f["value"]) for f in figures if f["lo"] > 0 or f["hi"] < 0}
    controls = {np.sign(f["value"]) if f["lo"] > 0 or f["hi"] < 0 else 0.0 for f in nulls}
    if len(trained) == 1 and controls == trained:
        return ("The controls, untrained and shuffled alike, skew the same way: at this size "
                "the skew is the backbone's, through any linear head, not a learned encoding "
                "of high- and low-scoring tokens. ")
    return ""


def framing_finding(figures: list, prompt_rows: list, data: str) -> dict:
    up = [f for f in figures if f["lo"] > 0]
    reading = (
        "Framing index (how much more steeply the score follows valence among positive words "
        "than among negative words under \"best\", minus the same under \"worst\"; > 0 as "
        "the paper finds): "
        + "; ".join(f"{f['label']} {f['value']:+.2f} [{f['lo']:+.2f}, {f['hi']:+.2f}] over "
                    f"{f['n']} words with a VADER valence" for f in figures)
        + f". {len(up)} of {len(figures)} RMs show the effect with an interval above 0. "
        f"The question itself moves these RMs little: each ranks the tokens under \"best\" "
        f"and \"worst\" at Spearman {', '.join(r[1] for r in prompt_rows)} and keeps "
        f"{', '.join(r[2] for r in prompt_rows)} of its top {TOP} (the table): RMs of 135M "
        "parameters trained on 240 pairs barely read the question, which leaves framing "
        "little room to act.")
    return finding("tokens-framing", "Framing shifts the scores",
                   "A positive prompt makes RMs more sensitive to positive-affect tokens, a "
                   "negative prompt to negative-affect tokens.", data, figures, reading,
                   [{"caption": "Each RM under the two prompts",
                     "columns": ["RM", "Spearman, best against worst", f"top {TOP} in common"],
                     "rows": prompt_rows}])


def frequency_finding(figures: list, rm_rows: list, data: str) -> dict:
    up = [f for f in figures if f["lo"] > 0]
    down = [f for f in figures if f["hi"] < 0]
    reading = (
        "The score's slope on Zipf word frequency, valence held fixed (standard deviations "
        "of the score per tenfold frequency; OLS 95% intervals): "
        + "; ".join(f"{f['label']} {f['value']:+.3f} [{f['lo']:+.3f}, {f['hi']:+.3f}]"
                    for f in figures)
        + f". {len(up)} of {len(figures)} are above 0 (frequent words scored higher, as the "
        f"paper finds in almost every RM and prompt) and {len(down)} below 0: at this size "
        "the sign differs between RMs, seeds of the same data included. The sweep covers "
        "every token id of the vocabulary.")
    return finding("tokens-frequency", "Frequent tokens are overvalued",
                   "RMs score frequent words higher than rare ones beyond their sentiment (a "
                   "mere-exposure effect).", data, figures, reading, [])
