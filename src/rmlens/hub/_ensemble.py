"""Ensembles: several reward models (seeds, data subsets, audit runs) scored together.

The ensemble's reward is the members' mean reward. Per pair it also gives every member's
rewards, the spread of their margins, their disagreement and, when the members know the
pairs they were trained on (an experiment directory's runs), which members saw each pair.

Members that are explicit heads on one shared backbone are scored from one featurization
(through the embedding cache), so an experiment directory's 25 runs cost one encoding.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import rmlens
from rmlens._errors import InputError
from rmlens._io import write_json
from rmlens.backbones import encode_pair_text, encode_texts, featurize
from rmlens.experiment import AuditDir
from rmlens.hub._folders import SINGLE_LOADERS, read_rm_config, rm_options
from rmlens.rewards import RM_CONFIG, ExplicitHeadRM, RewardModel


class EnsembleRM(RewardModel):
    """Several RMs scored together; the ensemble's reward is the members' mean reward.

    Parameters
    ----------
    members : sequence of reward models
        Objects with ``score(prompts, responses)`` (``score_pairs(pairs)`` is used when
        present), such as what :func:`load_rm` returns.
    names : sequence of str, optional
        One per member (default ``"0"``, ``"1"``, ...); an experiment's run names.
    train_ids : sequence of sets of str, optional
        Ids of the pairs each member was trained on (from an audit run's manifest), for
        in-training vs held-out metrics. None when unknown.
    val_ids : sequence of sets of str, optional
        Ids of each member's validation pairs (an audit run's early stopping looked at them):
        neither trained on nor held out.

    Attributes
    ----------
    members : list
    names : list of str
    train_ids : list of set of str, or None
    val_ids : list of set of str, or None

    Examples
    --------
    >>> from rmlens.rewards import load_rm
    >>> ens = load_rm("rmlens-demo")                              # doctest: +SKIP
    >>> ens.disagreement(pairs).sort_values("margin_std").tail()  # doctest: +SKIP
    """

    kind = "ensemble"

    def __init__(
        self,
        members: Sequence[Any],
        *,
        names: Sequence[str] | None = None,
        train_ids: Sequence[Iterable[str]] | None = None,
        val_ids: Sequence[Iterable[str]] | None = None,
    ):
        members = list(members)
        if not members:
            raise ValueError("The 'members' parameter of EnsembleRM must be a non-empty "
                             "sequence of reward models. Got [].")
        names = [str(n) for n in names] if names is not None else [str(i) for i in
                                                                     range(len(members))]
        if len(names) != len(members):
            raise ValueError(f"The 'names' parameter of EnsembleRM must have one name per "
                             f"member ({len(members)}). Got {len(names)}.")
        train_ids, val_ids = (
            _per_member(name, ids, len(members))
            for name, ids in (("train_ids", train_ids), ("val_ids", val_ids))
        )
        self.members, self.names, self.train_ids, self.val_ids = members, names, train_ids, val_ids

    def __len__(self) -> int:
        return len(self.members)

    @property
    def format(self) -> str | None:
        """The members' format (chat, raw or pair); ``"mixed"`` when they differ."""
        found = {getattr(m, "format", None) for m in self.members}
        return found.pop() if len(found) == 1 else "mixed"

    @property
    def encoding(self) -> tuple[Any, int, str] | None:
        """The first member's tokenization (``truncation`` counts what it cuts)."""
        return getattr(self.members[0], "encoding", None)

    def score_members(
        self, prompts: Sequence[Any], responses: Sequence[Any], *, quiet: bool = True
    ) -> np.ndarray:
        """Rewards of every member, shape (n_members, n).

        Parameters
        ----------
        prompts, responses : sequence of str or of conversations
            One prompt and one response per reward.
        quiet : bool, default=True
            No progress bar.

        Returns
        -------
        ndarray of shape (n_members, n)
            Each member's rewards.
        """
        return member_scores(self, prompts, responses, quiet=quiet)

    def score(self, prompts: Sequence[Any], responses: Sequence[Any]) -> np.ndarray:
        """Mean reward over the members, shape (n,).

        Parameters
        ----------
        prompts, responses : sequence of str or of conversations
            One prompt and one response per reward.

        Returns
        -------
        ndarray of shape (n,)
            The ensemble's rewards.
        """
        return self.score_members(prompts, responses).mean(axis=0)

    def score_std(self, prompts: Sequence[Any], responses: Sequence[Any]) -> np.ndarray:
        """Standard deviation of the members' rewards, shape (n,).

        Parameters
        ----------
        prompts, responses : sequence of str or of conversations
            One prompt and one response per reward.

        Returns
        -------
        ndarray of shape (n,)
            The std (ddof=0) over members of each reward.
        """
        return self.score_members(prompts, responses).std(axis=0)

    def score_pairs_members(
        self, pairs: pd.DataFrame, *, quiet: bool = True
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(r_chosen, r_rejected), each (n_members, n_pairs), and ``kept`` (n_pairs,).

        Parameters
        ----------
        pairs : DataFrame
            A pair table with ``prompt``, ``chosen`` and ``rejected``.
        quiet : bool, default=True
            No progress bar.

        Returns
        -------
        r_chosen, r_rejected : ndarray of shape (n_members, n_pairs)
            Each member's rewards of the chosen and of the rejected responses.
        kept : ndarray of shape (n_pairs,)
            Which pairs were scored (see ``member_pair_scores``).
        """
        return member_pair_scores(self, pairs, quiet=quiet)

    def score_pairs(self, pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Mean (r_chosen, r_rejected) over the members, each (n_pairs,).

        Parameters
        ----------
        pairs : DataFrame
            A pair table with ``prompt``, ``chosen`` and ``rejected``.

        Returns
        -------
        r_chosen, r_rejected : ndarray of shape (n_pairs,)
            The members' mean rewards.
        """
        r_c, r_r, _ = self.score_pairs_members(pairs)
        return r_c.mean(axis=0), r_r.mean(axis=0)

    def membership(self, ids: Sequence[Any]) -> np.ndarray | None:
        """(n_members, n_pairs) bool: member m was trained on pair i. None when unknown.

        Parameters
        ----------
        ids : sequence
            Pair ids (compared as strings).

        Returns
        -------
        ndarray of shape (n_members, n_pairs), bool, or None
            None when the members' training ids are unknown.
        """
        if self.train_ids is None:
            return None
        ids = [str(i) for i in ids]
        return np.array([[i in train for i in ids] for train in self.train_ids], dtype=bool)

    def validation(self, ids: Sequence[Any]) -> np.ndarray:
        """(n_members, n_pairs) bool: pair i was one of member m's validation pairs.

        Parameters
        ----------
        ids : sequence
            Pair ids (compared as strings).

        Returns
        -------
        ndarray of shape (n_members, n_pairs), bool
            All False when the validation ids are unknown.
        """
        ids = [str(i) for i in ids]
        if self.val_ids is None:
            return np.zeros((len(self.members), len(ids)), dtype=bool)
        return np.array([[i in val for i in ids] for val in self.val_ids], dtype=bool)

    def disagreement(self, pairs: pd.DataFrame) -> pd.DataFrame:
        """Per pair: mean rewards, margin mean and std over members, mean P(chosen), and the
        share of members whose preferred response is the ensemble's (1 = all agree).

        Parameters
        ----------
        pairs : DataFrame
            A pair table with ``prompt``, ``chosen`` and ``rejected`` (and ``id``).

        Returns
        -------
        DataFrame
            ``id`` (when ``pairs`` has one), ``r_chosen``, ``r_rejected``, ``margin_mean``,
            ``margin_std``, ``p_chosen``, ``agreement``.
        """
        r_c, r_r, _ = self.score_pairs_members(pairs)
        margin = r_c - r_r  # (n_members, n_pairs)
        mean = margin.mean(0)
        agree = (np.sign(margin) == np.sign(mean)[None]).mean(0)
        table = pd.DataFrame(
            {
                "r_chosen": r_c.mean(0),
                "r_rejected": r_r.mean(0),
                "margin_mean": mean,
                "margin_std": margin.std(0),
                "p_chosen": (1 / (1 + np.exp(-margin))).mean(0),  # mean of sigmoids
                "agreement": agree,
            }
        )
        if "id" in pairs:
            table.insert(0, "id", pairs["id"].to_numpy())
        return table

    def save(self, path: str | Path) -> Path:
        """Each member in ``path/members/<i>``, then ``rm_config.json`` naming them (and
        ``train_ids.json`` when the members know their training ids).

        Parameters
        ----------
        path : str or Path
            The folder.

        Returns
        -------
        Path
            ``path``; a member that cannot be saved is a TypeError.
        """
        path = Path(path)
        folders = []
        for i, member in enumerate(self.members):
            if not hasattr(member, "save"):
                raise TypeError(f"ensemble member {i} ({type(member).__name__}) cannot be saved")
            folder = f"members/{i:03d}"
            member.save(path / folder)
            folders.append(folder)
        if self.train_ids is not None:
            write_json([sorted(t) for t in self.train_ids], path / "train_ids.json")
        write_json(
            {"kind": self.kind, "version": rmlens.__version__, "members": folders,
             "names": self.names},
            path / RM_CONFIG,
        )
        return path

    @classmethod
    def from_experiment(cls, out: str | Path, **kwargs) -> EnsembleRM:
        """The RMs of an experiment directory's runs: ``load_rm(out, **kwargs)``.

        Parameters
        ----------
        out : str or Path
            The experiment directory.
        **kwargs
            Passed to :func:`~rmlens.load_rm` (``device``, ``cache_dir``, ...).

        Returns
        -------
        EnsembleRM
            One member per finished run.
        """
        path = Path(out)
        if not AuditDir(path).is_experiment:
            raise InputError(f"{path}: not an experiment directory (expected config.json and "
                             "runs/)")
        options = rm_options(**kwargs)

        def load(folder: Path) -> RewardModel:  # an RM folder by its kind, as load_rm does
            config = read_rm_config(folder)
            if config["kind"] == "ensemble":
                return ensemble_folder(folder, config, load)
            return SINGLE_LOADERS[config["kind"]](folder, config, **options)

        return load(path) if (path / RM_CONFIG).is_file() else experiment_ensemble(path, load)


def ensemble_folder(path: Path, config: dict, load: Callable[[Path], Any]) -> EnsembleRM:
    """An ``ensemble`` RM folder (:meth:`EnsembleRM.save`): its members, each loaded by
    ``load``."""
    members = config.get("members")
    if not isinstance(members, list) or not members or not all(
        isinstance(m, str) for m in members
    ):
        raise InputError(f"{path / RM_CONFIG}: field 'members' must be a non-empty list of "
                         f"member folders, got {members!r}")
    names = config.get("names") or [Path(m).name for m in members]
    train_ids = None
    if (path / "train_ids.json").is_file():
        train_ids = json.loads((path / "train_ids.json").read_text())
    return EnsembleRM([load(path / m) for m in members], names=names,
                      train_ids=train_ids)


def experiment_ensemble(path: Path, load: Callable[[Path], Any]) -> EnsembleRM:
    """Each finished run's saved RM (``runs/<run>/rm/``) as one ensemble member, named by
    its run folder and knowing the pairs its run trained on and validated with; ``load``
    loads a run's ``rm/`` folder."""
    exp = AuditDir(path)
    runs = [r for r in exp.run_numbers()
            if exp.run_done(r) and (exp.run_dir(r) / "rm" / RM_CONFIG).is_file()]  # fmt: skip
    if not runs:
        raise InputError(
            f"{path}: an experiment directory without saved RMs (expected "
            f"runs/<run>/rm/{RM_CONFIG} beside runs/<run>/manifest.json)"
        )
    members, names, train_ids, val_ids = [], [], [], []
    for run in runs:
        manifest = exp.manifest(run)
        members.append(load(exp.run_dir(run) / "rm"))
        names.append(exp.run_dir(run).name)
        train_ids.append(manifest.get("train_ids", []))
        val_ids.append(manifest.get("val_ids", []))
    return EnsembleRM(members, names=names, train_ids=train_ids, val_ids=val_ids)


def _head_stack(rm: Any):
    """(backbone, heads, cache_dir, format) when ``rm`` is explicit heads on one backbone and
    format, else None."""
    if isinstance(rm, ExplicitHeadRM):
        return rm.backbone, [rm.head], rm.cache_dir, rm.format
    if isinstance(rm, EnsembleRM) and all(isinstance(m, ExplicitHeadRM) for m in rm.members):
        first = rm.members[0]
        if all(m.backbone is first.backbone and m.format == first.format for m in rm.members):
            return first.backbone, [m.head for m in rm.members], first.cache_dir, first.format
    return None


def _members(rm: Any) -> list[Any]:
    return rm.members if isinstance(rm, EnsembleRM) else [rm]


def member_scores(
    rm: Any, prompts: Sequence[Any], responses: Sequence[Any], *, quiet: bool = True,
    features: dict | None = None,
) -> np.ndarray:  # fmt: skip
    """Rewards of (prompt, response) texts by each member of an RM.

    A single RM is one member. Explicit heads go through the embedding cache, so a text is
    encoded once ever.

    Parameters
    ----------
    rm : RewardModel
        An RM; an :class:`EnsembleRM` scores once per member.
    prompts, responses : sequence of str or list of chat messages
        The texts, (n,) each.
    quiet : bool, default=True
        No progress lines.
    features : dict or None, default=None
        A dict kept by the caller: it keeps these texts' features in memory per backbone,
        so that other RMs on the same backbone and texts skip even the tokenizing.

    Returns
    -------
    ndarray of shape (n_members, n)
    """
    stack = _head_stack(rm)
    if stack is not None:
        backbone, heads, cache_dir, fmt = stack
        key = (backbone.identity, backbone.pooling, backbone.max_length, fmt)
        features = {} if features is None else features
        if key not in features:
            seqs = [encode_pair_text(backbone.tokenizer, p, r, backbone.max_length, format=fmt)
                    for p, r in zip(prompts, responses)]  # fmt: skip
            features[key] = encode_texts(backbone, seqs, cache_dir=cache_dir, quiet=quiet,
                                         format=fmt)[0]  # fmt: skip
        x = features[key]
        return np.stack([h.score_features(x) for h in heads]).astype(float)
    rows = [np.asarray(m.score(list(prompts), list(responses)), dtype=float) for m in _members(rm)]
    return np.stack(rows)


def member_pair_scores(
    rm: Any, pairs: pd.DataFrame, *, quiet: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rewards of both responses of each pair by each member of an RM.

    A single RM is one member.

    Parameters
    ----------
    rm : RewardModel
        An RM; an :class:`EnsembleRM` scores once per member.
    pairs : DataFrame
        The pair table (``prompt``, ``chosen``, ``rejected``).
    quiet : bool, default=True
        No progress lines.

    Returns
    -------
    r_chosen, r_rejected : ndarray of shape (n_members, n_pairs)
    kept : ndarray of shape (n_pairs,), bool
        False for pairs whose chosen and rejected token ids are identical after truncation
        (known for explicit heads; True elsewhere).
    """
    stack = _head_stack(rm)
    if stack is not None:
        backbone, heads, cache_dir, fmt = stack
        f = featurize(backbone, pairs, cache_dir=cache_dir, quiet=quiet, format=fmt)
        rc = np.stack([h.score_features(f.chosen) for h in heads]).astype(float)
        rr = np.stack([h.score_features(f.rejected) for h in heads]).astype(float)
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


def _per_member(name: str, ids, n_members: int) -> list[set[str]] | None:
    if ids is None:
        return None
    sets = [set(map(str, group)) for group in ids]
    if len(sets) != n_members:
        raise ValueError(f"The '{name}' parameter of EnsembleRM must have one set per member "
                         f"({n_members}). Got {len(sets)}.")
    return sets
