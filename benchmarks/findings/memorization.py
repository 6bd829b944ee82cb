"""``memorization-links``, ``memorization-margin`` and ``memorization-users``: what CM follows
besides memory (group size; the margin, by kind of data), and whether user-specific taste is
memorized (issues 49 and 59; ``benchmarks/findings.py`` runs them)."""

from __future__ import annotations

import datetime
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from findings.common import (
    HH,
    RUNS,
    SQUALITY,
    THIN_SEEDS,
    figure,
    frozen_audit,
    held_out_accuracy,
    interval_texts,
    memorized,
)
from findings.verdicts import judged
from rmlens.data import SynthConfig, load_pairs, synthesize
from rmlens.memorization import cm_links
from rmlens.stats import group_draws, percentile_interval, spearman

OASST_SIZE, OASST_MARGIN = 0.32, 0.53  # CM's Spearman with group size and margin, on OASST


def random_groups(n: int, seed: int = 0, largest: int = 12) -> np.ndarray:
    """Group labels of ``n`` pairs in groups of 1 to ``largest`` pairs (sizes uniform),
    assigned in a random order: a group's size says nothing of its pairs."""
    rng = np.random.default_rng(seed)
    sizes = []
    while sum(sizes) < n:
        sizes.append(int(rng.integers(1, largest + 1)))
    labels = np.repeat(np.arange(len(sizes)), sizes)[:n]
    return rng.permutation(labels)


def thinned(pairs: pd.DataFrame, seed: int, largest: int = 9) -> pd.DataFrame:
    """Each question's pairs cut to a random 1 to ``largest`` of them: groups of related pairs
    (a question's answers, ranked by its annotators) whose sizes nothing in the pairs sets."""
    rng = np.random.default_rng(seed)
    keep = [rows[rng.permutation(len(rows))[: rng.integers(1, min(largest, len(rows)) + 1)]]
            for rows in pairs.groupby("question", sort=True).indices.values()]  # fmt: skip
    return pairs.iloc[np.sort(np.concatenate(keep))].reset_index(drop=True)


def above(fig: dict) -> bool:
    return fig["lo"] > 0



def share_row(name: str, table: pd.DataFrame) -> list[str]:
    return [name, f"{table.cm.mean():.3f}", f"{memorized(table):.0%}", f"{table.tm.mean():.3f}",
            f"{table.tg.mean():.3f}"]  # fmt: skip


def pooled_size_link(tables: list[pd.DataFrame], n_boot: int = 400) -> dict:
    """CM's Spearman with group size over the pairs of several cuts of the same questions,
    each pair with its own cut's group size; the bootstrap draws questions, each with its
    pairs from every cut (the cuts share their questions, so they are not independent)."""
    frame = pd.concat([t.assign(size=t.groupby("group").cm.transform("size")) for t in tables])
    frame = frame[np.isfinite(frame.cm)]
    x, cm = frame["size"].to_numpy(float), frame.cm.to_numpy(float)
    draws = group_draws(frame.group.to_numpy(), n_boot, 0)
    lo, hi = percentile_interval([spearman(x[i], cm[i]) for i in draws])
    return {"spearman": spearman(x, cm), "lo": lo, "hi": hi, "n_pairs": len(frame)}


def size_rows(by_size: list[dict]) -> list[list[str]]:
    return [[b["sizes"], str(b["n_pairs"]), f"{b['mean_cm']:.3f}", f"{b['memorized']:.0%}"]
            for b in by_size if b["n_pairs"]]  # fmt: skip


def squality_pairs() -> pd.DataFrame:
    pairs = load_pairs(SQUALITY)
    # SQuALITY's prompt is a question without its story: a question is one passage's prompt
    pairs["question"] = pairs.passage_id.astype(str) + ": " + pairs.prompt
    return pairs


