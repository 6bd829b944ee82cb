"""Saved reward models: a folder that loads back as an object with ``score(prompts, responses)``.

A folder holds ``rm_config.json`` (``kind`` and what that kind needs) and the weights as
safetensors. Kinds: ``explicit_head`` (backbone name + head on pooled hidden states); a folder
with a Hugging Face ``*ForSequenceClassification`` config loads as a pretrained scorer.
Other kinds (fine-tuned, implicit) register a loader in ``LOADERS``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd
import torch

from rmlens._errors import InputError
from rmlens._io import write_json
from rmlens.backbones import Backbone, collate, encode_ids, encode_pair_text, featurize
from rmlens.backbones import load_backbone as _load_backbone
from rmlens.rewards._head import HeadRM


class RewardModel(Protocol):
    def score(self, prompts: Sequence[Any], responses: Sequence[Any]) -> np.ndarray: ...

    def score_pairs(self, pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]: ...


class ExplicitHeadRM:
    """r(x, y) = head(pool(backbone(x, y))): a frozen backbone with a trained head."""

    kind = "explicit_head"

    def __init__(self, backbone: Backbone, head: HeadRM, *, cache_dir=None):
        self.backbone, self.head, self.cache_dir = backbone, head, cache_dir

    def score(self, prompts: Sequence[Any], responses: Sequence[Any]) -> np.ndarray:
        """Rewards (n,) of (prompt, response) pairs."""
        bb = self.backbone
        seqs = [encode_pair_text(bb.tokenizer, p, r, bb.max_length) for p, r in
                zip(prompts, responses)]
        return self.head.score(encode_ids(bb, seqs, quiet=True))

    def score_pairs(self, pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """(r_chosen, r_rejected), each (n_pairs,), through the embedding cache."""
        f = featurize(self.backbone, pairs, cache_dir=self.cache_dir, quiet=True)
        return self.head.score(f.chosen), self.head.score(f.rejected)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        self.head.save(path)
        bb = self.backbone
        write_json({"kind": self.kind, "backbone": bb.name, "pooling": bb.pooling,
                    "max_length": bb.max_length, "identity": bb.identity}, path / "rm_config.json")
        return path


class SequenceClassifierRM:
    """A Hugging Face ``AutoModelForSequenceClassification`` reward model.

    The score is ``logits[:, index]`` (0 by default, as most RM model cards say).
    """

    kind = "sequence_classification"

    def __init__(self, model, tokenizer, *, index: int = 0, max_length: int = 2048,
                 batch_size: int = 8):
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
            logits = self.model(input_ids=ids, attention_mask=mask).logits
            out[rows] = logits[:, self.index].float().numpy()
        return out

    def score_pairs(self, pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        return self.score(pairs.prompt, pairs.chosen), self.score(pairs.prompt, pairs.rejected)


def _load_explicit(path: Path, config: dict, **kwargs) -> ExplicitHeadRM:
    backbone = _load_backbone(config["backbone"], max_length=config.get("max_length"))
    return ExplicitHeadRM(backbone, HeadRM.load(path), cache_dir=kwargs.get("cache_dir"))


def load_sequence_classifier(
    model: str, *, index: int = 0, trust_remote_code: bool = False
) -> SequenceClassifierRM:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model, trust_remote_code=trust_remote_code)
    net = AutoModelForSequenceClassification.from_pretrained(
        model, trust_remote_code=trust_remote_code
    )
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return SequenceClassifierRM(net, tok, index=index)


def _load_tuned(path: Path, config: dict, **kwargs) -> RewardModel:
    from rmlens.rewards._tuned import load_tuned

    return load_tuned(path, config, **kwargs)


def _load_ensemble(path: Path, config: dict, **kwargs) -> RewardModel:
    from rmlens.rewards._ensemble import load_ensemble

    return load_ensemble(path, config, **kwargs)


LOADERS: dict[str, Callable[..., RewardModel]] = {
    "explicit_head": _load_explicit,
    "explicit_finetuned": _load_tuned,
    "implicit": _load_tuned,
    "ensemble": _load_ensemble,
}


def load_rm(path: str | Path, **kwargs) -> RewardModel:
    """Load a saved rmlens RM folder, or a Hugging Face sequence-classification RM.

    Parameters
    ----------
    path : str or Path
        A folder written by ``save`` (holds ``rm_config.json``), or a local path / hub id of
        an ``AutoModelForSequenceClassification`` model.
    """
    path = Path(path)
    config_file = path / "rm_config.json"
    if config_file.exists():
        config = json.loads(config_file.read_text())
        kind = config.get("kind")
        if kind not in LOADERS:
            raise InputError(f"{config_file}: unknown 'kind' {kind!r}; known: {sorted(LOADERS)}")
        return LOADERS[kind](path, config, **kwargs)
    try:
        return load_sequence_classifier(str(path), index=kwargs.get("index", 0))
    except (OSError, ValueError) as err:
        raise InputError(
            f"{path}: neither an rmlens RM folder (no rm_config.json) nor a sequence-"
            f"classification model ({err})"
        ) from err
