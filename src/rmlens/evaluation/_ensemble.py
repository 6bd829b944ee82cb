"""Ensembles of RMs, loading what ``--rm`` names, and scoring every member at once.

Members that are explicit heads on one shared backbone are scored from one featurization
(through the embedding cache), so an experiment directory's 25 runs cost one encoding.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rmlens._errors import InputError
from rmlens.backbones import featurize, load_backbone
from rmlens.rewards import ExplicitHeadRM, HeadRM, RewardModel, load_rm


class EnsembleRM:
    """Several RMs scored together; the ensemble's reward is the members' mean reward.

    Parameters
    ----------
    members : list of RewardModel
        Objects with ``score(prompts, responses)``.
    names : list of str, optional
        One per member (default ``"0"``, ``"1"``, ...).
    train_ids : list of set of str, optional
        Ids of the pairs each member was trained on, for in-/out-of-training metrics.
    """

    kind = "ensemble"

    def __init__(self, members: Sequence[Any], *, names=None, train_ids=None):
        if not members:
            raise ValueError("EnsembleRM needs at least one member")
        self.members = list(members)
        self.names = list(names) if names is not None else [str(i) for i in range(len(members))]
        self.train_ids = train_ids

    def score_members(self, prompts: Sequence[Any], responses: Sequence[Any]) -> np.ndarray:
        """Rewards of every member, shape (n_members, n)."""
        return score_texts(self, prompts, responses)

    def score(self, prompts: Sequence[Any], responses: Sequence[Any]) -> np.ndarray:
        """Mean reward over the members, shape (n,)."""
        return self.score_members(prompts, responses).mean(axis=0)

    def score_pairs(self, pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        rc, rr, _ = score_pairs(self, pairs)
        return rc.mean(axis=0), rr.mean(axis=0)


def _head_stack(rm: Any):
    """(backbone, heads, cache_dir) when ``rm`` is explicit heads on one backbone, else None."""
    if isinstance(rm, ExplicitHeadRM):
        return rm.backbone, [rm.head], rm.cache_dir
    if isinstance(rm, EnsembleRM) and all(isinstance(m, ExplicitHeadRM) for m in rm.members):
        first = rm.members[0]
        if all(m.backbone is first.backbone for m in rm.members):
            return first.backbone, [m.head for m in rm.members], first.cache_dir
    return None


def _members(rm: Any) -> list[Any]:
    return rm.members if isinstance(rm, EnsembleRM) else [rm]


def score_texts(
    rm: Any, prompts: Sequence[Any], responses: Sequence[Any], *, quiet: bool = True
) -> np.ndarray:
    """Rewards (n_members, n) of (prompt, response) texts; a single RM has one member.

    Explicit heads go through ``featurize`` and its cache, so a text is encoded once ever.
    """
    stack = _head_stack(rm)
    if stack is not None:
        backbone, heads, cache_dir = stack
        frame = pd.DataFrame(
            {"prompt": list(prompts), "chosen": list(responses), "rejected": list(responses)}
        )
        x = featurize(backbone, frame, cache_dir=cache_dir, quiet=quiet).chosen
        return np.stack([h.score(x) for h in heads]).astype(float)
    rows = [np.asarray(m.score(list(prompts), list(responses)), dtype=float) for m in _members(rm)]
    return np.stack(rows)


def score_pairs(
    rm: Any, pairs: pd.DataFrame, *, quiet: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(r_chosen, r_rejected), each (n_members, n_pairs), and ``kept`` (n_pairs,) bool.

    ``kept`` is False for pairs whose chosen and rejected token ids are identical after
    truncation (known for explicit heads only; True elsewhere).
    """
    stack = _head_stack(rm)
    if stack is not None:
        backbone, heads, cache_dir = stack
        f = featurize(backbone, pairs, cache_dir=cache_dir, quiet=quiet)
        rc = np.stack([h.score(f.chosen) for h in heads]).astype(float)
        rr = np.stack([h.score(f.rejected) for h in heads]).astype(float)
        return rc, rr, np.asarray(f.kept, dtype=bool)
    rcs, rrs = [], []
    for m in _members(rm):
        if hasattr(m, "score_pairs"):
            c, r = m.score_pairs(pairs)
        else:
            c = m.score(list(pairs.prompt), list(pairs.chosen))
            r = m.score(list(pairs.prompt), list(pairs.rejected))
        rcs.append(np.asarray(c, dtype=float))
        rrs.append(np.asarray(r, dtype=float))
    return np.stack(rcs), np.stack(rrs), np.ones(len(pairs), dtype=bool)


def is_experiment_dir(path: Path) -> bool:
    return (path / "config.json").is_file() and (path / "runs").is_dir()


def load_experiment(path: str | Path, *, cache_dir=None) -> EnsembleRM:
    """The saved RMs of an experiment directory's finished runs as one ensemble.

    Every ``runs/<run>/rm`` with a manifest is loaded; explicit heads that name the same
    backbone share one loaded backbone. Members keep their training ids (from the manifests).
    """
    path = Path(path)
    run_dirs = sorted(
        p for p in (path / "runs").iterdir()
        if (p / "rm" / "rm_config.json").is_file() and (p / "manifest.json").is_file()
    )  # fmt: skip
    if not run_dirs:
        raise InputError(
            f"--rm {path}: an experiment directory without saved RMs (expected "
            "runs/<run>/rm/rm_config.json beside runs/<run>/manifest.json)"
        )
    backbones: dict[tuple, Any] = {}
    members, names, train_ids = [], [], []
    for run_dir in run_dirs:
        rm_dir = run_dir / "rm"
        config = json.loads((rm_dir / "rm_config.json").read_text())
        if config.get("kind") == "explicit_head":
            key = (config["backbone"], config.get("max_length"))
            if key not in backbones:
                backbones[key] = load_backbone(config["backbone"], max_length=key[1])
            member = ExplicitHeadRM(backbones[key], HeadRM.load(rm_dir), cache_dir=cache_dir)
        else:
            member = load_rm(rm_dir, cache_dir=cache_dir)
        manifest = json.loads((run_dir / "manifest.json").read_text())
        members.append(member)
        names.append(run_dir.name)
        train_ids.append(set(map(str, manifest.get("train_ids", []))))
    return EnsembleRM(members, names=names, train_ids=train_ids)


_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def load_evaluation_rm(path: str | Path, *, cache_dir=None) -> RewardModel:
    """What ``rmlens evaluate --rm`` accepts: an experiment directory (its runs form an
    ensemble), a saved rmlens RM folder, or a Hugging Face sequence-classification model
    (local folder or hub id)."""
    p = Path(path)
    if p.is_dir() and is_experiment_dir(p):
        return load_experiment(p, cache_dir=cache_dir)
    if not p.exists() and not _HUB_ID.match(str(path)):
        raise InputError(f"--rm {path}: no such file or folder")
    return load_rm(p if p.exists() else str(path), cache_dir=cache_dir)
