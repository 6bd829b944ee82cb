"""Loading a backbone: tokenizer + model + how to pool it, from a preset, a path or a hub id."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer, PreTrainedTokenizerBase
from transformers.utils import logging as hf_logging

from rmlens._errors import InputError
from rmlens.backbones._presets import resolve_model, unloadable

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt")


@dataclass
class Backbone:
    """A loaded backbone and everything needed to featurize text with it.

    Attributes
    ----------
    name : str
        What the user passed (preset name, local path or hub id).
    identity : str
        Stable id of the weights and tokenizer; keys the embedding cache.
    kind : {"encoder", "causal"}
        Encoders are mean-pooled; causal LMs use the last real token.
    pooling : {"mean", "last"}
    max_length : int
        Maximum tokens per (prompt, response) sequence.
    """

    name: str
    identity: str
    tokenizer: PreTrainedTokenizerBase
    model: torch.nn.Module
    kind: str
    pooling: str
    max_length: int

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))


def model_identity(source: str, config: dict) -> str:
    """Hash of the resolved source, its config and its weight files (names and sizes)."""
    digest = hashlib.sha1(json.dumps(config, sort_keys=True, default=str).encode())
    path = Path(source)
    if path.is_dir():
        for f in sorted(path.rglob("*")):
            if f.suffix in _WEIGHT_SUFFIXES or f.name.startswith("tokenizer"):
                digest.update(f"{f.relative_to(path)}:{f.stat().st_size}".encode())
    else:
        digest.update(source.encode())
    return digest.hexdigest()[:16]


def is_causal(config) -> bool:
    archs = getattr(config, "architectures", None) or []
    return bool(getattr(config, "is_decoder", False)) or any(
        a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs
    )


def load_backbone(
    model: str = "minilm",
    *,
    device: str = "cpu",
    dtype: torch.dtype | None = None,
    max_length: int | None = None,
    trust_remote_code: bool = False,
) -> Backbone:
    """Load a backbone for featurization.

    Parameters
    ----------
    model : str, default="minilm"
        A preset (``minilm``, ``smollm2-135m``), a local directory, a local ``.gguf`` file
        (dequantized once into the cache) or a hub id.
    device : str, default="cpu"
    dtype : torch.dtype, optional
        Defaults to float32.
    max_length : int, optional
        Defaults to the preset's, else the tokenizer's limit capped at 512.
    trust_remote_code : bool, default=False
        Only for models you trust; never on by default.

    Notes
    -----
    Features (``featurize``) are the last layer's hidden states (after the model's final
    norm, as ``AutoModel`` returns them). Causal LMs (a config whose architecture ends in
    ``ForCausalLM``, a local ``.gguf`` file, ``smollm2-135m``) take the state at the last
    real token of the chat-templated prompt+response, which has attended to the whole pair
    (with SmolLM2's template, the newline after the closing ``<|im_end|>``); encoders average
    over the real tokens of the pair encoding.
    """
    source, preset = resolve_model(model)
    hf_logging.disable_progress_bar()
    try:
        config = AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code)
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
        net = AutoModel.from_pretrained(
            source, dtype=dtype or torch.float32, trust_remote_code=trust_remote_code
        )
    except (OSError, ValueError) as err:  # ValueError: a folder whose config names no model
        raise InputError(unloadable(model, source, err)) from err
    causal = preset.kind == "causal" if preset else is_causal(config)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    limit = max_length or (preset.max_length if preset else min(tokenizer.model_max_length, 512))
    tokenizer.model_max_length = 1 << 30  # we truncate ourselves (prompt from the left)
    net.eval().to(device)
    return Backbone(
        name=model,
        identity=model_identity(source, config.to_dict()),
        tokenizer=tokenizer,
        model=net,
        kind="causal" if causal else "encoder",
        pooling="last" if causal else "mean",
        max_length=int(limit),
    )
