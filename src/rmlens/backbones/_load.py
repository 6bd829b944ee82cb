"""Loading a backbone: tokenizer + model + how to pool it, from a preset, a path or a hub id."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer, PreTrainedTokenizerBase

from rmlens._errors import InputError, RmlensWarning
from rmlens._io import json_digest
from rmlens.backbones._formats import resolve_format
from rmlens.backbones._precision import held_precision, hold_weights
from rmlens.backbones._presets import quiet_hub, resolve_model, unloadable
from rmlens.backbones._quiet import quiet_bars
from rmlens.backbones._tokenize import NO_LIMIT, prepare_tokenizer

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt")
# where a config states how many positions the model has, first found wins
_POSITION_FIELDS = ("max_position_embeddings", "n_positions", "max_sequence_length", "n_ctx")
# models whose position ids start after the padding index (RoBERTa's 514 positions hold 512)
_OFFSET_POSITIONS = ("roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "data2vec-text",
                     "longformer", "ibert", "mpnet")  # fmt: skip


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
        Maximum tokens per (prompt, response) sequence; one above the model's limit
        (:func:`model_limit`) is lowered to it, with a warning.
    format : {"chat", "raw", "pair"}
        How a (prompt, response) becomes tokens (``rmlens.backbones._tokenize``); given as
        ``auto`` (the default) it is resolved at construction: chat when the tokenizer has a
        template, else raw (causal) or pair (encoder).
    """

    name: str
    identity: str
    tokenizer: PreTrainedTokenizerBase
    model: torch.nn.Module
    kind: str
    pooling: str
    max_length: int
    format: str = "auto"

    def __post_init__(self) -> None:
        self.format = resolve_format(self.format, self.tokenizer, self.kind)
        limit = model_limit(getattr(self.model, "config", None))
        if limit is not None and self.max_length > limit:
            message = f"`max_length` {self.max_length} is above the model's limit {limit}"
            warnings.warn(f"{message}: using {limit}", RmlensWarning, stacklevel=3)
            self.max_length = limit

    @property
    def precision(self) -> str:
        """The precision its linear layers are held in: bf16 or fp32 (:func:`hold_weights`)."""
        return held_precision(self.model)

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))


def model_identity(source: str, config: dict) -> str:
    """Hash of the resolved source, its config and its weight files (names and sizes).

    The config's ``_name_or_path`` (the path as typed) is left out: the same model reached by
    a relative or an absolute path is the same model."""
    config = {k: v for k, v in config.items() if k != "_name_or_path"}
    digest = json_digest(config, default=str)
    path = Path(source)
    if path.is_dir():
        for f in sorted(path.rglob("*")):
            if f.suffix in _WEIGHT_SUFFIXES or f.name.startswith("tokenizer"):
                digest.update(f"{f.relative_to(path)}:{f.stat().st_size}".encode())
    else:
        digest.update(source.encode())
    return digest.hexdigest()[:16]


def model_limit(config) -> int | None:
    """How many tokens the model takes in one sequence, from its config's position count
    (``max_position_embeddings``, ``n_positions``, ...; less RoBERTa-style models' padding
    offset); None when the config states none (relative positions, as in T5)."""
    if config is None:
        return None
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    for name in _POSITION_FIELDS:
        value = getattr(text, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            break
    else:
        return None
    if getattr(text, "model_type", None) in _OFFSET_POSITIONS:
        value -= (getattr(text, "pad_token_id", None) or 1) + 1
    return value if value > 1 else None


def default_max_length(config, tokenizer) -> int:
    """The model's limit (:func:`model_limit`); without one the tokenizer's stated limit,
    else 512."""
    stated = tokenizer.model_max_length if tokenizer.model_max_length < NO_LIMIT else None
    return int(model_limit(config) or stated or 512)


def is_causal(config) -> bool:
    """Whether a transformers model config is a decoder (a causal LM), from its
    ``is_decoder`` flag or its architecture names."""
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
    format: str = "auto",
    precision: str = "fp32",
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
    precision : {"fp32", "bf16"}, default="fp32"
        A resolved precision (``resolve_precision``): bf16 holds the linear layers' weights
        in bfloat16 and runs the model under bf16 autocast (:func:`hold_weights`).
    max_length : int, optional
        Defaults to the model's limit (:func:`model_limit`; else the tokenizer's stated
        limit, else 512); a larger value given is lowered to the model's limit, with a
        warning.
    trust_remote_code : bool, default=False
        Only for models you trust; never on by default.
    format : {"auto", "chat", "raw", "pair"}, default="auto"
        How a (prompt, response) becomes tokens (:class:`Backbone`); ``chat`` without a
        chat template is an InputError.

    Notes
    -----
    Features (``featurize``) are the last layer's hidden states (after the model's final
    norm, as ``AutoModel`` returns them). Causal LMs (a config whose architecture ends in
    ``ForCausalLM``, a local ``.gguf`` file, ``smollm2-135m``) take the state at the last
    real token of the formatted prompt+response, which has attended to the whole pair
    (with SmolLM2's template, the newline after the closing ``<|im_end|>``; raw: the EOS);
    encoders average over the real tokens of the pair encoding.
    """
    source, preset = resolve_model(model)
    try:
        with quiet_hub(), quiet_bars():
            config = AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code)
            tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
            net = AutoModel.from_pretrained(
                source, dtype=dtype or torch.float32, trust_remote_code=trust_remote_code
            )
    except (OSError, ValueError) as err:  # ValueError: a folder whose config names no model
        raise InputError(unloadable(model, source, err)) from err
    causal = preset.kind == "causal" if preset else is_causal(config)
    if max_length is None:
        max_length = default_max_length(net.config, tokenizer)
    prepare_tokenizer(tokenizer)
    net.eval().to(device)
    hold_weights(net, precision)
    return Backbone(
        name=model,
        identity=model_identity(source, config.to_dict()),
        tokenizer=tokenizer,
        model=net,
        kind="causal" if causal else "encoder",
        pooling="last" if causal else "mean",
        max_length=int(max_length),
        format=format,
    )
