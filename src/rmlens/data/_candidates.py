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
from rmlens.data._schema import describe, id_text
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
