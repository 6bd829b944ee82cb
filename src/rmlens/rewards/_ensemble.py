"""Ensembles: several reward models (seeds, data subsets, audit runs) scored together."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import rmlens
from rmlens._errors import InputError
from rmlens._io import write_json


class EnsembleRM:
    """Mean reward of several RMs, with their spread and disagreement.

    Parameters
    ----------
    members : sequence of reward models
        Objects with ``score(prompts, responses)`` and ``score_pairs(pairs)``.

    Examples
    --------
    >>> ens = EnsembleRM.from_experiment("rmlens-demo")           # doctest: +SKIP
    >>> ens.disagreement(pairs).sort_values("margin_std").tail()  # doctest: +SKIP
    """

    kind = "ensemble"

    def __init__(self, members: Sequence[Any]):
        if not members:
            raise ValueError("The 'members' parameter of EnsembleRM must be non-empty. Got [].")
        self.members = list(members)

    def score_all(self, prompts: Sequence[Any], responses: Sequence[Any]) -> np.ndarray:
        """Rewards (n_members, n) of every member."""
        return np.stack([m.score(prompts, responses) for m in self.members])

    def score(self, prompts: Sequence[Any], responses: Sequence[Any]) -> np.ndarray:
        """Mean reward (n,) over the members."""
        return self.score_all(prompts, responses).mean(0)

    def score_pairs_all(self, pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """(r_chosen, r_rejected) of every member, each (n_members, n_pairs)."""
        scored = [m.score_pairs(pairs) for m in self.members]
        return np.stack([s[0] for s in scored]), np.stack([s[1] for s in scored])

    def score_pairs(self, pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        r_c, r_r = self.score_pairs_all(pairs)
        return r_c.mean(0), r_r.mean(0)

    def disagreement(self, pairs: pd.DataFrame) -> pd.DataFrame:
        """Per pair: mean rewards, margin mean and std over members, mean P(chosen), and the
        share of members whose preferred response is the ensemble's (1 = all agree).

        Returns
        -------
        DataFrame with ``id`` (when ``pairs`` has one), ``r_chosen``, ``r_rejected``,
        ``margin_mean``, ``margin_std``, ``p_chosen``, ``agreement``.
        """
        r_c, r_r = self.score_pairs_all(pairs)
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
        """Each member in ``path/members/<i>``, then ``rm_config.json`` naming them."""
        path = Path(path)
        names = []
        for i, member in enumerate(self.members):
            if not hasattr(member, "save"):
                raise TypeError(f"ensemble member {i} ({type(member).__name__}) cannot be saved")
            name = f"members/{i:03d}"
            member.save(path / name)
            names.append(name)
        write_json(
            {"kind": self.kind, "version": rmlens.__version__, "members": names},
            path / "rm_config.json",
        )
        return path

    @classmethod
    def from_experiment(cls, out: str | Path, **kwargs) -> EnsembleRM:
        """The RMs of an audit's runs (``DIR/runs/<run>/rm``) as one ensemble."""
        from rmlens.rewards._saved import load_rm

        folders = sorted(p.parent for p in Path(out).glob("runs/*/rm/rm_config.json"))
        if not folders:
            raise InputError(f"{out}: no saved run RMs (expected runs/<run>/rm/rm_config.json)")
        return cls([load_rm(f, **kwargs) for f in folders])


def load_ensemble(path: str | Path, saved: dict, **kwargs) -> EnsembleRM:
    from rmlens.rewards._saved import load_rm

    return EnsembleRM([load_rm(Path(path) / name, **kwargs) for name in saved["members"]])
