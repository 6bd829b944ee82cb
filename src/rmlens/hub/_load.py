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

import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

from rmlens._errors import InputError
from rmlens.backbones import PRESETS, check_hub_id, quiet_bars, unloadable
from rmlens.experiment import AuditDir
from rmlens.hub._classifier import SequenceClassifierRM
from rmlens.hub._ensemble import EnsembleRM, ensemble_folder, experiment_ensemble
from rmlens.hub._folders import SINGLE_LOADERS, read_rm_config, rm_options
from rmlens.rewards import RM_CONFIG, RewardModel

RM_PRESETS = ("smollm2-135m-hh",)
_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def preset_dir(name: str) -> Path:
    """Folder of a packaged RM preset (``rm_config.json`` + head)."""
    return Path(str(resources.files("rmlens.hub").joinpath("presets", name)))


def load_rm(
    path_or_preset: str | Path,
    *,
    device: str = "auto",
    cache_dir: Any = None,
    score_index: int = 0,
    trust_remote_code: bool = False,
    precision: str = "auto",
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
    precision : {"auto", "fp32", "bf16"}, default="auto"
        The precision it scores in (``rmlens.backbones.resolve_precision``): rmlens's
        fine-tuned RMs and the backbones of explicit heads. A Hugging Face sequence
        classifier scores in fp32.

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
    options = rm_options(device=device, cache_dir=cache_dir, score_index=score_index,
                         trust_remote_code=trust_remote_code, precision=precision)
    return _load(path_or_preset, options)


def _load(spec: str | Path, options: dict) -> RewardModel:
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
    if AuditDir(folder).is_experiment:
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


def _load_ensemble(path: Path, config: dict, **options: Any) -> EnsembleRM:
    return ensemble_folder(path, config, lambda member: _load(member, options))


def _load_experiment(path: Path, options: dict) -> EnsembleRM:
    return experiment_ensemble(path, lambda rm: _load(rm, options))


def _load_sequence_classifier(
    spec: str, *, device: str = "cpu", score_index: int = 0, trust_remote_code: bool = False,
    **_: Any,
) -> SequenceClassifierRM:  # fmt: skip
    trust = trust_remote_code
    expected = (f"an rmlens RM folder (with {RM_CONFIG}), an RM preset "
                f"({', '.join(RM_PRESETS)}), an experiment directory")  # fmt: skip
    if not Path(spec).exists():
        check_hub_id(spec, param="rm", expected=expected)  # fail fast, no hub retries
    try:
        with quiet_bars():
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
        with quiet_bars():
            tokenizer = AutoTokenizer.from_pretrained(spec, trust_remote_code=trust)
            model, loading = AutoModelForSequenceClassification.from_pretrained(
                spec, dtype=torch.float32, trust_remote_code=trust, output_loading_info=True
            )
    except (OSError, ValueError) as err:
        raise InputError(f"{spec}: not a loadable sequence-classification model ({err})") from err
    fresh = newly_initialised(loading)
    if fresh:
        raise InputError(
            f"{spec}: {', '.join(fresh[:3])}{' ...' if len(fresh) > 3 else ''} missing from its "
            f"weights ({len(fresh)} tensors): transformers would score with newly initialised, "
            "random ones; pass the folder that holds the whole reward model"
        )
    offset = float(getattr(config, "rmlens_reward_offset", 0.0) or 0.0)  # an rmlens export's
    try:
        return SequenceClassifierRM(model.eval().to(device), tokenizer, index=score_index,
                                    offset=offset)
    except ValueError as err:
        raise InputError(f"{spec} with score index {score_index}: {err}") from err


LOADERS: dict[str, Callable[..., RewardModel]] = {**SINGLE_LOADERS, "ensemble": _load_ensemble}
"""Loader of each ``rm_config.json`` kind: ``loader(folder, config, **options)``."""


def newly_initialised(loading: dict) -> list[str]:
    """The weights transformers made up when loading (``output_loading_info``): missing
    from the checkpoint, or of another shape (the score head of a folder saved without it,
    a base model loaded as a classifier)."""
    missing = set(loading.get("missing_keys") or ())
    for key in loading.get("mismatched_keys") or ():
        missing.add(key[0] if isinstance(key, (tuple, list)) else key)
    return sorted(missing)