def memorization_links(work: Path) -> dict:
    squality = squality_pairs()
    by_question = frozen_audit(squality, "question", work / "squality-by-question")
    by_pair = frozen_audit(squality, "id", work / "squality-by-pair")
    thin = {seed: frozen_audit(thinned(squality, seed), "question",
                               work / f"squality-thinned-{seed}") for seed in THIN_SEEDS}
    hh = load_pairs(HH)
    hh["random_group"] = random_groups(len(hh)).astype(str)
    by_random = frozen_audit(hh, "random_group", work / "hh-random-groups")
    # Every link over the data's own dependence unit: the question (SQuALITY), the group (HH)
    links = {"random": cm_links(by_random),
             **{f"thin{seed}": cm_links(table) for seed, table in thin.items()}}  # fmt: skip
    pooled = pooled_size_link(list(thin.values()))
    figures = [
        *(figure(f"thin{seed}_size", f"SQuALITY, each question's pairs cut to 1 to 9 (seed "
                 f"{seed}): CM with group size", links[f"thin{seed}"]["group_size"])
          for seed in THIN_SEEDS),
        figure("thin_size", "the three cuts pooled: CM with group size", pooled, OASST_SIZE),
        figure("random_size", "HH-RLHF in random groups of 1 to 12: CM with group size",
               links["random"]["group_size"]),
    ]  # fmt: skip
    fig = {f["key"]: f for f in figures}
    size_holds = above(fig["thin_size"])
    f = interval_texts(fig, ".2f")
    alone = [b for t in thin.values() for b in cm_links(t)["group_size"]["by_size"]
             if b["sizes"] == "alone"]  # fmt: skip
    n_alone = sum(b["n_pairs"] for b in alone)
    memorized_alone = sum(b["memorized"] * b["n_pairs"] for b in alone) / n_alone
    reading = (
        f"What CM follows through the groups is the method's: a run holds a group out whole, "
        f"so a pair's CM counts what its group-mates teach the RM about it. The same "
        f"{len(squality)} SQuALITY pairs held out with their question's pairs have mean CM "
        f"{by_question.cm.mean():.3f} ({memorized(by_question):.0%} memorized), held out "
        f"alone {by_pair.cm.mean():.3f} ({memorized(by_pair):.0%}). The size of the group "
        f"{'moves CM' if size_holds else 'barely moves it'}: in random groups that share "
        f"nothing, {f['random_size']}; with each question's related pairs cut to a random 1 to "
        f"9, {f['thin_size']} over three cuts, and {memorized_alone:.0%} of the {n_alone} "
        f"pairs left alone in their group are memorized. So the OASST link ({OASST_SIZE}, no "
        f"single pair memorized) is not a law of the audit: it reflects how that data's large "
        f"and small prompt groups differ (a prompt's ranked responses share texts), which "
        f"cannot be tested offline. The margin has its own finding (memorization-margin)."
    )
    thin_rows = [[f"seed {seed}", *row] for seed, table in thin.items()
                 for row in size_rows(cm_links(table)["group_size"]["by_size"])]  # fmt: skip
    return judged({
        "name": "memorization-links",
        "title": "What CM follows besides memory: the size of a pair's group",
        "claim": f"CM rises with the size of a pair's group (seen on OASST pairs grouped by "
        f"prompt: Spearman {OASST_SIZE}).",
        "source": "a user's trial of rmlens on OASST",
        "command": "python benchmarks/findings.py memorization-links",
        "data": f"SQuALITY human-evaluation pairs ({len(squality)} pairs, 100 questions of 20 "
        f"stories, 4 annotators; each question's pairs cut to a random 1 to 9 with seeds "
        f"{', '.join(map(str, THIN_SEEDS))}: {', '.join(str(len(t)) for t in thin.values())} "
        f"pairs); HH-RLHF harmless test pairs ({len(hh)}); frozen MiniLM heads, {RUNS} "
        f"brute-force runs of a 5-fold grouped plan per audit; 95% bootstrap over questions "
        f"(HH: over groups)",
        "figures": figures,
        "headline": ["thin_size", "random_size"],
        "verdict": None,  # by the written rules: verdicts.judged
        "reading": reading,
        "tables": [
            {"caption": "The same SQuALITY pairs, held out with their question's pairs or alone",
             "columns": ["held out", "mean CM", "memorized", "mean TM", "mean TG"],
             "rows": [share_row("with the question's pairs", by_question),
                      share_row("alone", by_pair)]},
            {"caption": "CM by group size: each SQuALITY question's pairs cut to 1 to 9",
             "columns": ["cut", "group", "pairs", "mean CM", "memorized"], "rows": thin_rows},
            {"caption": "CM by group size: HH-RLHF in random groups of 1 to 12",
             "columns": ["group", "pairs", "mean CM", "memorized"],
             "rows": size_rows(links["random"]["group_size"]["by_size"])},
            {"caption": "Held-out accuracy of the audits' RMs (mean over runs)",
             "columns": ["audit", "held-out accuracy"],
             "rows": [[name, f"{held_out_accuracy(work / name)['mean']:.3f}"]
                      for name in ("squality-by-question", "squality-by-pair",
                                   *(f"squality-thinned-{seed}" for seed in THIN_SEEDS),
                                   "hh-random-groups")]},
        ],  # fmt: skip
        "measured": datetime.date.today().isoformat(),
    })


