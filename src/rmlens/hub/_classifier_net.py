"""A Hugging Face reward model (``*ForSequenceClassification``, whole or a PEFT LoRA adapter
on one) as the explicit net the fine-tuned trainers use, for influence through its weights.

A causal classifier scores a sequence by its ``score`` layer (a linear map without bias) on
the hidden state of its last token: ``ExplicitNet`` with the classifier's body and that
layer as its head. So the one-checkpoint audit reads an RM trained elsewhere (TRL's
RewardTrainer, a RewardBench model) with rmlens's batches and per-pair gradients, and checks
that it scores every pair as the classifier itself does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from rmlens._errors import InputError
from rmlens.backbones import Backbone, default_max_length, prepare_tokenizer, resolve_format
from rmlens.rewards import ExplicitNet

AGREE = 1e-3  # largest |reward difference| between the net and the classifier's own scores


def classifier_net(path: Path, *, format: str = "auto", max_length: int | None = None,
                   device: str = "cpu") -> tuple[ExplicitNet, Backbone, str, Any]:  # fmt: skip
    """The RM at ``path`` as an ``ExplicitNet`` with its trained tensors set to require
    gradients (a PEFT adapter's LoRA weights and ``score``; every weight of a whole model),
    its backbone (tokenizer, length, format), what was trained, in words, and the
    classifier itself (whose own forward pass the net must agree with)."""
    load = AutoModelForSequenceClassification.from_pretrained
    adapter = path / "adapter_config.json"
    if adapter.is_file():
        from peft import PeftModel

        base = json.loads(adapter.read_text()).get("base_model_name_or_path")
        if not base:
            raise InputError(f"`rm` {path}: its adapter_config.json names no base model")
        model = load(base, num_labels=1, dtype=torch.float32)
        model = PeftModel.from_pretrained(model, str(path), is_trainable=True)
        classifier = model.base_model.model
        trained = "its LoRA adapters and score layer"
        source = path if (path / "tokenizer_config.json").is_file() else base
    else:
        classifier = load(str(path), dtype=torch.float32)
        classifier.requires_grad_(True)
        trained, source = "every weight", path
    score = getattr(classifier, "score", None)
    if score is not None and hasattr(score, "modules_to_save"):  # peft's copy of the head
        score = score.modules_to_save["default"]
    body = getattr(classifier, classifier.base_model_prefix, None)
    if not isinstance(score, torch.nn.Linear) or body is None or score.out_features != 1:
        raise InputError(
            f"`rm` {path}: a {type(classifier).__name__}; the one-checkpoint audit reads a "
            "causal classifier with one reward logit (a `score` layer on the last token)"
        )
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    limit = max_length or default_max_length(classifier.config, tokenizer)
    prepare_tokenizer(tokenizer)
    recorded = getattr(classifier.config, "rmlens_format", None)
    fmt = resolve_format(recorded if format in (None, "auto") and recorded else format,
                         tokenizer, "causal")  # fmt: skip
    net = ExplicitNet(body, int(classifier.config.hidden_size), "last", causal=True)
    net.head = score
    backbone = Backbone(name=str(path), identity=str(path), tokenizer=tokenizer, model=body,
                        kind="causal", pooling="last", max_length=int(limit), format=fmt)
    return net.to(device).eval(), backbone, trained, classifier.to(device).eval()


def check_agreement(path: Path, rewards: np.ndarray, reference: np.ndarray) -> None:
    """Refuse when the net does not score the pairs as the classifier does (a pad token
    inside its sequences, another pooling): its influence would be of another model."""
    usable = np.isfinite(rewards) & np.isfinite(reference)
    gap = float(np.max(np.abs(rewards[usable] - reference[usable]), initial=0.0))
    if gap > AGREE:
        raise InputError(
            f"`rm` {path}: read by its last token, it scores the pairs up to {gap:.3g} away "
            "from its own forward pass (a pad token inside its sequences, or another pooling); "
            "the one-checkpoint audit reads causal classifiers that score the last token"
        )
