"""Reward models that score texts: the one interface, and the frozen-backbone explicit RM.

Each RM saves itself to a folder holding ``rm_config.json`` (``kind`` and what that kind
needs) and the weights as safetensors. This module has the frozen-backbone explicit RM
(kind ``explicit_head``: a backbone name + a head on its pooled hidden states); fine-tuned
RMs are in ``_tuned``. ``rmlens.hub.load_rm`` loads every kind, and the RMs made elsewhere
(ensembles, Hugging Face sequence classifiers).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from safetensors.torch import load_file

from rmlens import __version__
from rmlens._errors import InputError
from rmlens._io import write_json
from rmlens.backbones import (
    RESOLVED,
    Backbone,
    encode_ids,
    encode_pair_text,
    featurize,
    pairs_truncation,
    portable_name,
    resolve_format,
)
from rmlens.rewards._config import HeadConfig
from rmlens.rewards._head import HeadRM, RewardHead

RM_CONFIG = "rm_config.json"


class RewardModel:
    """The one interface of every RM that scores texts: texts in, rewards out.

    Implemented by the frozen head RM (:class:`ExplicitHeadRM`), the fine-tuned RM
    (``TunedRM``), the ensemble and the Hugging Face classifier (``rmlens.hub``); what
    ``load_rm`` returns and what every command that scores uses.

    ``score(prompts, responses)``
        Rewards (n,) of (prompt, response) pairs.
    ``score_pairs(pairs)``
        ``(r_chosen, r_rejected)``, each (n_pairs,), of a pair table (``prompt``,
        ``chosen``, ``rejected``); by default two calls of ``score``, which a kind may
        answer faster (one featurization, shared prompts).
    ``kind``
        The ``rm_config.json`` kind it is saved as.
    ``format``
        How it tokenizes a (prompt, response): ``chat``, ``raw`` or ``pair``
        (``rmlens.backbones._tokenize``), None where it scores texts its own way.
    ``truncation(pairs)``
        What its ``max_length`` cuts from a pair table (None where unknown).
    """

    kind = ""
    format: str | None = None

    @property
    def encoding(self) -> tuple[Any, int, str] | None:
        """(tokenizer, max_length, format) it tokenizes with; None for an RM that scores
        texts its own way."""
        return None

    def truncation(self, pairs: pd.DataFrame) -> dict | None:
        """What truncation to its ``max_length`` cuts from ``pairs`` when this RM scores them.

        Parameters
        ----------
        pairs : DataFrame
            ``prompt``, ``chosen`` and ``rejected`` of the pairs to score.

        Returns
        -------
        dict or None
            ``rmlens.backbones._formats.truncation_summary`` of the pairs as this RM
            tokenizes them; None when the RM does not say how it tokenizes.
        """
        if self.encoding is None:
            return None
        tokenizer, max_length, fmt = self.encoding
        return pairs_truncation(tokenizer, pairs, max_length, format=fmt)

    def score(self, prompts: Sequence[Any], responses: Sequence[Any]) -> np.ndarray:
        """Rewards of (prompt, response) pairs.

        Parameters
        ----------
        prompts, responses : sequence of str or of conversations
            One prompt and one response per reward, of equal length n.

        Returns
        -------
        ndarray of shape (n,)
            The rewards.
        """
        raise NotImplementedError

    def score_pairs(self, pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Rewards of both responses of every pair.

        Parameters
        ----------
        pairs : DataFrame
            A pair table with ``prompt``, ``chosen`` and ``rejected``.

        Returns
        -------
        r_chosen, r_rejected : ndarray of shape (n_pairs,)
            The rewards of the chosen and of the rejected responses.
        """
        return self.score(pairs.prompt, pairs.chosen), self.score(pairs.prompt, pairs.rejected)


