"""A Hugging Face sequence-classification model as an rmlens RM: TRL's ``RewardTrainer``
output, a RewardBench model, an rmlens export read back.

It reads a (prompt, response) as transformers does: the tokens of the RM's format, scored
by the classifier's own forward pass (the last real token of a causal model, the first of an
encoder).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

from rmlens._errors import RmlensWarning
from rmlens.backbones import (
    collate,
    default_max_length,
    encode_pair_text,
    prepare_tokenizer,
    resolve_format,
)
from rmlens.rewards import RewardModel


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
    max_length : int, optional
        Tokens kept of each (prompt, response) text: default the ``rmlens_max_length`` an
        rmlens export records, else the model's limit.
    batch_size : int, default=8
        Texts per forward pass.
    format : {"auto", "chat", "raw", "pair"}, default="auto"
        How a (prompt, response) becomes tokens; auto: the ``rmlens_format`` an rmlens
        export records in ``config.json``, else chat when the tokenizer has a template (a
        guess for a causal LM, warned about at the first score), else raw (a causal LM) or
        pair (an encoder). Train with TRL on conversations: chat; on
        text: raw.
    offset : float, default=0.0
        Added to every reward: an rmlens export's ``rmlens_reward_offset``, the part of the
        reward its ``score`` layer (no bias) cannot hold.
    """

    kind = "sequence_classification"

    def __init__(self, model, tokenizer, *, index: int = 0, max_length: int | None = None,
                 batch_size: int = 8, offset: float = 0.0, format: str = "auto"):
        n_labels = int(getattr(model.config, "num_labels", 1))
        if not 0 <= index < n_labels:
            raise ValueError(f"score index {index} is outside the model's {n_labels} logits")
        self.model, self.tokenizer = model.eval(), tokenizer
        config = model.config
        if max_length is None:
            max_length = getattr(config, "rmlens_max_length", None) or default_max_length(
                config, tokenizer
            )
        self.index, self.max_length, self.batch_size = index, int(max_length), batch_size
        prepare_tokenizer(tokenizer)
        self.format, self.format_guessed = classifier_format(format, tokenizer, config)
        self.offset = float(offset)

    @property
    def encoding(self) -> tuple[Any, int, str]:
        return self.tokenizer, self.max_length, self.format

    @torch.inference_mode()
    def score(self, prompts: Sequence[Any], responses: Sequence[Any]) -> np.ndarray:
        if self.format_guessed:
            self.format_guessed = False
            warnings.warn(format_guess_warning(self.model.config), RmlensWarning, stacklevel=2)
        seqs = [encode_pair_text(self.tokenizer, p, r, self.max_length, format=self.format)
                for p, r in zip(prompts, responses)]  # fmt: skip
        own = getattr(self.model.config, "pad_token_id", None)  # what its pooling skips
        pad = next((p for p in (own, self.tokenizer.pad_token_id) if p is not None), 0)
        out = np.empty(len(seqs), dtype=np.float32)
        order = np.argsort([-len(s) for s in seqs], kind="stable")
        for start in range(0, len(seqs), self.batch_size):
            rows = order[start : start + self.batch_size]
            ids, mask = collate([seqs[i] for i in rows], pad)
            device = next(self.model.parameters()).device
            logits = self.model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
            out[rows] = logits[:, self.index].float().cpu().numpy()
        return out if not self.offset else out.astype(np.float64) + self.offset


def classifier_kind(config) -> str:
    """``encoder`` for a sequence classifier on a masked-LM architecture (BERT, RoBERTa,
    DeBERTa: it reads the first token), else ``causal`` (it reads the last real one)."""
    return "encoder" if getattr(config, "model_type", None) in MODEL_FOR_MASKED_LM_MAPPING_NAMES \
        else "causal"


def classifier_format(format: str | None, tokenizer: Any, config: Any) -> tuple[str, bool]:
    """How a sequence classifier reads a (prompt, response), and whether that was a guess.

    ``format`` auto (or None) takes the ``rmlens_format`` an rmlens export records in
    ``config.json``, else auto's pick (``resolve_format``); picking chat for a causal LM
    because its tokenizer has a template is a guess (TRL records no format, and an RM it
    trained on text reads raw), for :func:`format_guess_warning`.
    """
    if format in (None, "auto"):
        format = getattr(config, "rmlens_format", None) or "auto"
    kind = classifier_kind(config)
    resolved = resolve_format(format, tokenizer, kind)
    return resolved, format == "auto" and resolved == "chat" and kind == "causal"


def format_guess_warning(config: Any) -> str:
    """The one warning of a classifier whose format auto guessed chat (``classifier_format``),
    wherever it is read: scored, or audited through its weights."""
    name = getattr(config, "_name_or_path", "") or "the RM"
    return (f"`format` auto: {name} records no format it was trained with (an rmlens export "
            "records rmlens_format; TRL records none); guessed chat, as its tokenizer has a "
            "chat template. An RM trained on plain text (TRL's non-conversational data) needs "
            "`format` raw")
