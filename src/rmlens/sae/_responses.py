"""The responses a frozen audit's RMs read: their features, texts and the runs' heads.

The features are the audit's own: its runs' RMs are loaded (``load_rm``), and their backbone,
format, ``max_length`` and embedding cache featurize the pairs of ``memorization.parquet``
(``featurize``), so with the cache still warm nothing is encoded again. Every distinct
response vector (a chosen or rejected response with its prompt) counts once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rmlens._errors import InputError
from rmlens.data import to_text
from rmlens.experiment import AuditDir
from rmlens.progress import status

TABLE = "memorization.parquet"


@dataclass
class Responses:
    """The unique responses of an audit's pairs.

    Attributes
    ----------
    x : ndarray of shape (n_responses, d), float32
        Their backbone features (pooled hidden states of prompt and response).
    text, prompt : list of str
        Each response and its prompt, as text.
    model : list of str or None
        The system that wrote each (``chosen_model``/``rejected_model``), where known.
    ids : ndarray of shape (n_pairs,)
        The pairs' ids, in ``memorization.parquet``'s order.
    chosen, rejected : ndarray of shape (n_pairs,), int
        Row of ``x`` of each pair's chosen and rejected response.
    heads : list of HeadRM
        Each finished run's head, in run order (``names``).
    names : list of str
        The runs' folder names.
    backbone : Backbone
        The audit's backbone (its ``tokenizer`` gives ``len_tokens``).
    format : str
        The format its texts were tokenized in (``chat``, ``raw`` or ``pair``).
    n_encoded : int
        Texts the backbone encoded now (the rest came from the embedding cache).
    fingerprint : str
        SHA-1 of the features: the data an SAE was trained on.
    """

    x: np.ndarray
    text: list[str]
    prompt: list[str]
    model: list[Any]
    ids: np.ndarray
    chosen: np.ndarray
    rejected: np.ndarray
    heads: list[Any]
    names: list[str]
    backbone: Any
    format: str
    n_encoded: int
    fingerprint: str

    @property
    def d(self) -> int:
        return int(self.x.shape[1])


def frozen_audit(directory: Path) -> tuple[pd.DataFrame, dict]:
    """The memorization table and record of a frozen audit; an :class:`InputError` for any
    other directory."""
    exp = AuditDir(directory)
    expected = (f"{directory}: not a frozen audit (expected the directory of `rmlens memorize "
                "--mode frozen`: config.json, runs/ and memorization.parquet)")
    if not exp.is_experiment or not (directory / TABLE).is_file():
        raise InputError(expected)
    record = exp.read_record(required=True) or {}
    settings = record.get("audit")
    if not isinstance(settings, dict):
        raise InputError(expected)
    if settings.get("mode", "frozen") != "frozen":
        raise InputError(f"{directory}: an audit of fine-tuned RMs (mode "
                         f"{settings.get('mode')!r}); the SAE lens reads the frozen features "
                         "that the heads of a frozen audit read (`rmlens memorize --mode "
                         "frozen`)")
    table = exp.read_table(TABLE)
    missing = [c for c in ("id", "prompt", "chosen", "rejected") if c not in table.columns]
    if missing:
        raise InputError(f"{directory / TABLE}: columns {missing} are missing (found "
                         f"{list(table.columns)})")
    return table, record


def audit_responses(directory: str | Path, *, quiet: bool = False) -> Responses:
    """The unique responses of a frozen audit, featurized as its runs read them.

    Parameters
    ----------
    directory : str or Path
        The experiment directory of a frozen audit.
    quiet : bool, default=False
        No progress bar or status lines.

    Returns
    -------
    Responses

    Raises
    ------
    InputError
        ``directory`` is not a frozen audit with saved RMs.
    """
    # lazy: torch, transformers, scipy load only when this runs
    from rmlens.backbones import featurize
    from rmlens.hub import load_rm

    # private: an audit's RMs as one stack of heads, the ensemble's own layout
    from rmlens.hub._ensemble import _head_stack, _members

    directory = Path(directory)
    table, _ = frozen_audit(directory)
    if not quiet:
        status("loading the audit's RMs")
    rm = load_rm(directory)
    stack = _head_stack(rm)
    if stack is None:
        raise InputError(f"{directory}: its runs' RMs are not heads on one frozen backbone")
    backbone, heads, cache_dir, fmt = stack
    features = featurize(backbone, table, cache_dir=cache_dir, format=fmt, quiet=quiet)
    both = np.concatenate([features.chosen, features.rejected]).astype(np.float32)  # (2n, d)
    _, first, inverse = np.unique(both, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)  # unique vectors in order of first appearance
    position = np.empty_like(order)
    position[order] = np.arange(len(order))
    rows = position[np.ravel(inverse)]  # (2n,) row of each text's vector
    keep = first[order]
    n = len(table)
    texts = _texts(table["chosen"]) + _texts(table["rejected"])
    prompts = _texts(table["prompt"]) * 2
    models = _column(table, "chosen_model") + _column(table, "rejected_model")
    x = np.ascontiguousarray(both[keep])
    digest = hashlib.sha1(x.tobytes())
    digest.update(f"{x.shape}|{backbone.identity}|{fmt}|{backbone.max_length}".encode())
    names = list(getattr(rm, "names", None) or [str(i) for i in range(len(_members(rm)))])
    return Responses(
        x=x, text=[texts[i] for i in keep], prompt=[prompts[i] for i in keep],
        model=[models[i] for i in keep], ids=table["id"].astype(str).to_numpy(),
        chosen=rows[:n], rejected=rows[n:], heads=list(heads), names=names, backbone=backbone,
        format=fmt, n_encoded=features.n_encoded, fingerprint=digest.hexdigest()[:16],
    )  # fmt: skip


def _texts(values: pd.Series) -> list[str]:
    return [v if isinstance(v, str) else to_text(v) for v in values]


def _column(table: pd.DataFrame, name: str) -> list[Any]:
    if name not in table.columns:
        return [None] * len(table)
    return [None if pd.isna(v) else str(v) for v in table[name]]
