"""Reward models for a sweep: rmlens RM folders, Hugging Face classifiers, packaged presets.

An rmlens RM folder holds ``rm_config.json`` and the head::

    {"kind": "explicit_head", "backbone": "smollm2-135m", "pooling": "last",
     "head": "linear", "hidden_size": 576}
    head_config.json + head.safetensors                 (HeadRM.save; what save_head_rm writes)
    head.safetensors with keys weight (1, d), bias (1,) (a bare linear head, also read)

or ``{"kind": "implicit", "policy": ..., "reference": ..., "beta": 0.1}`` for a DPO-style
implicit RM from two causal LMs. Folders written by ``rmlens.rewards.TunedRM.save`` (kinds
``explicit_finetuned`` and ``implicit``, LoRA or full) load through ``rmlens.rewards`` and
are swept with LoRA adapters merged. Any other folder or hub id must be an
``AutoModelForSequenceClassification``.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rmlens import __version__
from rmlens._errors import InputError
from rmlens._io import write_json
from rmlens.tokens._scorers import HeadScorer, ImplicitScorer, SeqClsScorer, TokenScorer

RM_CONFIG = "rm_config.json"
RM_PRESETS = ("smollm2-135m-hh",)


def preset_dir(name: str) -> Path:
    """Folder of a packaged RM preset (backbone name + linear head as JSON)."""
    return Path(str(resources.files("rmlens.tokens").joinpath("presets", name)))


def save_head_rm(
    path: str | Path,
    backbone: str,
    weight: Any = None,
    bias: Any = None,
    *,
    head: Any = None,
    pooling: str = "last",
    extra: dict | None = None,
) -> Path:
    """Save an explicit RM (backbone name + head) as a folder that ``rmlens sweep`` reads.

    Parameters
    ----------
    path : str or Path
        Folder to write ``rm_config.json`` and the head into.
    backbone : str
        Backbone preset, local path or hub id, as ``load_backbone`` takes it.
    weight : array-like of shape (d,) or (1, d), optional
        Linear head weights ``w`` (r = w . h + b), saved as a linear ``HeadRM`` so that
        ``rmlens.rewards.load_rm`` reads the folder too.
    bias : float, optional
    head : HeadRM, optional
        A fitted :class:`rmlens.rewards.HeadRM` instead of ``weight``/``bias``; saved with
        ``HeadRM.save`` (linear or MLP, feature standardization included).
    pooling : {"last", "mean"}, default="last"
    extra : dict, optional
        More keys for ``rm_config.json`` (training data, seed, metrics...).

    Returns
    -------
    Path
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    config = {"kind": "explicit_head", "backbone": backbone, "pooling": pooling,
              "rmlens_version": __version__, **(extra or {})}
    if head is None:
        if weight is None:
            raise ValueError("save_head_rm needs weight (and bias) or head=HeadRM")
        head = _linear_head_rm(weight, bias)
    head.save(path)
    config.update(head="HeadRM", hidden_size=int(head.head_.mean.numel()))
    write_json(config, path / RM_CONFIG)
    return path


def _linear_head_rm(weight: Any, bias: Any):
    """A fitted-looking linear ``HeadRM`` computing w . h + b (no feature scaling)."""
    from rmlens.rewards import HeadConfig, HeadRM, RewardHead

    w = torch.as_tensor(np.asarray(weight, dtype=np.float32)).reshape(1, -1)
    b = torch.as_tensor(np.asarray(0.0 if bias is None else bias, np.float32)).reshape(1)
    rm = HeadRM(HeadConfig(head="linear"))
    module = RewardHead(w.shape[1], rm.config)
    with torch.no_grad():
        module.net.weight.copy_(w)
        module.net.bias.copy_(b)
    rm.head_ = module.eval()
    return rm


