"""One way to load a reward model: ``load_rm(path_or_preset)``, for every kind (DESIGN.md 2).

What ``load_rm`` takes, tried in this order:

- an RM preset shipped with rmlens (``RM_PRESETS``: ``smollm2-135m-hh``, a linear head on
  SmolLM2-135M-Instruct last-token features);
- a folder with ``rm_config.json``, by its ``kind`` (``LOADERS``):
  ``explicit_head``  a frozen backbone + a head (an audit run's ``runs/<r>/rm/``,
                     ``save_head_rm``);
  ``explicit_finetuned``, ``implicit``  ``TunedRM.save`` (``rmlens train``), LoRA or full;
                     an implicit RM may also name two causal LMs, ``policy`` and
                     ``reference``, with ``beta``;
  ``ensemble``       ``rmlens train --ensemble N``: its ``members`` folders;
- an experiment directory of ``rmlens memorize`` (``config.json`` + ``runs/``): its runs'
  RMs as one :class:`EnsembleRM`, each member knowing its training ids (the run's
  ``manifest.json``), so in-training and held-out metrics can be told apart;
- any other local folder or hub id: a Hugging Face ``AutoModelForSequenceClassification``
  (``trust_remote_code`` only when asked).

Every kind returns an object with ``score(prompts, responses)`` and ``score_pairs(pairs)``.
Explicit heads that name the same backbone share one loaded backbone (an experiment's runs).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from rmlens._errors import InputError
from rmlens.experiment import ExperimentDir
from rmlens.rewards._config import resolve_device
from rmlens.rewards._ensemble import EnsembleRM
from rmlens.rewards._saved import RM_CONFIG, ExplicitHeadRM, RewardModel, SequenceClassifierRM

RM_PRESETS = ("smollm2-135m-hh",)
_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def preset_dir(name: str) -> Path:
    """Folder of a packaged RM preset (``rm_config.json`` + head)."""
    return Path(str(resources.files("rmlens.rewards").joinpath("presets", name)))


def load_rm(
    path_or_preset: str | Path,
    *,
    device: str = "auto",
    cache_dir: Any = None,
    score_index: int = 0,
    trust_remote_code: bool = False,
) -> RewardModel:
    """Load a reward model of any kind (module docstring) as an object that scores texts.

    Parameters
    ----------
    path_or_preset : str or Path
        An RM preset, a folder with ``rm_config.json``, an experiment directory, or a
        sequence-classification model folder or hub id.
    device : str, default="auto"
        Torch device (``auto``: cuda if available, else mps, else cpu).
    cache_dir : path or False, optional
        Embedding cache root of explicit heads (``False`` disables it).
    score_index : int, default=0
        Logit read as the reward of a sequence classifier (``logits[:, score_index]``).
    trust_remote_code : bool, default=False
        Run a hub model's own code; only for models you trust.

    Returns
    -------
    ExplicitHeadRM, TunedRM, SequenceClassifierRM or EnsembleRM
        ``score(prompts, responses) -> (n,)`` and ``score_pairs(pairs) -> (r_c, r_r)``.

    Raises
    ------
    InputError
        When ``path_or_preset`` is none of these, or its files are malformed.

    Examples
    --------
    >>> rm = load_rm("runs/demo/runs/000/rm")                     # doctest: +SKIP
    >>> r_chosen, r_rejected = rm.score_pairs(pairs)               # doctest: +SKIP
    >>> ensemble = load_rm("runs/demo")  # an experiment directory  # doctest: +SKIP
    """
    options = {"device": resolve_device(device), "cache_dir": cache_dir,
               "score_index": score_index, "trust_remote_code": trust_remote_code,
               "backbones": {}}  # fmt: skip
    return _load(path_or_preset, options)


def _load(spec: str | Path, options: dict) -> RewardModel:
    from rmlens.backbones import PRESETS

    text = str(spec)
    if text in RM_PRESETS:
        folder = preset_dir(text)
    elif text in PRESETS:
        raise InputError(
            f"{text!r} is a backbone, not a reward model: pass an RM preset "
            f"({', '.join(RM_PRESETS)}), a folder holding {RM_CONFIG} and a head "
            "(rmlens.rewards.save_head_rm writes one), or a sequence-classification model"
        )
    else:
        folder = Path(spec).expanduser()
    if (folder / RM_CONFIG).is_file():
        config = read_rm_config(folder)
        return LOADERS[config["kind"]](folder, config, **options)
    if ExperimentDir(folder).is_experiment:
        return _load_experiment(folder, options)
    half = _half_rm(folder)
    if half:
        raise InputError(f"{text}: {half}")
    if folder.is_dir() and not (folder / "config.json").is_file():
        raise InputError(f"{text}: expected {RM_CONFIG}, an experiment directory (config.json "
                         "and runs/) or a model's config.json in this folder, found neither")
    if not folder.exists() and not _HUB_ID.match(text):
        raise InputError(f"{text}: no such file or folder (nor an RM preset or a hub id)")
    return _load_sequence_classifier(text, **options)


def _half_rm(folder: Path) -> str | None:
    """What is wrong with a folder that is part of an rmlens RM (its LoRA adapter, its
    fine-tuned body, a head without ``rm_config.json``), and what to pass instead; None for
    any other folder. Loaded by transformers, an adapter would get a random score head."""
    parent = folder.expanduser().resolve().parent
    whole = (parent / RM_CONFIG).is_file()
    if (folder / "adapter_config.json").is_file() or (whole and folder.name == "model"):
        part = "a LoRA adapter" if (folder / "adapter_config.json").is_file() else "the body"
        if whole:
            return (f"{part} of the rmlens RM in {parent}, without its head: pass its parent "
                    f"folder {parent} (or `rmlens export {parent} --out DIR` for a standard "
                    "Hugging Face model)")
        return f"{part} (a PEFT adapter), not a reward model: pass the RM folder it came from"
    if (folder / "head.safetensors").is_file() or (folder / "head_config.json").is_file():
        return (f"a reward head without its {RM_CONFIG} (which names the backbone): pass the "
                "RM folder it came from, or write one with rmlens.rewards.save_head_rm")
    return None


def read_rm_config(folder: Path) -> dict:
    """``rm_config.json`` of an RM folder, checked: a JSON object with a known ``kind``."""
    file = folder / RM_CONFIG
    try:
        config = json.loads(file.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"{file}: expected JSON, got a parse error: {err}") from err
    found = config.get("kind") if isinstance(config, dict) else type(config).__name__
    if not isinstance(config, dict) or found not in LOADERS:
        raise InputError(f"{file}: field 'kind' must be one of {', '.join(LOADERS)}, "
                         f"got {found!r}")
    return config


def _load_explicit(
    path: Path, config: dict, *, device: str = "cpu", cache_dir: Any = None,
    backbones: dict | None = None, trust_remote_code: bool = False, **_: Any,
) -> ExplicitHeadRM:  # fmt: skip
    from rmlens.backbones import load_backbone
    from rmlens.backbones._presets import check_base
    from rmlens.rewards._saved import read_head

    if "backbone" not in config:
        raise InputError(f"{path / RM_CONFIG}: field 'backbone' is missing")
    pooling = config.get("pooling")
    if pooling not in (None, "last", "mean"):
        raise InputError(f"{path / RM_CONFIG}: field 'pooling' must be 'last' or 'mean', "
                         f"got {pooling!r}")
    check_base(config["backbone"], str(path / RM_CONFIG))
    backbones = {} if backbones is None else backbones
    key = (config["backbone"], config.get("max_length"), pooling, device)
    if key not in backbones:
        backbone = load_backbone(config["backbone"], device=device,
                                 max_length=config.get("max_length"),
                                 trust_remote_code=trust_remote_code)
        backbone.pooling = pooling or backbone.pooling
        backbones[key] = backbone
    backbone = backbones[key]
    return ExplicitHeadRM(backbone, read_head(path, backbone), cache_dir=cache_dir)


def _load_tuned(path: Path, config: dict, *, device: str = "cpu", **kwargs: Any):
    from rmlens.rewards._tuned import load_tuned

    if config["kind"] == "implicit" and "policy" in config:
        return _load_implicit_pair(path, config, device=device, **kwargs)
    return load_tuned(path, config, device=device)


def _load_implicit_pair(
    path: Path, config: dict, *, device: str = "cpu", trust_remote_code: bool = False, **_: Any
):
    """An implicit RM named by two causal LMs: beta * (log pi(y|x) - log pi_ref(y|x))."""
    from rmlens.backbones import Backbone
    from rmlens.rewards._implicit import ImplicitNet
    from rmlens.rewards._nets import load_causal_lm
    from rmlens.rewards._tuned import TunedRM
    from rmlens.rewards.finetune import TrainConfig

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
    train = TrainConfig(model=config["reference"], rm="implicit", finetune="full", beta=beta)
    backbone = Backbone(name=config["reference"], identity=reference.identity,
                        tokenizer=policy.tokenizer, model=policy.model, kind="causal",
                        pooling="last", max_length=policy.max_length)  # fmt: skip
    return TunedRM(net, backbone, train)


def _load_ensemble(path: Path, config: dict, **options: Any) -> EnsembleRM:
    members = config.get("members")
    if not isinstance(members, list) or not members or not all(
        isinstance(m, str) for m in members
    ):
        raise InputError(f"{path / RM_CONFIG}: field 'members' must be a non-empty list of "
                         f"member folders, got {members!r}")
    names = config.get("names") or [Path(m).name for m in members]
    train_ids = None
    if (path / "train_ids.json").is_file():
        train_ids = json.loads((path / "train_ids.json").read_text())
    return EnsembleRM([_load(path / m, options) for m in members], names=names,
                      train_ids=train_ids)


def load_experiment(path: str | Path, **kwargs: Any) -> EnsembleRM:
    """The saved RMs of an experiment directory's finished runs as one ensemble.

    Same as ``load_rm(path, **kwargs)`` on an experiment directory.
    """
    path = Path(path)
    if not ExperimentDir(path).is_experiment:
        raise InputError(f"{path}: not an experiment directory (expected config.json and runs/)")
    return load_rm(path, **kwargs)


def _load_experiment(path: Path, options: dict) -> EnsembleRM:
    """Each finished run's saved RM (``runs/<run>/rm/``) as one ensemble member, named by
    its run folder and knowing the pairs its run trained on and validated with."""
    exp = ExperimentDir(path)
    runs = [r for r in exp.run_numbers()
            if exp.run_done(r) and (exp.run_dir(r) / "rm" / RM_CONFIG).is_file()]  # fmt: skip
    if not runs:
        raise InputError(
            f"{path}: an experiment directory without saved RMs (expected "
            f"runs/<run>/rm/{RM_CONFIG} beside runs/<run>/manifest.json)"
        )
    members, names, train_ids, val_ids = [], [], [], []
    for run in runs:
        manifest = exp.manifest(run)
        members.append(_load(exp.run_dir(run) / "rm", options))
        names.append(exp.run_dir(run).name)
        train_ids.append(manifest.get("train_ids", []))
        val_ids.append(manifest.get("val_ids", []))
    return EnsembleRM(members, names=names, train_ids=train_ids, val_ids=val_ids)


def _load_sequence_classifier(
    spec: str, *, device: str = "cpu", score_index: int = 0, trust_remote_code: bool = False,
    **_: Any,
) -> SequenceClassifierRM:  # fmt: skip
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    from rmlens.backbones._presets import check_hub_id, unloadable

    trust = trust_remote_code
    expected = (f"an rmlens RM folder (with {RM_CONFIG}), an RM preset "
                f"({', '.join(RM_PRESETS)}), an experiment directory")  # fmt: skip
    if not Path(spec).exists():
        check_hub_id(spec, param="rm", expected=expected)  # fail fast, no hub retries
    try:
        config = AutoConfig.from_pretrained(spec, trust_remote_code=trust)
    except (OSError, ValueError) as err:
        raise InputError(unloadable(spec, spec, err, param="rm", expected=expected)) from err
    archs = getattr(config, "architectures", None) or []
    if archs and not any(a.endswith("ForSequenceClassification") for a in archs):
        raise InputError(
            f"{spec}: expected a reward model (a *ForSequenceClassification architecture), "
            f"found {', '.join(archs)}; train a head on it with rmlens and pass the folder "
            "it writes"
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(spec, trust_remote_code=trust)
        model = AutoModelForSequenceClassification.from_pretrained(
            spec, dtype=torch.float32, trust_remote_code=trust
        )
    except (OSError, ValueError) as err:
        raise InputError(f"{spec}: not a loadable sequence-classification model ({err})") from err
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    offset = float(getattr(config, "rmlens_reward_offset", 0.0) or 0.0)  # an rmlens export's
    try:
        return SequenceClassifierRM(model.eval().to(device), tokenizer, index=score_index,
                                    offset=offset)
    except ValueError as err:
        raise InputError(f"{spec} with score index {score_index}: {err}") from err


LOADERS: dict[str, Callable[..., RewardModel]] = {
    "explicit_head": _load_explicit,
    "explicit_finetuned": _load_tuned,
    "implicit": _load_tuned,
    "ensemble": _load_ensemble,
}
"""Loader of each ``rm_config.json`` kind: ``loader(folder, config, **options)``."""