RANKED = "ranked conversations"
RANKED_ABSENT = ("no ranked-conversation pairs on this machine; a reader who has them runs "
                 "python benchmarks/findings.py memorization-margin --ranked FILE")


def memorization_margin(work: Path, ranked: Path | None = None,
                        ranked_group: str = "prompt") -> dict:
    """CM's link with the margin on each kind of data: SQuALITY's ratings (margin: the
    rating difference), grouped by question and each pair alone; and, from ``ranked`` (a
    pairs file whose ``margin`` is the rank gap), ranked conversations grouped by
    ``ranked_group``."""
    squality = squality_pairs()
    by_question = frozen_audit(squality, "question", work / "squality-by-question")
    by_pair = frozen_audit(squality, "id", work / "squality-by-pair")
    figures = [
        figure("question_margin", "ratings (SQuALITY), grouped by question: CM with the "
               "margin", cm_links(by_question)["margin"], OASST_MARGIN),
        figure("pair_margin", "ratings (SQuALITY), each pair its own group: CM with the "
               "margin", cm_links(by_pair.assign(group=by_pair.question))["margin"]),
    ]  # fmt: skip
    audits = ["squality-by-question", "squality-by-pair"]
    if ranked is not None:
        pairs = load_pairs(ranked)
        by_conversation = frozen_audit(pairs, ranked_group, work / "ranked-by-conversation")
        figures.append(figure("ranked_margin", f"ranked conversations ({ranked.name}), "
                              f"grouped by {ranked_group}: CM with the margin",
                              cm_links(by_conversation)["margin"], OASST_MARGIN))  # fmt: skip
        audits.append("ranked-by-conversation")
    f = interval_texts({x["key"]: x for x in figures}, ".2f")
    conflict = by_pair.conflict.fillna(False).astype(bool)
    ranked_text = (f"On ranked conversations ({ranked.name}, the margin the rank gap), "
                   f"{f['ranked_margin']}." if ranked is not None else
                   "Ranked conversations are not measured here: " + RANKED_ABSENT + ".")
    reading = (
        f"The margin is the data's, and which way CM goes with it depends on the kind of "
        f"data. On SQuALITY's ratings (the margin a rating difference) it does not go the "
        f"claimed way: grouped by question CM does not follow it ({f['question_margin']}; TM "
        f"and TG both rise with it); held out alone CM falls with it ({f['pair_margin']}), "
        f"carried by the {conflict.sum()} pairs that another annotator judged the other way "
        f"(mean CM {by_pair.cm[conflict].mean():.3f} against "
        f"{by_pair.cm[~conflict].mean():.3f}). Large-margin pairs are the easy ones there, "
        f"learned and generalized alike; CM goes where the annotators disagree. {ranked_text}"
    )
    found = {
        "name": "memorization-margin",
        "title": "CM and the margin, by kind of data",
        "claim": f"CM rises with a pair's margin: large-margin pairs are memorized most "
        f"(Spearman {OASST_MARGIN} on OASST pairs grouped by prompt).",
        "source": "Verhoeven et al., counterfactual memorization of reward models",
        "command": "python benchmarks/findings.py memorization-margin [--ranked FILE]",
        "data": f"SQuALITY human-evaluation pairs ({len(squality)} pairs, 100 questions, 4 "
        f"annotators, margin = rating difference)"
        + (f"; {ranked.name} ({len(pairs)} ranked pairs, margin = rank gap, grouped by "
           f"{ranked_group})" if ranked is not None else "")
        + f"; frozen MiniLM heads, {RUNS} brute-force runs of a 5-fold grouped plan per "
        f"audit; 95% bootstrap over questions (conversations)",
        "figures": figures,
        "headline": [x["key"] for x in figures if x["key"] != "pair_margin"],
        "verdict": None,  # by the written rules: verdicts.judged
        "reading": reading,
        "tables": [
            {"caption": "SQuALITY held out alone: the pairs another annotator judged the "
             "other way against the rest",
             "columns": ["pairs", "mean CM", "memorized", "mean TM", "mean TG"],
             "rows": [share_row("judged the other way", by_pair[conflict]),
                      share_row("the rest", by_pair[~conflict])]},
            {"caption": "Held-out accuracy of the audits' RMs (mean over runs)",
             "columns": ["audit", "held-out accuracy"],
             "rows": [[name, f"{held_out_accuracy(work / name)['mean']:.3f}"]
                      for name in audits]},
        ],  # fmt: skip
        "measured": datetime.date.today().isoformat(),
    }
    if ranked is None:
        found["not_measured"] = {RANKED: RANKED_ABSENT}
    return judged(found)


