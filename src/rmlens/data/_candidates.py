"""Best-of-n candidate pools: prompts with many responses each and a known gold reward.

A pool has one record per candidate: ``prompt_id``, ``prompt``, ``response``, ``gold``
(higher = better), and any attributes. :func:`generate_candidates` draws one from the
synthetic world of ``data synth`` (same template bank, so RMs trained on synthetic pairs
score it in-distribution): the gold reward is the planted quality level (0-3, which fixes
the sound tips: three at level 3, one at level 2, none below), and the shortcuts are
recorded beside it (``padding``, ``signature``, ``taste``) but never counted in ``gold``.
:func:`load_candidates` reads and checks a pool from a file.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pandas as pd

from rmlens._errors import InputError
from rmlens.data._candidates_config import CandidatesConfig
from rmlens.data._loaders import read_records
from rmlens.data._schema import describe, id_text, to_text
from rmlens.data._synth import _Writer
from rmlens.data._synth_bank import FILLER, MODELS, TASTES, TOPICS
from rmlens.data._validate import Problems, number_problem, text_problem

QUALITY_MIX = (0.15, 0.25, 0.30, 0.30)  # chances of levels 0 (bad) .. 3 (good)
SOUND_TIPS = (0, 0, 1, 3)  # sound tips of the prompt's own topic at each level
POOL_FIELDS = ("prompt_id", "prompt", "response", "gold")


def shortcut_chances(share: float, policy: str) -> np.ndarray:
    """Chance of a shortcut at each quality level 0..3, ``share`` of the pool on average.

    ``independent``: ``share`` at every level. ``anticorrelated``: proportional to
    3.5 - level (a bad answer seven times as likely as a good one), capped at 1.

    Examples
    --------
    >>> shortcut_chances(0.3, "anticorrelated").round(3).tolist()
    [0.6, 0.429, 0.257, 0.086]
    """
    if policy == "independent":
        return np.full(4, float(share))
    tilt = 3.5 - np.arange(4)
    return np.minimum(1.0, share * tilt / float(np.dot(QUALITY_MIX, tilt)))


def taste_sentences(n_users: int) -> list[str]:
    """Both closing sentences of every taste the first ``n_users`` annotators hold."""
    pairs = dict.fromkeys(TASTES[u % len(TASTES)] for u in range(n_users))
    return [sentence for pair in pairs for sentence in pair]


def generate_candidates(config: CandidatesConfig | None = None) -> pd.DataFrame:
    """Draw a candidate pool of the synthetic world with its gold reward.

    Parameters
    ----------
    config : CandidatesConfig, optional
        Size, seed and policy; defaults to ``CandidatesConfig()`` (200 prompts x 256).

    Returns
    -------
    pandas.DataFrame
        One row per candidate: ``prompt_id``, ``candidate_id``, ``prompt``, ``response``,
        ``gold`` (the quality level, 0-3), ``quality``, ``sound_tips``, ``topic``,
        ``model``, ``padding`` (filler sentences appended), ``signature`` (opens with the
        signature phrase), ``taste`` (the closing taste sentence, "" for none).
        Deterministic for a seed.

    Examples
    --------
    >>> pool = generate_candidates(CandidatesConfig(n_prompts=3, n_responses=4))
    >>> pool.shape[0], pool["prompt_id"].nunique(), sorted(set(pool["gold"]) - {0, 1, 2, 3})
    (12, 3, [])
    """
    config = (config or CandidatesConfig()).check()
    rng = random.Random(f"candidates-{config.seed}")
    writer = _Writer(rng)
    tastes = taste_sentences(config.n_users)
    chances = {
        name: shortcut_chances(getattr(config, name), config.policy)
        for name in ("padding", "signature", "taste")
    }
    others = [m for m in MODELS if m != config.signature_model]
    width = max(4, len(str(config.n_prompts - 1)))
    rows = []
    for i in range(config.n_prompts):
        topic = rng.randrange(len(TOPICS))
        prompt_id = f"c{config.seed}-{i:0{width}d}"
        prompt = writer.prompt(topic)
        for j in range(config.n_responses):
            level = rng.choices(range(4), weights=QUALITY_MIX)[0]
            text = writer.response(topic, level)
            padding = rng.randint(2, 4) if rng.random() < chances["padding"][level] else 0
            if padding:
                text = f"{text} {' '.join(rng.sample(FILLER, padding))}"
            taste = rng.choice(tastes) if rng.random() < chances["taste"][level] else ""
            if taste:
                text = f"{text} {taste}"
            signature = rng.random() < chances["signature"][level]
            if signature:
                text = f"{config.signature_phrase} {text}"
            model = config.signature_model if signature else rng.choice(others)
            rows.append((prompt_id, f"{prompt_id}-{j:03d}", prompt, text, float(level), level,
                         SOUND_TIPS[level], TOPICS[topic][0], model, padding, signature, taste))
    columns = ["prompt_id", "candidate_id", "prompt", "response", "gold", "quality",
               "sound_tips", "topic", "model", "padding", "signature", "taste"]  # fmt: skip
    return pd.DataFrame.from_records(rows, columns=columns)


def load_candidates(source: Any) -> pd.DataFrame:
    """Read a candidate pool and check it: every record has ``prompt_id``, ``prompt``,
    ``response`` and a finite number ``gold``; a prompt id keeps one prompt; every prompt
    has the same number N >= 2 of candidates.

    Parameters
    ----------
    source : path, DataFrame or list of dicts
        A file that ``data candidates`` wrote (or any JSONL, JSON, CSV or Parquet of that
        layout).

    Returns
    -------
    pandas.DataFrame
        The records in file order, ``gold`` as float, ``prompt_id`` as text.

    Raises
    ------
    InputError
        At the first problem, naming the file, the line or row and the field.
    """
    report = Problems(collect=False)
    records = read_records(source, report=report, text_fields=("prompt_id", "prompt", "response"))
    missing = [f for f in POOL_FIELDS if f not in records.fields]
    if missing:
        raise InputError(
            f"{records.name}: not a candidate pool: no field {', '.join(map(repr, missing))} "
            f"(a pool needs {', '.join(POOL_FIELDS)}; found {', '.join(records.fields) or 'none'})"
        )
    prompts: dict[str, tuple[Any, str]] = {}
    for i, row in enumerate(records.rows):
        where = records.where(i)
        pid = id_text(row.get("prompt_id"))
        if pid is None:
            got = describe(row.get("prompt_id"))
            report(f"{where}: 'prompt_id' must be a non-empty id, got {got}")
        for name in ("prompt", "response"):
            problem = text_problem(row.get(name))
            if problem:
                report(f"{where}: '{name}' {problem}")
        gold, problem = number_problem(row.get("gold"))
        if problem:
            report(f"{where}: 'gold' {problem}")
        row["prompt_id"], row["gold"] = pid, gold
        first = prompts.setdefault(pid, (row["prompt"], where))
        if first[0] != row["prompt"]:
            report(f"{where}: prompt_id {pid!r} has another 'prompt' than on {first[1]}")
    frame = pd.DataFrame.from_records(records.rows)
    sizes = frame.groupby("prompt_id", sort=False).size()
    if sizes.nunique() > 1:
        raise InputError(
            f"{records.name}: prompt_id {sizes.idxmin()!r} has {sizes.min()} candidates but "
            f"{sizes.idxmax()!r} has {sizes.max()}: best-of-n needs the same number N of "
            "candidates for every prompt"
        )
    if sizes.iloc[0] < 2:
        raise InputError(f"{records.name}: every prompt has one candidate; best-of-n needs "
                         "N >= 2 candidates per prompt")  # fmt: skip
    return frame


def candidates_from_pairs(
    pairs: pd.DataFrame,
    gold,
    *,
    n_responses: int | None = None,
    holdout: float = 0.5,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A pool from real pairs with a gold RM's reward, and the gold-labelled training pairs.

    Gao et al. (2023)'s synthetic-gold setup on real data: a stronger RM stands in for the
    human, the proxies are trained on pairs it labels, and best-of-n is read off prompts the
    proxies never saw. Each prompt's distinct responses (chosen and rejected, in order of
    first appearance) are its candidates; a ``holdout`` share of the prompts with at least N
    of them (seeded) forms the pool (their first N), and every pair of the other prompts is
    relabelled by gold (the higher gold reward is chosen, ``margin`` the gold difference).

    Parameters
    ----------
    pairs : DataFrame
        The canonical pair table (``load_pairs``).
    gold : callable
        ``gold(prompts, responses) -> rewards (n,)``: the gold RM's ``score``.
    n_responses : int, optional
        N (default: the most common number of distinct responses per prompt, at least 2).
    holdout : float, default=0.5
        Share of the eligible prompts held out as the pool, in (0, 1].
    seed : int, default=0

    Returns
    -------
    pool : DataFrame
        ``prompt_id, candidate_id, prompt, response, gold`` (and ``model`` when the pairs
        name their models).
    gold_pairs : DataFrame
        The pairs of the other prompts, relabelled: ``gold_chosen`` and ``gold_rejected``
        added, ``flipped`` where gold disagrees with the original label. Empty when
        ``holdout`` is 1.
    """
    key = pairs["prompt"].map(to_text)
    texts: dict[str, dict[str, Any]] = {}  # prompt -> its prompt and {text: (response, model)}
    models = {"chosen": pairs.get("chosen_model"), "rejected": pairs.get("rejected_model")}
    for i, (k, prompt) in enumerate(zip(key, pairs["prompt"])):
        entry = texts.setdefault(k, {"prompt": prompt, "responses": {}})
        for side in ("chosen", "rejected"):
            model = models[side].iloc[i] if models[side] is not None else None
            response = pairs[side].iloc[i]
            entry["responses"].setdefault(to_text(response), (response, model))
    counts = pd.Series({k: len(v["responses"]) for k, v in texts.items()})
    if n_responses is None:
        common = counts[counts >= 2].value_counts()
        if common.empty:
            raise InputError("no prompt has two distinct responses: a pool needs N >= 2 "
                             "candidates per prompt")  # fmt: skip
        n_responses = int(common.index[common.to_numpy() == common.max()].max())
    eligible = [k for k in texts if counts[k] >= n_responses]
    if not eligible:
        raise InputError(f"no prompt has {n_responses} distinct responses (`n_responses`); the "
                         f"most any has is {counts.max()}")  # fmt: skip
    rng = np.random.default_rng(seed)
    n_pool = max(1, int(round(holdout * len(eligible))))
    pooled = set(rng.permutation(len(eligible))[:n_pool].tolist())
    pool_keys = [k for j, k in enumerate(eligible) if j in pooled]
    rows = []
    for j, k in enumerate(pool_keys):
        entry = texts[k]
        for c, (response, model) in enumerate(list(entry["responses"].values())[:n_responses]):
            rows.append({"prompt_id": f"p{j:04d}", "candidate_id": f"p{j:04d}-{c:03d}",
                         "prompt": entry["prompt"], "response": response, "model": model})
    pool = pd.DataFrame(rows)
    if pool["model"].isna().all():
        pool = pool.drop(columns=["model"])
    train = pairs[~key.isin(set(pool_keys))].reset_index(drop=True)
    prompts = list(pool["prompt"]) + list(train["prompt"]) * 2
    responses = list(pool["response"]) + list(train["chosen"]) + list(train["rejected"])
    keys = [(to_text(p), to_text(r)) for p, r in zip(prompts, responses)]
    first = {k: i for i, k in reversed(list(enumerate(keys)))}  # each text scored once
    unique = list(first.values())
    scored = np.asarray(gold([prompts[i] for i in unique], [responses[i] for i in unique]),
                        dtype=float)  # fmt: skip
    by_key = dict(zip((keys[i] for i in unique), scored))
    scores = np.array([by_key[k] for k in keys])
    pool["gold"] = scores[: len(pool)]
    g_c, g_r = np.split(scores[len(pool):], 2)
    return pool, _relabel(train, g_c, g_r)