def _read_config(folder: Path) -> dict:
    file = folder / RM_CONFIG
    try:
        config = json.loads(file.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"{file}: expected JSON, got a parse error: {err}") from err
    kinds = ("explicit_head", "explicit_finetuned", "implicit")
    if not isinstance(config, dict) or config.get("kind") not in kinds:
        found = config.get("kind") if isinstance(config, dict) else type(config).__name__
        hint = "; sweep an ensemble's members one by one" if found == "ensemble" else ""
        raise InputError(f"{file}: field 'kind' must be one of {', '.join(kinds)}, "
                         f"got {found!r}{hint}")
    return config


def _load_head(folder: Path, config: dict, hidden_size: int):
    """(weight, bias) or a head module, checked against the backbone's hidden size."""
    from safetensors.torch import load_file

    if (folder / "head_config.json").is_file():
        from rmlens.rewards import HeadRM

        module = HeadRM.load(folder).head_
        dim = int(module.mean.numel())
        weight, bias = module, None
    elif (folder / "head.safetensors").is_file():
        state = load_file(str(folder / "head.safetensors"))
        if "weight" not in state:
            raise InputError(f"{folder / 'head.safetensors'}: expected keys 'weight' (1, d) and "
                             f"'bias' (1,), found {sorted(state)}")
        weight, bias = state["weight"].reshape(-1), state.get("bias", torch.zeros(1)).reshape(())
        dim = int(weight.numel())
    elif (folder / "head.json").is_file():
        saved = json.loads((folder / "head.json").read_text())
        weight = np.asarray(saved["weight"], dtype=np.float32).reshape(-1)
        bias, dim = float(np.asarray(saved["bias"]).reshape(-1)[0]), int(weight.size)
    else:
        raise InputError(f"{folder}: expected head.safetensors (or head_config.json from "
                         "HeadRM.save) beside rm_config.json, found neither")
    if dim != hidden_size:
        raise InputError(f"{folder}: the head takes {dim} features but backbone "
                         f"{config['backbone']!r} gives {hidden_size}")
    return weight, bias


def _explicit(folder: Path, config: dict, name: str, device: str) -> HeadScorer:
    from rmlens.backbones import load_backbone

    if "backbone" not in config:
        raise InputError(f"{folder / RM_CONFIG}: field 'backbone' is missing")
    pooling = config.get("pooling", "last")
    if pooling not in ("last", "mean"):
        raise InputError(f"{folder / RM_CONFIG}: field 'pooling' must be 'last' or 'mean', "
                         f"got {pooling!r}")
    backbone = load_backbone(config["backbone"], device=device)
    weight, bias = _load_head(folder, config, backbone.hidden_size)
    if isinstance(weight, torch.nn.Module):
        weight.to(device)
    return HeadScorer(backbone.model, backbone.tokenizer, weight, bias, pooling=pooling,
                      name=name)


def _causal_lm(model: str, device: str, trust_remote_code: bool):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rmlens.backbones import resolve_model

    source, _ = resolve_model(model)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
        lm = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32,
                                                  trust_remote_code=trust_remote_code)
    except OSError as err:
        raise InputError(f"model {model!r}: expected a causal LM preset, folder or hub id "
                         f"({err})") from err
    return lm.eval().to(device), tokenizer


def _implicit(folder: Path, config: dict, name: str, device: str, trust: bool) -> ImplicitScorer:
    for key in ("policy", "reference"):
        if key not in config:
            raise InputError(f"{folder / RM_CONFIG}: field {key!r} is missing (implicit RM)")
    policy, tokenizer = _causal_lm(config["policy"], device, trust)
    reference, ref_tokenizer = _causal_lm(config["reference"], device, trust)
    if ref_tokenizer.get_vocab() != tokenizer.get_vocab():
        raise InputError(f"{folder / RM_CONFIG}: policy and reference must share a tokenizer")
    return ImplicitScorer(policy, reference, tokenizer, beta=float(config.get("beta", 0.1)),
                          name=name)


def _merged(model):
    """A plain transformers model: LoRA adapters merged into the weights (exact for scoring)."""
    return model.merge_and_unload() if hasattr(model, "merge_and_unload") else model


