"""SAEs on disk, in sae-lens's format: ``cfg.json`` and ``sae_weights.safetensors``.

The weights are ``W_enc`` (d, n_latents), ``b_enc`` (n_latents,), ``W_dec`` (n_latents, d),
``b_dec`` (d,), and ``threshold`` (n_latents,) for JumpReLU; ``cfg.json`` holds
``architecture`` (``topk``, ``standard`` or ``jumprelu``), ``d_in``, ``d_sae``, ``k`` and the
preprocessing flags. Both are read directly (safetensors and JSON, never a pickle), so an
SAE trained with sae-lens on the same vectors loads without sae-lens, and one written here
loads in sae-lens (``SAE.load_from_disk``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from rmlens._errors import InputError
from rmlens._io import write_atomic, write_json
from rmlens.sae._topk import TopKSAE

CFG = "cfg.json"
WEIGHTS = "sae_weights.safetensors"
SAE_LENS_VERSION = "6.0.0"  # the cfg.json layout written (sae-lens >= 6 reads it as is)
_ACTIVATION = {"topk": "topk", "standard": "relu", "jumprelu": "jumprelu"}


def save_sae(sae: TopKSAE, folder: str | Path, *, metadata: dict | None = None) -> Path:
    """Write ``sae`` into ``folder`` as ``cfg.json`` and ``sae_weights.safetensors``.

    Parameters
    ----------
    sae : TopKSAE
    folder : str or Path
    metadata : dict, optional
        Kept under ``cfg.json``'s ``metadata`` (what the SAE reads: model, layer).

    Returns
    -------
    Path
        The weights file (written atomically, before ``cfg.json``).
    """
    from safetensors.torch import save_file

    folder = Path(folder)
    architecture = {v: k for k, v in _ACTIVATION.items()}[sae.activation]
    state = {name: getattr(sae, name).detach().float().contiguous()
             for name in ("W_enc", "b_enc", "W_dec", "b_dec")}  # fmt: skip
    if sae.activation == "jumprelu":
        state["threshold"] = sae.threshold.detach().float().contiguous()
    path = write_atomic(folder / WEIGHTS, lambda tmp: save_file(state, str(tmp)))
    cfg = {
        "architecture": architecture, "d_in": sae.d, "d_sae": sae.n_latents,
        "dtype": "float32", "device": "cpu", "apply_b_dec_to_input": sae.subtract_b_dec,
        "normalize_activations": "none", "reshape_activations": "none",
        "metadata": {"sae_lens_version": SAE_LENS_VERSION, **(metadata or {})},
    }  # fmt: skip
    if sae.activation == "topk":
        cfg |= {"k": sae.k, "rescale_acts_by_decoder_norm": False}
    write_json(cfg, folder / CFG)
    return path


def load_sae(folder: str | Path, *, d: int | None = None) -> TopKSAE:
    """Read an SAE in sae-lens's format (an SAE written by :func:`save_sae` too).

    Parameters
    ----------
    folder : str or Path
        Holds ``cfg.json`` and ``sae_weights.safetensors``.
    d : int, optional
        The size of the vectors it will read (the backbone's hidden size): another
        ``d_in`` is an :class:`InputError`.

    Returns
    -------
    TopKSAE
        In eval mode, float32.

    Raises
    ------
    InputError
        A missing or unreadable file, a missing or misshapen weight, an architecture or
        preprocessing this reader does not apply (only ``topk``, ``standard``, ``jumprelu``
        without activation normalization), or ``d_in`` other than ``d``.
    """
    folder = Path(folder).expanduser()
    cfg = _read_cfg(folder)
    activation, k = _activation(cfg, folder / CFG)
    weights = _read_weights(folder / WEIGHTS)
    d_in, n = _shape(weights, folder / WEIGHTS)
    for key, found in (("d_in", d_in), ("d_sae", n)):
        if key in cfg and cfg[key] != found:
            raise InputError(f"{folder / CFG}: field '{key}' is {cfg[key]!r} but "
                             f"{WEIGHTS} holds {found}")
    if d is not None and d_in != d:
        raise InputError(f"`sae` {folder}: it reads vectors of size {d_in} (d_in), but the "
                         f"audit's backbone gives {d}; use an SAE trained on this backbone's "
                         "features")
    if activation == "topk" and not (isinstance(k, int) and 0 < k <= n):
        raise InputError(f"{folder / CFG}: field 'k' must be an int in 1..{n}, got {k!r}")
    sae = TopKSAE(d_in, n, k if activation == "topk" else None, activation=activation,
                  subtract_b_dec=bool(cfg.get("apply_b_dec_to_input", True)))
    with torch.no_grad():
        for name in ("W_enc", "b_enc", "W_dec", "b_dec"):
            getattr(sae, name).copy_(weights[name])
        if activation == "jumprelu":
            sae.threshold.copy_(_threshold(weights, folder / WEIGHTS))
    return sae.eval()


def weights_sha1(folder: str | Path) -> str:
    """SHA-1 of an SAE folder's weights file: which SAE made a table."""
    digest = hashlib.sha1()
    with open(Path(folder) / WEIGHTS, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def _read_cfg(folder: Path) -> dict[str, Any]:
    path = folder / CFG
    if not folder.is_dir():
        raise InputError(f"`sae` {folder}: no such folder (expected one holding {CFG} and "
                         f"{WEIGHTS}, sae-lens's format)")
    if not path.is_file():
        raise InputError(f"{path}: not found (an SAE folder in sae-lens's format holds {CFG} "
                         f"and {WEIGHTS})")
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(cfg, dict):
        raise InputError(f"{path}: expected a JSON object, found {type(cfg).__name__}")
    return cfg


def _activation(cfg: dict[str, Any], path: Path) -> tuple[str, Any]:
    """The activation and k of a cfg.json, old (before sae-lens 6) or new; refuse what this
    reader would apply wrongly."""
    fn = cfg.get("activation_fn", cfg.get("activation_fn_str"))
    architecture = cfg.get("architecture") or "standard"
    k = cfg.get("k")
    if architecture == "standard" and fn == "topk":  # sae-lens < 6 spelled TopK this way
        architecture, k = "topk", (cfg.get("activation_fn_kwargs") or {}).get("k", k)
    elif architecture == "standard" and fn not in (None, "relu"):
        raise InputError(f"{path}: activation_fn {fn!r} is not supported (relu or topk)")
    if architecture not in _ACTIVATION:
        raise InputError(f"{path}: architecture {architecture!r} is not supported (one of "
                         f"{', '.join(_ACTIVATION)})")
    for key, plain in (("normalize_activations", "none"), ("reshape_activations", "none")):
        if cfg.get(key, plain) not in (plain, None):
            raise InputError(f"{path}: {key} {cfg[key]!r} is not supported (only {plain!r}: "
                             "the SAE must read the vectors as they are)")
    if cfg.get("rescale_acts_by_decoder_norm"):
        raise InputError(f"{path}: rescale_acts_by_decoder_norm is not supported; fold the "
                         "decoder norms into the weights first (sae-lens fold_W_dec_norm)")
    return _ACTIVATION[architecture], k


def _read_weights(path: Path) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    if not path.is_file():
        raise InputError(f"{path}: not found (an SAE folder in sae-lens's format holds {CFG} "
                         f"and {WEIGHTS})")
    try:
        weights = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise InputError(f"{path}: not a readable safetensors file ({err})") from None
    missing = [key for key in ("W_enc", "b_enc", "W_dec", "b_dec") if key not in weights]
    if missing:
        raise InputError(f"{path}: weights {', '.join(missing)} are missing (found "
                         f"{', '.join(sorted(weights)) or 'none'})")
    return {key: value.float() for key, value in weights.items()}


def _shape(w: dict[str, torch.Tensor], path: Path) -> tuple[int, int]:
    """(d_in, d_sae) from W_enc, every other weight checked against it."""
    if w["W_enc"].ndim != 2:
        raise InputError(f"{path}: W_enc must be a matrix (d_in, d_sae), got shape "
                         f"{tuple(w['W_enc'].shape)}")
    d, n = w["W_enc"].shape
    for key, shape in (("b_enc", (n,)), ("W_dec", (n, d)), ("b_dec", (d,))):
        if tuple(w[key].shape) != shape:
            raise InputError(f"{path}: {key} must have shape {shape} (W_enc is {(d, n)}), "
                             f"got {tuple(w[key].shape)}")
    return int(d), int(n)


def _threshold(w: dict[str, torch.Tensor], path: Path) -> torch.Tensor:
    if "threshold" in w:
        t = w["threshold"]
    elif "log_threshold" in w:
        t = w["log_threshold"].exp()
    else:
        raise InputError(f"{path}: a jumprelu SAE needs the weight 'threshold'")
    if tuple(t.shape) != (w["W_enc"].shape[1],):
        raise InputError(f"{path}: threshold must have shape ({w['W_enc'].shape[1]},), got "
                         f"{tuple(t.shape)}")
    return t
