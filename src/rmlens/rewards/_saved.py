"""Reward models that score texts, and the folders they are saved in.

A folder holds ``rm_config.json`` (``kind`` and what that kind needs) and the weights as
safetensors. This module has the frozen-backbone explicit RM (kind ``explicit_head``: a
backbone name + a head on its pooled hidden states) and the Hugging Face
sequence-classification scorer; fine-tuned RMs are in ``_tuned``, ensembles in
``_ensemble``. ``rmlens.rewards.load_rm`` (``_load``) loads every kind.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from rmlens._errors import InputError
from rmlens._io import write_json
from rmlens.backbones import Backbone, featurize
from rmlens.backbones._featurize import collate, encode_ids
from rmlens.backbones._tokenize import encode_pair_text
from rmlens.rewards._head import HeadRM

RM_CONFIG = "rm_config.json"


class RewardModel:
    """The one interface of every RM that scores texts: texts in, rewards out.

    Implemented by the frozen head RM (:class:`ExplicitHeadRM`), the fine-tuned RM
    (``TunedRM``), the ensemble (``EnsembleRM``) and :class:`SequenceClassifierRM`; what
    ``load_rm`` returns and what every command that scores uses.

    ``score(prompts, responses)``
        Rewards (n,) of (prompt, response) pairs.
    ``score_pairs(pairs)``
        ``(r_chosen, r_rejected)``, each (n_pairs,), of a pair table (``prompt``,
        ``chosen``, ``rejected``); by default two calls of ``score``, which a kind may
        answer faster (one featurization, shared prompts).
    ``kind``
        The ``rm_config.json`` kind it is saved as.
    """

    kind = ""

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
    """

    kind = "explicit_head"

    def __init__(self, backbone: Backbone, head: HeadRM, *, cache_dir=None):
        self.backbone, self.head, self.cache_dir = backbone, head, cache_dir

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
        seqs = [encode_pair_text(bb.tokenizer, p, r, bb.max_length) for p, r in
                zip(prompts, responses)]
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
        f = featurize(self.backbone, pairs, cache_dir=self.cache_dir, quiet=True)
        return self.head.score_features(f.chosen), self.head.score_features(f.rejected)

    def save(self, path: str | Path) -> Path:
        """Write the head and ``rm_config.json`` (backbone name, pooling, max_length) into
        the folder ``path``, which :func:`~rmlens.load_rm` reads back.

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
        write_json({"kind": self.kind, "backbone": bb.name, "pooling": bb.pooling,
                    "max_length": bb.max_length, "identity": bb.identity}, path / RM_CONFIG)
        return path


class SequenceClassifierRM(RewardModel):
    """A Hugging Face ``AutoModelForSequenceClassification`` reward model.

    The score is ``logits[:, index]`` (0 by default, as most RM model cards say).

    Parameters
    ----------
    model : PreTrainedModel
        The sequence-classification model.
    tokenizer : PreTrainedTokenizerBase
        Its tokenizer.
    index : int, default=0
        Which logit is the reward (a ValueError when the model has no such logit).
    max_length : int, default=2048
        Tokens kept of each (prompt, response) text.
    batch_size : int, default=8
        Texts per forward pass.
    """

    kind = "sequence_classification"

    def __init__(self, model, tokenizer, *, index: int = 0, max_length: int = 2048,
                 batch_size: int = 8):
        n_labels = int(getattr(model.config, "num_labels", 1))
        if not 0 <= index < n_labels:
            raise ValueError(f"score index {index} is outside the model's {n_labels} logits")
        self.model, self.tokenizer = model.eval(), tokenizer
        self.index, self.max_length, self.batch_size = index, max_length, batch_size

    @torch.inference_mode()
    def score(self, prompts: Sequence[Any], responses: Sequence[Any]) -> np.ndarray:
        seqs = [encode_pair_text(self.tokenizer, p, r, self.max_length) for p, r in
                zip(prompts, responses)]
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        out = np.empty(len(seqs), dtype=np.float32)
        order = np.argsort([-len(s) for s in seqs], kind="stable")
        for start in range(0, len(seqs), self.batch_size):
            rows = order[start : start + self.batch_size]
            ids, mask = collate([seqs[i] for i in rows], pad)
            device = next(self.model.parameters()).device
            logits = self.model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
            out[rows] = logits[:, self.index].float().cpu().numpy()
        return out


def save_head_rm(
    path: str | Path,
    backbone: str,
    weight: Any = None,
    bias: Any = None,
    *,
    head: HeadRM | None = None,
    pooling: str = "last",
    extra: dict | None = None,
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

    Returns
    -------
    Path
    """
    from rmlens import __version__

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if head is None:
        if weight is None:
            raise ValueError("save_head_rm needs `weight` (and `bias`) or `head`, a HeadRM")
        head = linear_head_rm(weight, bias)
    head.save(path)
    config = {"kind": ExplicitHeadRM.kind, "backbone": backbone, "pooling": pooling,
              "rmlens_version": __version__, **(extra or {}),
              "head": "HeadRM", "hidden_size": int(head.head_.mean.numel())}
    write_json(config, path / RM_CONFIG)
    return path


def linear_head_rm(weight: Any, bias: Any = None) -> HeadRM:
    """A fitted linear ``HeadRM`` computing r = w . h + b (no feature scaling)."""
    from rmlens.rewards._head import RewardHead
    from rmlens.rewards.frozen import HeadConfig

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
    (``{"weight": [...], "bias": [b]}``, the packaged presets).
    """
    from safetensors.torch import load_file

    if (folder / "head_config.json").is_file():
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
    return head