def cm_gap(table: pd.DataFrame, mask: np.ndarray, key: str, label: str,
           n_boot: int = 1000) -> dict:
    """Mean CM of the ``mask`` pairs minus the others', with a 95% bootstrap over the
    table's ``group`` units (each drawn with all its pairs)."""
    cm, mask = table.cm.to_numpy(float), np.asarray(mask, bool)
    draws = []
    for i in group_draws(table.group.to_numpy(), n_boot, 0):
        inside, outside = cm[i][mask[i]], cm[i][~mask[i]]
        draws.append(np.nanmean(inside) - np.nanmean(outside) if len(inside) and len(outside)
                     else np.nan)  # fmt: skip
    lo, hi = percentile_interval(draws)
    return {"key": key, "label": label, "value": float(np.nanmean(cm[mask]) - np.nanmean(
        cm[~mask])), "lo": lo, "hi": hi, "n": int(mask.sum()),
        "unit": "mean CM difference", "claimed": None}  # fmt: skip


def opposites(pairs: pd.DataFrame) -> dict[str, list[str]]:
    """Each pair's opposite judgments: the ids of the pairs with its prompt and its two
    responses the other way round."""
    key = pairs.prompt.astype(str) + "\x00" + pairs.chosen.astype(str) + "\x00"
    swapped = pairs.prompt.astype(str) + "\x00" + pairs.rejected.astype(str) + "\x00"
    ids_by_key = pairs.groupby(key + pairs.rejected.astype(str)).id.apply(list).to_dict()
    return {i: ids_by_key.get(k, []) for i, k in zip(pairs.id, swapped + pairs.chosen.astype(str))}


def cm_without_opposites(out: Path, pairs: pd.DataFrame) -> pd.Series:
    """CM of each pair from only the runs that did not train on any of its opposite
    judgments (:func:`opposites`), by id; NaN where those runs give no TM or no TG. A pair
    that another annotator judged the other way can hardly reach TG above 0.5 while that
    judgment is in training: these runs leave that out of its CM."""
    from rmlens.memorization import load_matrices

    m = load_matrices(out)
    row = {i: k for k, i in enumerate(m.ids)}
    p_in, p_out = m.sides()
    allowed = np.ones_like(m.member)
    for i, others in opposites(pairs).items():
        for j in others:
            allowed[row[i]] &= ~m.member[row[j]]
    with warnings.catch_warnings():  # a pair with no run left on a side: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        tm = np.nanmean(np.where(allowed, p_in, np.nan), axis=1)
        tg = np.nanmean(np.where(allowed, p_out, np.nan), axis=1)
    return pd.Series(tm - tg, index=m.ids)


