"""Checkpoints of the fine-tuning loop that resume exactly.

A checkpoint is a folder ``step-*`` holding ``trainable.safetensors`` (the trained tensors),
``optimizer.safetensors`` (AdamW moments), ``rng.safetensors`` and ``state.json``;
``latest.json`` names the newest one and is written last, so a crash mid-save leaves the
previous checkpoint in force. Nothing is unpickled.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors.torch import load_file, save_file

from rmlens._errors import InputError
from rmlens._io import json_sha1, write_atomic, write_json
from rmlens.data import data_sha1
from rmlens.rewards._base_model import load_trainable, trainable_state

if TYPE_CHECKING:
    import pandas as pd


def save(root: Path, net, opt, state: dict, fingerprint: str, best, objective=None) -> None:
    name = f"step-{state['step']:08d}-epoch-{state['epoch']:04d}-batch-{state['batch']:06d}"
    folder = root / name
    save = lambda tensors, file: write_atomic(  # noqa: E731
        folder / file, lambda tmp: save_file(tensors, str(tmp))
    )
    save({k: v.contiguous() for k, v in trainable_state(net).items()}, "trainable.safetensors")
    moments = {}
    for i, entry in opt.state_dict()["state"].items():
        for key, value in entry.items():
            moments[f"{i}/{key}"] = value.detach().cpu().reshape(-1).contiguous()
    save(moments, "optimizer.safetensors")
    rng = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng.update({f"cuda{i}": s for i, s in enumerate(torch.cuda.get_rng_state_all())})
    save(rng, "rng.safetensors")
    if best is not None:
        save({k: v.contiguous() for k, v in best.items()}, "best.safetensors")
    if objective is not None and objective.state_dict():
        save({k: v.contiguous() for k, v in objective.state_dict().items()},
             "objective.safetensors")  # fmt: skip
    write_json({**state, "fingerprint": fingerprint}, folder / "state.json")
    write_json({"checkpoint": name}, root / "latest.json")
    for old in root.glob("step-*"):
        if old.name != name:
            shutil.rmtree(old, ignore_errors=True)


def restore(root: Path, net, opt, fingerprint: str, objective=None) -> tuple[dict, dict | None]:
    folder = root / json.loads((root / "latest.json").read_text())["checkpoint"]
    state = json.loads((folder / "state.json").read_text())
    if state.pop("fingerprint", None) != fingerprint:
        raise InputError(
            f"{root}: holds a checkpoint of another configuration or data; "
            "use another output folder or delete it"
        )
    load_trainable(net, load_file(str(folder / "trainable.safetensors")))
    params = [p for g in opt.param_groups for p in g["params"]]
    moments: dict[int, dict] = {}
    for key, value in load_file(str(folder / "optimizer.safetensors")).items():
        i, name = key.split("/")
        shape = () if name == "step" else params[int(i)].shape
        moments.setdefault(int(i), {})[name] = value.reshape(shape)
    opt.load_state_dict({"state": moments, "param_groups": opt.state_dict()["param_groups"]})
    rng = load_file(str(folder / "rng.safetensors"))
    torch.set_rng_state(rng["cpu"])
    if torch.cuda.is_available():
        cuda = [rng[k] for k in sorted(k for k in rng if k.startswith("cuda"))]
        if cuda:
            torch.cuda.set_rng_state_all(cuda)
    if objective is not None and (folder / "objective.safetensors").exists():
        objective.load_state_dict(load_file(str(folder / "objective.safetensors")))
    best_file = folder / "best.safetensors"
    best = load_file(str(best_file)) if best_file.exists() else None
    return state, best


def checkpoint_key(cfg, identity, data: pd.DataFrame, eval_data: pd.DataFrame | None) -> str:
    """Checkpoints' key: the settings, the base model and the data (``data_sha1``).

    The examples follow from these (tokenizer of the base, ``max_length``; the eval split
    from ``eval_fraction`` and ``seed``), so a checkpoint is resumed only for the same.
    """
    skip = {"device", "ensemble", "save_steps", "influence"}
    settings = {k: v for k, v in cfg.to_dict().items() if k not in skip}
    parts = [settings, identity, data_sha1(data)]
    parts.append(None if eval_data is None else data_sha1(eval_data))
    return json_sha1(parts, 16)
