"""An rmlens RM folder (``rm_config.json``) read, and loaded by its ``kind`` when it holds one RM.

The loaders of single RMs (``SINGLE_LOADERS``) sit below the ensembles (``_ensemble`` loads
the ``ensemble`` kind and experiment directories with them) and below :func:`load_rm`
(``_load``: RM presets, every kind, experiment directories, Hugging Face models).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmlens._errors import InputError
from rmlens.backbones import Backbone, check_base, load_backbone, resolve_precision
from rmlens.rewards import (
    RM_CONFIG,
    ExplicitHeadRM,
    ImplicitNet,
    RewardModel,
    TrainConfig,
    TunedRM,
    load_causal_lm,
    load_tuned,
    read_head,
    resolve_device,
)

KINDS = ("explicit_head", "explicit_finetuned", "implicit", "ensemble")
"""The kinds of ``rm_config.json`` (``_load.LOADERS``)."""


def rm_options(
    *, device: str = "auto", cache_dir: Any = None, score_index: int = 0,
    trust_remote_code: bool = False, precision: str = "auto",
) -> dict:  # fmt: skip
    """The options of :func:`load_rm` as every loader takes them: the device resolved, and
    one dict of loaded backbones that explicit heads naming the same backbone share."""
    return {"device": resolve_device(device), "cache_dir": cache_dir,
            "score_index": score_index, "trust_remote_code": trust_remote_code,
            "precision": precision, "backbones": {}}  # fmt: skip


def read_rm_config(folder: Path) -> dict:
    """``rm_config.json`` of an RM folder, checked: a JSON object with a known ``kind``."""
    file = folder / RM_CONFIG
    try:
        config = json.loads(file.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"{file}: expected JSON, got a parse error: {err}") from err
    found = config.get("kind") if isinstance(config, dict) else type(config).__name__
    if not isinstance(config, dict) or found not in KINDS:
        raise InputError(f"{file}: field 'kind' must be one of {', '.join(KINDS)}, "
                         f"got {found!r}")
    return config


def _load_explicit(
    path: Path, config: dict, *, device: str = "cpu", cache_dir: Any = None,
    backbones: dict | None = None, trust_remote_code: bool = False, precision: str = "auto",
    **_: Any,
) -> ExplicitHeadRM:  # fmt: skip

    if "backbone" not in config:
        raise InputError(f"{path / RM_CONFIG}: field 'backbone' is missing")
    pooling = config.get("pooling")
    if pooling not in (None, "last", "mean"):
        raise InputError(f"{path / RM_CONFIG}: field 'pooling' must be 'last' or 'mean', "
                         f"got {pooling!r}")
    check_base(config["backbone"], str(path / RM_CONFIG))
    backbones = {} if backbones is None else backbones
    held = resolve_precision(precision, device, task="score")
    key = (config["backbone"], config.get("max_length"), pooling, device, held)
    if key not in backbones:
        backbone = load_backbone(config["backbone"], device=device,
                                 max_length=config.get("max_length"), precision=held,
                                 trust_remote_code=trust_remote_code)
        backbone.pooling = pooling or backbone.pooling
        backbones[key] = backbone
    backbone = backbones[key]
    return ExplicitHeadRM(backbone, read_head(path, backbone), cache_dir=cache_dir)


def _load_tuned(path: Path, config: dict, *, device: str = "cpu", precision: str = "auto",
                **kwargs: Any):  # fmt: skip
    if config["kind"] == "implicit" and "policy" in config:
        return _load_implicit_pair(path, config, device=device, **kwargs)
    return load_tuned(path, config, device=device, precision=precision)


def _load_implicit_pair(
    path: Path, config: dict, *, device: str = "cpu", trust_remote_code: bool = False, **_: Any
):
    """An implicit RM named by two causal LMs: beta * (log pi(y|x) - log pi_ref(y|x))."""
    for key in ("policy", "reference"):
        if key not in config:
            raise InputError(f"{path / RM_CONFIG}: field {key!r} is missing (implicit RM)")
    policy = load_causal_lm(config["policy"], trust_remote_code=trust_remote_code)
    reference = load_causal_lm(config["reference"], trust_remote_code=trust_remote_code)
    if reference.tokenizer.get_vocab() != policy.tokenizer.get_vocab():
        raise InputError(f"{path / RM_CONFIG}: policy and reference must share a tokenizer")
    beta = float(config.get("beta", 0.1))
    net = ImplicitNet(policy.model, beta, reference.model)
    net.eval().requires_grad_(False).to(device)
    reference.model.requires_grad_(False).eval().to(device)
    # Saved again, this is a full fine-tune of `reference` whose weights are the policy's.
    train = TrainConfig(model=config["reference"], rm_kind="implicit", finetune="full", beta=beta)
    backbone = Backbone(name=config["reference"], identity=reference.identity,
                        tokenizer=policy.tokenizer, model=policy.model, kind="causal",
                        pooling="last", max_length=policy.max_length)  # fmt: skip
    return TunedRM(net, backbone, train, precision="fp32")


SINGLE_LOADERS: dict[str, Callable[..., RewardModel]] = {
    "explicit_head": _load_explicit,
    "explicit_finetuned": _load_tuned,
    "implicit": _load_tuned,
}
"""Loader of each ``rm_config.json`` kind that is one RM: ``loader(folder, config, **options)``."""