def memorization_users(work: Path) -> dict:
    squality = squality_pairs()
    # 4 annotators: each run trains on two of them (halves), so 6 distinct splits
    by_user = frozen_audit(squality, "user_id", work / "squality-by-annotator", plan="halves")
    by_user["group"] = by_user.question  # the bootstrap's unit: a question's pairs
    conflict = by_user.conflict.fillna(False).to_numpy(bool)
    control = by_user.assign(cm=by_user.id.map(cm_without_opposites(
        work / "squality-by-annotator", squality)))  # fmt: skip
    scored = control.cm.notna().to_numpy()
    synth = synthesize(SynthConfig(n_pairs=2000, n_users=20, seed=0))
    by_synth_user = frozen_audit(synth, "user_id", work / "synthetic-by-user")
    taste = (by_synth_user.mechanism == "user_taste").to_numpy()
    # a taste pair where the user's taste picked the worse response: quality says otherwise
    against = taste & (by_synth_user.quality_chosen < by_synth_user.quality_rejected).to_numpy()
    figures = [
        cm_gap(by_user, conflict, "conflict", "SQuALITY by annotator: pairs another annotator "
               "judged the other way, minus the rest"),
        cm_gap(control[scored], conflict[scored], "conflict_control", "the same, each pair's "
               "CM from the runs that did not train on its opposite judgment"),
        cm_gap(by_synth_user, taste, "taste", "synthetic by user: pairs its user's taste "
               "decided, minus the rest"),
        cm_gap(by_synth_user, against, "taste_against", "synthetic: taste against quality, "
               "minus the rest"),
    ]  # fmt: skip
    fig = {f["key"]: f for f in figures}
    share_conflict = (by_user.category[conflict] == "memorized").mean()
    share_rest = (by_user.category[~conflict] == "memorized").mean()
    lift = conflict[by_user.category == "memorized"].mean() / conflict.mean()
    f = interval_texts(fig, "+.3f")
    reading = (
        f"Held out by annotator, the SQuALITY pairs that another annotator judged the other "
        f"way have mean CM {f['conflict']} above the rest ({share_conflict:.0%} of them "
        f"memorized against {share_rest:.0%}; they are {lift:.1f}x as common among the "
        f"memorized pairs as among all): what one annotator prefers against the others is "
        f"learned when trained on and not predicted from the others, as the claim says. On "
        f"synthetic pairs with a planted, user-specific taste (known by construction), those "
        f"pairs stand out the same way ({f['taste']}), those where the taste picked the worse "
        f"response included ({f['taste_against']}). The SQuALITY figure rests on 4 "
        f"annotators, so each run holds out two of them: the direction is clear, its size is "
        f"that of this data. A pair judged the other way by another annotator can hardly "
        f"reach TG above 0.5 while that opposite judgment is in training, so part of the "
        f"first figure is forced by construction; the control takes each pair's CM from only "
        f"the runs that did not train on its opposite judgment (the same runs, "
        f"{int((conflict & scored).sum())} of the {int(conflict.sum())} pairs left with a TM "
        f"and a TG): {f['conflict_control']}."
    )
    rows = [["SQuALITY by annotator", "another annotator judged the other way",
             *share_cells(by_user, conflict)],
            ["synthetic by user", "decided by its user's taste", *share_cells(by_synth_user,
                                                                             taste)],
            ["synthetic by user", "taste against quality", *share_cells(by_synth_user,
                                                                       against)]]  # fmt: skip
    return judged({
        "name": "memorization-users",
        "title": "Memorized: what one annotator prefers against the others",
        "claim": "User-specific taste is memorized, not generalized: pairs on which annotators "
        "disagree have high CM when the audit holds users out.",
        "source": "Verhoeven et al., counterfactual memorization of reward models",
        "command": "python benchmarks/findings.py memorization-users",
        "data": f"SQuALITY human-evaluation pairs ({len(squality)}, 4 annotators; "
        f"{int(conflict.sum())} judged the other way by another annotator), grouped by "
        f"annotator, {RUNS} runs each on two annotators; synthetic pairs ({len(synth)}, 20 "
        f"users, planted mechanisms), grouped by user, {RUNS} runs of a 5-fold plan; frozen "
        f"MiniLM heads, brute force; 95% bootstrap over questions (SQuALITY) and users "
        f"(synthetic)",
        "figures": figures,
        "headline": ["conflict_control", "conflict"],
        "verdict": None,  # by the written rules: verdicts.judged
        "reading": reading,
        "tables": [
            {"caption": "The pairs set apart against the rest",
             "columns": ["audit", "pairs", "n", "mean CM", "memorized", "mean CM of the rest",
                         "memorized of the rest"], "rows": rows},
            {"caption": "Held-out accuracy of the audits' RMs (mean over runs)",
             "columns": ["audit", "held-out accuracy"],
             "rows": [[name, f"{held_out_accuracy(work / name)['mean']:.3f}"]
                      for name in ("squality-by-annotator", "synthetic-by-user")]},
        ],  # fmt: skip
        "measured": datetime.date.today().isoformat(),
    })


def share_cells(table: pd.DataFrame, mask: np.ndarray) -> list[str]:
    inside, rest = table[mask], table[~mask]
    return [str(len(inside)), f"{inside.cm.mean():.3f}", f"{memorized(inside):.0%}",
            f"{rest.cm.mean():.3f}", f"{memorized(rest):.0%}"]  # fmt: skip
