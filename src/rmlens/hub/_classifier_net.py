"""A Hugging Face reward model (``*ForSequenceClassification``, whole or a PEFT LoRA adapter
on one) as the explicit net the fine-tuned trainers use, for influence through its weights.

A causal classifier scores a sequence by its ``score`` layer (a linear map without bias) on
the hidden state of its rightmost token that is not ``config.pad_token_id`` (the last token
when it has none): ``ExplicitNet`` with the classifier's body and that layer as its head,
reading each sequence cut after that token (:func:`as_pooled`; a causal model's hidden state
at a position does not depend on later tokens). So the one-checkpoint audit reads an RM
trained elsewhere (TRL's RewardTrainer, whose pad is often the EOS ending every sequence; a
RewardBench model) with rmlens's batches and per-pair gradients, in the format ``rmlens
score`` reads it in, and checks that it scores every pair as the classifier itself does.

An rmlens export that carries its LoRA adapter unmerged (``rmlens_adapter/``, with
``rmlens_training.json``) is read as the RM it was exported from: its base model with the
adapter, and the ``score`` layer plus the recorded offset as the head, so gradients go
through the adapters and head only, as for the rmlens RM folder.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from rmlens._errors import InputError, RmlensWarning
from rmlens.backbones import (
    Backbone,
    check_base,
    default_max_length,
    load_backbone,
    prepare_tokenizer,
    quiet_bars,
)
from rmlens.hub._classifier import classifier_format, format_guess_warning
from rmlens.hub._export import TRAINING_RECORD
from rmlens.rewards import ExplicitNet

AGREE = 1e-3  # largest |reward difference| between the net and the classifier's own scores
# read in bf16, the net agrees with the classifier's fp32 pass to bf16's rounding, a share of
# the rewards' size (bf16 keeps 8 bits: 0.4% a product): below what another pooling moves
AGREE_BF16 = 0.02
# or by a share of the rewards' spread (their standard deviation): a bf16 reading of SmolLM2
# moves rewards by up to a third of it (docs/benchmarks.rst, "bf16 on the matrix units"),
# while another pooling scores other tokens, moving them by several times it
AGREE_BF16_SPREAD = 0.5


def classifier_net(path: Path, *, format: str = "auto", max_length: int | None = None,
                   device: str = "cpu", training: dict | None = None,
                   ) -> tuple[ExplicitNet, Backbone, str, Any]:  # fmt: skip
    """The RM at ``path`` as an ``ExplicitNet`` with its trained tensors set to require
    gradients (a PEFT adapter's LoRA weights and ``score``; every weight of a whole model;
    an rmlens export's LoRA adapter and head), its backbone (tokenizer, length, format),
    what was trained, in words, and the classifier itself (whose own forward pass the net
    must agree with).

    ``training``: the export's ``rmlens_training.json``; its ``adapter`` names the folder
    of the unmerged LoRA adapter, and its ``base`` the model under it. ``format`` auto
    resolves as ``rmlens score`` resolves it, with the same warning when it guesses chat.
    """
    with quiet_bars():
        classifier, trained, source = _load_classifier(path)
        tokenizer = AutoTokenizer.from_pretrained(str(source))
    score = _score_layer(path, classifier)
    limit = max_length or default_max_length(classifier.config, tokenizer)
    prepare_tokenizer(tokenizer)
    fmt, guessed = classifier_format(format, tokenizer, classifier.config)
    if guessed:
        warnings.warn(format_guess_warning(classifier.config), RmlensWarning, stacklevel=2)
    hidden = int(classifier.config.hidden_size)
    offset = reward_offset(classifier.config)
    if training and training.get("adapter"):
        body = _training_adapter(path, training, classifier)
        trained = "its LoRA adapters and head"
    else:
        body = getattr(classifier, classifier.base_model_prefix)
    net = ExplicitNet(body, hidden, "last", causal=True)
    if offset or body is not getattr(classifier, classifier.base_model_prefix):
        with torch.no_grad():  # the head as the RM scored: score(h) + its offset
            net.head.weight.copy_(score.weight)
            net.head.bias.fill_(offset)
    else:
        net.head = score
    backbone = Backbone(name=str(path), identity=str(path), tokenizer=tokenizer, model=body,
                        kind="causal", pooling="last", max_length=int(limit), format=fmt)
    return net.to(device).eval(), backbone, trained, classifier.to(device).eval()


def reward_offset(config: Any) -> float:
    """The constant an rmlens export's ``score`` layer cannot hold (0 for any other RM)."""
    return float(getattr(config, "rmlens_reward_offset", 0.0) or 0.0)


def _no_load_report(record: logging.LogRecord) -> bool:
    return "LOAD REPORT" not in record.getMessage()


def adapter_base(path: Path) -> str | None:
    """The base model a PEFT adapter folder names (``base_model_name_or_path``); None for a
    folder without an adapter; refused in one line when the adapter names none."""
    adapter = Path(path) / "adapter_config.json"
    if not adapter.is_file():
        return None
    base = json.loads(adapter.read_text()).get("base_model_name_or_path")
    if not base:
        raise InputError(f"`rm` {path}: its adapter_config.json names no base model")
    return base


def _load_classifier(path: Path) -> tuple[Any, str, Path | str]:
    """The classifier at ``path`` (whole, or a PEFT adapter on its base), what was trained,
    in words, and where its tokenizer is."""
    load = AutoModelForSequenceClassification.from_pretrained
    base = adapter_base(path)
    if base is None:
        classifier = load(str(path), dtype=torch.float32)
        classifier.requires_grad_(True)
        return classifier, "every weight", path
    from peft import PeftModel

    # the base has no score layer, which the adapter brings (modules_to_save): transformers'
    # load report calling it "newly initialized" is not for the user (a filter, not a level:
    # transformers checks its tensor-parallel plan, and says so, when its level is raised)
    report = logging.getLogger("transformers.modeling_utils")
    report.addFilter(_no_load_report)
    try:
        model = load(base, num_labels=1, dtype=torch.float32)
    finally:
        report.removeFilter(_no_load_report)
    with warnings.catch_warnings():  # peft reads transformers' deprecated checkpointing flag
        warnings.simplefilter("ignore", FutureWarning)
        model = PeftModel.from_pretrained(model, str(path), is_trainable=True)
    source = path if (path / "tokenizer_config.json").is_file() else base
    return model.base_model.model, "its LoRA adapters and score layer", source


def _score_layer(path: Path, classifier: Any) -> torch.nn.Linear:
    score = getattr(classifier, "score", None)
    if score is not None and hasattr(score, "modules_to_save"):  # peft's copy of the head
        score = score.modules_to_save["default"]
    body = getattr(classifier, classifier.base_model_prefix, None)
    if not isinstance(score, torch.nn.Linear) or body is None or score.out_features != 1:
        raise InputError(
            f"`rm` {path}: a {type(classifier).__name__}; the one-checkpoint audit reads a "
            "causal classifier with one reward logit (a `score` layer on the last token)"
        )
    return score


def _training_adapter(path: Path, training: dict, classifier: Any) -> torch.nn.Module:
    """The export's base model with its unmerged LoRA adapter, only the adapter trainable
    (as ``rmlens train`` left it); the embeddings grown to the export's pad token, a row no
    real token reads."""
    from peft import PeftModel

    where = str(path / TRAINING_RECORD)
    base_name = training.get("base")
    if not base_name:
        raise InputError(f"{where}: field 'base' (the model under its adapter) is missing")
    check_base(base_name, where)
    base = load_backbone(base_name, max_length=training.get("max_length"))
    if base.identity != training.get("base_identity"):
        warnings.warn(f"{where}: the base model '{base_name}' differs from the one this RM "
                      "was trained on (files changed)", RmlensWarning, stacklevel=3)  # fmt: skip
    body = base.model
    rows = classifier.get_input_embeddings().num_embeddings
    if body.get_input_embeddings().num_embeddings < rows:
        body.resize_token_embeddings(rows, mean_resizing=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        body = PeftModel.from_pretrained(body, str(path / training["adapter"]))
    for name, param in body.named_parameters():
        param.requires_grad_("lora_" in name)
    return body


def as_pooled(examples: list, pad_id: int | None) -> list:
    """Each sequence of ``examples`` (the fine-tuned trainer's ``Example``) up to the token a
    ``*ForSequenceClassification`` pools: its trailing
    ``pad_id`` tokens dropped (at least one token kept), so the net's last token is the
    classifier's (a pad that doubles as the EOS ending every sequence, as TRL sets it for
    SmolLM2, is read through the token before it). ``pad_id`` None: unchanged, transformers
    reads the last token."""
    if pad_id is None:
        return examples
    return [_trimmed(ex, int(pad_id)) for ex in examples]


def _trimmed(ex, pad: int):
    ends = []
    for seq in ex.seqs:
        end = len(seq)
        while end > 1 and seq[end - 1] == pad:
            end -= 1
        ends.append(end)
    seqs = [s[:e] for s, e in zip(ex.seqs, ends)]
    response = [m[:e] for m, e in zip(ex.response, ends)]
    shared = max(0, min(ex.shared, min(ends) - 1))
    return dataclasses.replace(ex, seqs=seqs, response=response, shared=shared)


def check_agreement(path: Path, rewards: np.ndarray, reference: np.ndarray,
                    precision: str = "fp32") -> None:
    """Refuse when the net does not score the pairs as the classifier does (a pad token
    inside its sequences, another pooling): its influence would be of another model. The
    net read in bf16 (``precision``) may differ by :data:`AGREE_BF16` of the largest reward or
    :data:`AGREE_BF16_SPREAD` of the rewards' standard deviation, whichever is larger."""
    usable = np.isfinite(rewards) & np.isfinite(reference)
    gap = float(np.max(np.abs(rewards[usable] - reference[usable]), initial=0.0))
    bound = AGREE
    if precision == "bf16" and usable.any():
        bound += max(AGREE_BF16 * float(np.max(np.abs(reference[usable]))),
                     AGREE_BF16_SPREAD * float(np.std(reference[usable])))  # fmt: skip
    if gap > bound:
        raise InputError(
            f"`rm` {path}: read by its last token that is not padding, it scores the pairs up "
            f"to {gap:.3g} away from its own forward pass (another pooling, or an adapter "
            "that is not the one merged into it); the one-checkpoint audit reads causal "
            "classifiers that score the last real token"
        )