def candidates_from_policy(
    prompts: list,
    write,
    gold,
    *,
    n_responses: int = 64,
    holdout: float = 0.5,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A pool of a policy's own samples with a gold RM's reward, and gold-labelled pairs of
    its samples to other prompts: Gao et al. (2023)'s synthetic-gold protocol.

    The prompts are shuffled (seeded); a ``holdout`` share of them forms the pool, each with
    ``n_responses`` samples, and every other prompt gets two samples, one pair, its chosen
    side the one gold scores higher (``margin`` the gold difference). Pairs whose two samples
    are the same text are left out.

    Parameters
    ----------
    prompts : list
        Distinct prompts (text, transcripts or chat messages).
    write : callable
        ``write(prompts, n) -> list of n responses per prompt``: the policy's sampler
        (``rmlens.backbones.sample_responses``).
    gold : callable
        ``gold(prompts, responses) -> rewards (n,)``: the gold RM's ``score``.
    n_responses : int, default=64
    holdout : float, default=0.5
        Share of the prompts in the pool, in (0, 1].
    seed : int, default=0

    Returns
    -------
    pool : DataFrame
        ``prompt_id, candidate_id, prompt, response, gold``.
    gold_pairs : DataFrame
        ``prompt, chosen, rejected, gold_chosen, gold_rejected, margin``.
    """
    order = np.random.default_rng(seed).permutation(len(prompts))
    n_pool = max(1, int(round(holdout * len(prompts))))
    pooled = [prompts[i] for i in order[:n_pool]]
    others = [prompts[i] for i in order[n_pool:]]
    samples = write(pooled, n_responses)
    pair_samples = write(others, 2) if others else []
    rows = [{"prompt_id": f"p{j:04d}", "candidate_id": f"p{j:04d}-{c:03d}", "prompt": prompt,
             "response": response}
            for j, (prompt, responses) in enumerate(zip(pooled, samples))
            for c, response in enumerate(responses)]  # fmt: skip
    pool = pd.DataFrame(rows)
    kept = [(p, a, b) for p, (a, b) in zip(others, pair_samples) if a != b]
    prompts_all = list(pool["prompt"]) + [p for p, _, _ in kept] * 2
    responses = list(pool["response"]) + [a for _, a, _ in kept] + [b for _, _, b in kept]
    scores = np.asarray(gold(prompts_all, responses), dtype=float)
    pool["gold"] = scores[: len(pool)]
    g_a, g_b = np.split(scores[len(pool):], 2)
    pairs = pd.DataFrame({"prompt": [p for p, _, _ in kept], "chosen": [a for _, a, _ in kept],
                          "rejected": [b for _, _, b in kept]})  # fmt: skip
    columns = ["prompt", "chosen", "rejected", "gold_chosen", "gold_rejected", "margin"]
    if not kept:
        return pool, pd.DataFrame(columns=columns)
    out = _relabel(pairs, g_a, g_b)
    return pool, out[columns]


def _relabel(pairs: pd.DataFrame, g_chosen: np.ndarray, g_rejected: np.ndarray) -> pd.DataFrame:
    """The pairs with the side gold prefers as chosen (ties keep the original label)."""
    out = pairs.copy()
    flip = g_rejected > g_chosen
    for a, b in (("chosen", "rejected"), ("chosen_model", "rejected_model")):
        if a in out and b in out:
            out.loc[flip, [a, b]] = out.loc[flip, [b, a]].to_numpy()
    out["gold_chosen"] = np.where(flip, g_rejected, g_chosen)
    out["gold_rejected"] = np.where(flip, g_chosen, g_rejected)
    out["margin"] = out["gold_chosen"] - out["gold_rejected"]
    out["flipped"] = flip
    return out