class ExplicitHeadRM(RewardModel):
    """r(x, y) = head(pool(backbone(x, y))): a frozen backbone with a trained head.

    Parameters
    ----------
    backbone : Backbone
        The frozen backbone (tokenizer, model, pooling, ``max_length``).
    head : HeadRM
        The fitted head on the backbone's pooled features.
    cache_dir : path, optional
        Embedding cache that :meth:`score_pairs` reads and fills.
    format : {"chat", "raw", "pair"}, optional
        The format its head was trained on (``rm_config.json``'s ``format``); default the
        head's own record (``read_head``), else the backbone's.
    """

    kind = "explicit_head"

    def __init__(self, backbone: Backbone, head: HeadRM, *, cache_dir=None,
                 format: str | None = None):  # fmt: skip
        self.backbone, self.head, self.cache_dir = backbone, head, cache_dir
        fmt = format or getattr(head, "format_", None) or backbone.format
        self.format = resolve_format(fmt, backbone.tokenizer, backbone.kind)

    @property
    def encoding(self) -> tuple[Any, int, str]:
        return self.backbone.tokenizer, self.backbone.max_length, self.format

    def score(self, prompts: Sequence[Any], responses: Sequence[Any]) -> np.ndarray:
        """Rewards (n,) of (prompt, response) pairs.

        Parameters
        ----------
        prompts, responses : sequence of str or of conversations
            One prompt and one response per reward.

        Returns
        -------
        ndarray of shape (n,)
            The head's rewards of the pairs' features.
        """
        bb = self.backbone
        seqs = [encode_pair_text(bb.tokenizer, p, r, bb.max_length, format=self.format)
                for p, r in zip(prompts, responses)]  # fmt: skip
        return self.head.score_features(encode_ids(bb, seqs, quiet=True))

    def score_pairs(self, pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """(r_chosen, r_rejected), each (n_pairs,), through the embedding cache.

        Parameters
        ----------
        pairs : DataFrame
            A pair table with ``prompt``, ``chosen`` and ``rejected``.

        Returns
        -------
        r_chosen, r_rejected : ndarray of shape (n_pairs,)
            The rewards of the chosen and of the rejected responses.
        """
        f = featurize(self.backbone, pairs, cache_dir=self.cache_dir, quiet=True,
                      format=self.format)  # fmt: skip
        return self.head.score_features(f.chosen), self.head.score_features(f.rejected)

    def save(self, path: str | Path) -> Path:
        """Write the head and ``rm_config.json`` (backbone name, pooling, max_length,
        format) into the folder ``path``, which :func:`~rmlens.load_rm` reads back.

        Parameters
        ----------
        path : str or Path
            The folder.

        Returns
        -------
        Path
            ``path``.
        """
        path = Path(path)
        self.head.save(path)
        bb = self.backbone
        write_json({"kind": self.kind, "backbone": portable_name(bb.name), "pooling": bb.pooling,
                    "max_length": bb.max_length, "format": self.format,
                    "identity": bb.identity}, path / RM_CONFIG)  # fmt: skip
        return path


def save_head_rm(
    path: str | Path,
    backbone: str,
    weight: Any = None,
    bias: Any = None,
    *,
    head: HeadRM | None = None,
    pooling: str = "last",
    extra: dict | None = None,
    format: str | None = None,
) -> Path:
    """Save an explicit RM (a backbone name + a head) as a folder that ``load_rm`` reads.

    Parameters
    ----------
    path : str or Path
        Folder to write ``rm_config.json`` and the head into.
    backbone : str
        Backbone preset, local path or hub id, as ``load_backbone`` takes it.
    weight : array-like of shape (d,) or (1, d), optional
        Linear head weights ``w`` (r = w . h + b), saved as a linear ``HeadRM``.
    bias : float, optional
    head : HeadRM, optional
        A fitted :class:`HeadRM` instead of ``weight``/``bias`` (linear or MLP, feature
        standardization included).
    pooling : {"last", "mean"}, default="last"
        How the backbone's hidden states are pooled: last real token or mean.
    extra : dict, optional
        More keys for ``rm_config.json`` (training data, seed, metrics...).
    format : {"chat", "raw", "pair"}, optional
        The format the head's features were made in, recorded so the RM scores the same
        way when loaded; default: what the backbone resolves ``auto`` to.

    Returns
    -------
    Path
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if head is None:
        if weight is None:
            raise ValueError("save_head_rm needs `weight` (and `bias`) or `head`, a HeadRM")
        head = linear_head_rm(weight, bias)
    head.save(path)
    config = {"kind": ExplicitHeadRM.kind, "backbone": portable_name(backbone), "pooling": pooling,
              "rmlens_version": __version__, **({"format": format} if format else {}),
              **(extra or {}),
              "head": "HeadRM", "hidden_size": int(head.head_.mean.numel())}
    write_json(config, path / RM_CONFIG)
    return path


def linear_head_rm(weight: Any, bias: Any = None) -> HeadRM:
    """A fitted linear ``HeadRM`` computing r = w . h + b (no feature scaling)."""
    w = torch.as_tensor(np.asarray(weight, dtype=np.float32)).reshape(1, -1)  # (1, d)
    b = torch.as_tensor(np.asarray(0.0 if bias is None else bias, np.float32)).reshape(1)
    rm = HeadRM(HeadConfig(head="linear"))
    module = RewardHead(w.shape[1], rm.config)
    with torch.no_grad():
        module.net.weight.copy_(w)
        module.net.bias.copy_(b)
    rm.head_ = module.eval()
    return rm


def read_head(folder: Path, backbone: Backbone) -> HeadRM:
    """The head saved in ``folder``, checked against the backbone's hidden size.

    Reads ``head_config.json`` + ``head.safetensors`` (``HeadRM.save``), a bare linear
    ``head.safetensors`` (keys ``weight`` (1, d) and ``bias`` (1,)), or ``head.json``
    (``{"weight": [...], "bias": [b]}``, the packaged presets). The ``format`` that
    ``rm_config.json`` records (the head's features' format) is kept as ``head.format_``,
    which :class:`ExplicitHeadRM` scores with.

    Parameters
    ----------
    folder : Path
        The RM folder.
    backbone : Backbone
        The loaded backbone whose features the head reads.

    Returns
    -------
    HeadRM
        The fitted head.
    """
    if (folder / "head_config.json").is_file():
        needed_file(folder, "head.safetensors", "the weights of the head its head_config.json "
                    "describes")
        head = HeadRM.load(folder)
    elif (folder / "head.safetensors").is_file():
        state = load_file(str(folder / "head.safetensors"))
        if "weight" not in state:
            raise InputError(f"{folder / 'head.safetensors'}: expected keys 'weight' (1, d) and "
                             f"'bias' (1,), found {sorted(state)}")
        head = linear_head_rm(state["weight"].numpy(), state.get("bias", torch.zeros(1)).numpy())
    elif (folder / "head.json").is_file():
        saved = json.loads((folder / "head.json").read_text())
        head = linear_head_rm(saved["weight"], np.asarray(saved["bias"]).reshape(-1)[0])
    else:
        raise InputError(f"{folder}: expected head.safetensors (or head_config.json from "
                         f"HeadRM.save) beside {RM_CONFIG}, found neither")
    dim = int(head.head_.mean.numel())
    if dim != backbone.hidden_size:
        raise InputError(f"{folder}: the head takes {dim} features but backbone "
                         f"{backbone.name!r} gives {backbone.hidden_size}")
    head.format_ = recorded_format(folder)
    return head


def needed_file(folder: Path, name: str, what: str) -> Path:
    """``folder / name``; an RM folder without it is refused in one line (not a traceback
    from the reader that would open it)."""
    path = folder / name
    if not path.exists():
        raise InputError(f"{folder}: {name} is missing ({what}); pass the whole RM folder as "
                         "it was saved")
    return path


def recorded_format(folder: Path) -> str | None:
    """The ``format`` an RM folder's ``rm_config.json`` records (None when it records
    none: an RM saved before formats were recorded scores as its backbone resolves auto)."""
    file = folder / RM_CONFIG
    if not file.is_file():
        return None
    fmt = json.loads(file.read_text()).get("format")
    if fmt is not None and fmt not in RESOLVED:
        raise InputError(f"{file}: field 'format' must be one of {', '.join(RESOLVED)}, "
                         f"got {fmt!r}")
    return fmt