def _tuned(folder: Path, name: str, device: str) -> TokenScorer:
    """A ``TunedRM`` folder (fine-tuned explicit or implicit RM) as a scorer."""
    import copy

    from rmlens.rewards import load_rm as load_saved

    tuned = load_saved(folder, device=device)
    net, tokenizer = tuned.net, tuned.backbone.tokenizer
    if tuned.kind == "implicit":
        reference = net._reference[0]
        if reference is None:  # LoRA: the reference is the policy with its adapters off
            policy = copy.deepcopy(net.lm).merge_and_unload()
            reference = net.lm.unload()
        else:
            policy = _merged(net.lm)
        return ImplicitScorer(policy.eval(), reference.eval(), tokenizer, beta=net.beta,
                              name=name)
    return HeadScorer(_merged(net.body).eval(), tokenizer, net.head,
                      pooling=tuned.backbone.pooling, name=name)


def _seq_cls(spec: str, name: str, index: int, device: str, trust: bool) -> SeqClsScorer:
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    try:
        config = AutoConfig.from_pretrained(spec, trust_remote_code=trust)
    except (OSError, ValueError) as err:
        raise InputError(
            f"--rm {spec!r}: expected an rmlens RM folder (with {RM_CONFIG}), an RM preset "
            f"({', '.join(RM_PRESETS)}), or a sequence-classification model folder or hub id; "
            f"found none ({err})"
        ) from err
    archs = getattr(config, "architectures", None) or []
    if archs and not any(a.endswith("ForSequenceClassification") for a in archs):
        raise InputError(
            f"--rm {spec!r}: expected a reward model (a *ForSequenceClassification "
            f"architecture), found {', '.join(archs)}; train a head on it with rmlens and "
            "pass the folder save_head_rm wrote"
        )
    tokenizer = AutoTokenizer.from_pretrained(spec, trust_remote_code=trust)
    model = AutoModelForSequenceClassification.from_pretrained(
        spec, dtype=torch.float32, trust_remote_code=trust
    ).eval().to(device)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    try:
        return SeqClsScorer(model, tokenizer, index=index, name=name)
    except ValueError as err:
        raise InputError(f"--rm {spec!r} with --score-index {index}: {err}") from err


def load_rm(
    spec: str,
    *,
    score_index: int = 0,
    device: str = "cpu",
    trust_remote_code: bool = False,
) -> TokenScorer:
    """Load a reward model to sweep.

    Parameters
    ----------
    spec : str
        An RM preset (``smollm2-135m-hh``), a folder with ``rm_config.json`` (explicit head
        or implicit RM), or a sequence-classification model folder or hub id.
    score_index : int, default=0
        Logit read as the reward of a sequence classifier (``logits[:, score_index]``).
    device : str, default="cpu"
    trust_remote_code : bool, default=False
        Only for classifiers whose code you trust.

    Returns
    -------
    TokenScorer

    Raises
    ------
    InputError
        When ``spec`` is none of these, or its files are malformed.
    """
    from rmlens.backbones import PRESETS

    folder = preset_dir(spec) if spec in RM_PRESETS else Path(spec).expanduser()
    if spec in PRESETS:
        raise InputError(
            f"--rm {spec!r} is a backbone, not a reward model: pass an RM preset "
            f"({', '.join(RM_PRESETS)}) or a folder holding {RM_CONFIG} and a head "
            "(rmlens.tokens.save_head_rm writes one)"
        )
    if (folder / RM_CONFIG).is_file():
        config = _read_config(folder)
        if config["kind"] == "explicit_head":
            return _explicit(folder, config, spec, device)
        if config["kind"] == "implicit" and "policy" in config:
            return _implicit(folder, config, spec, device, trust_remote_code)
        return _tuned(folder, spec, device)
    if folder.exists() and not (folder / "config.json").is_file():
        raise InputError(f"--rm {spec!r}: expected {RM_CONFIG} or a model's config.json in "
                         "this folder, found neither")
    return _seq_cls(spec, spec, score_index, device, trust_remote_code)
