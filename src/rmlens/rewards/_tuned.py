"""Fine-tuned reward models as objects that score, save and load back.

A saved folder holds ``rm_config.json``, the tokenizer, and safetensors weights:

- explicit, LoRA: ``adapter/`` (peft adapters) + ``head.safetensors``;
- explicit, full: ``model/`` (the backbone) + ``head.safetensors``;
- implicit, LoRA: ``adapter/``; the reference is the base model (adapters off);
- implicit, full: ``model/`` (the policy); the reference is loaded from ``reference``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

import rmlens
from rmlens._errors import RmlensWarning
from rmlens._io import readable, write_json
from rmlens.backbones import (
    Backbone,
    check_base,
    flat_encoder,
    load_backbone,
    plain_attention,
    portable_name,
    prepare_tokenizer,
    resolve_format,
    resolve_precision,
)
from rmlens.rewards._base_model import hold_frozen, load_causal_lm, load_trainable
from rmlens.rewards._config import TrainConfig, resolve_device
from rmlens.rewards._models import RewardModel, needed_file
from rmlens.rewards._nets import ExplicitNet, ImplicitNet, Runtime, score_examples
from rmlens.rewards._packing import Example, make_example

GROUP = 8  # responses per packed example when scoring pairs


def _key(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def runtime_for(backbone: Backbone, config: TrainConfig, device: str, precision: str) -> Runtime:
    """Packed decoders run flat (no padding) where their attention is plain and a flat batch
    pays (``_nets.flat_pays``); encoders run flat where their attention allows it
    (``backbones.flat_encoder``). In bf16 (``precision``, resolved) every pass runs under
    bf16 autocast: a LoRA backbone's frozen linear weights are held in bf16
    (``backbones.hold_weights``), one trained in full keeps fp32 weights, cast per call."""
    mode = "packed" if config.packing else "causal"
    if mode == "packed" and plain_attention(backbone.model):
        mode = "auto"
    if backbone.kind != "causal":
        mode = "encoder-flat" if flat_encoder(backbone.model) else "encoder"
    return Runtime(
        mode=mode, pad_id=int(backbone.tokenizer.pad_token_id), device=device,
        precision=precision,
    )  # fmt: skip


class TunedRM(RewardModel):
    """A fine-tuned reward model with ``score(prompts, responses)``.

    Several RMs may share one network (runs of an audit, members of an ensemble): each keeps
    its own trained tensors and loads them into the network before scoring.

    Parameters
    ----------
    net : ExplicitNet or ImplicitNet
        The network (an explicit reward head on the model, or an implicit policy and
        reference).
    backbone : Backbone
        Tokenizer, base model name, kind and ``max_length``.
    config : TrainConfig
        The configuration it was trained with.
    weights : dict of str to torch.Tensor, optional
        This RM's trained tensors, loaded into a shared ``net`` before it scores; None: the
        network's own.
    precision : {"fp32", "bf16"}, optional
        The resolved precision it scores in; default the one its config resolves to here.
    """

    def __init__(
        self,
        net,
        backbone: Backbone,
        config: TrainConfig,
        *,
        weights: dict[str, torch.Tensor] | None = None,
        precision: str | None = None,
    ):
        self.net, self.backbone, self.config, self.weights = net, backbone, config, weights
        if precision is None:
            device = str(next(net.parameters()).device)
            precision = resolve_precision(config.precision, device)
        self.precision = precision
        self.kind = "implicit" if isinstance(net, ImplicitNet) else "explicit_finetuned"
        self._token = object()
        net._owner = self._token

    @property
    def format(self) -> str:
        """How it tokenizes a (prompt, response): chat, raw or pair. The one it was trained
        with (its config's, which training resolves and ``rm_config.json`` saves in
        ``train_config``), unless set; an RM saved before formats were recorded: its
        backbone's."""
        fmt = getattr(self, "_format", None) or self.config.format
        return self.backbone.format if fmt == "auto" else fmt

    @format.setter
    def format(self, value: str) -> None:
        self._format = resolve_format(value, self.backbone.tokenizer, self.backbone.kind)

    @property
    def encoding(self) -> tuple[Any, int, str]:
        return self.backbone.tokenizer, self.backbone.max_length, self.format

    @property
    def runtime(self) -> Runtime:
        """How the network runs here: its device and the config's precision and batching."""
        device = str(next(self.net.parameters()).device)
        return runtime_for(self.backbone, self.config, device, self.precision)

    def _activate(self) -> None:
        if getattr(self.net, "_owner", None) is not self._token and self.weights is not None:
            load_trainable(self.net, self.weights)
            self.net._owner = self._token

    def score_examples(
        self, examples: list[Example], *, batch_size: int | None = None, quiet: bool = True
    ) -> np.ndarray:
        """Rewards (n, K) of tokenized examples.

        Parameters
        ----------
        examples : list of Example
            Tokenized prompts, each with K responses (:meth:`examples`).
        batch_size : int, optional
            Examples per forward pass; default the config's ``batch_size``.
        quiet : bool, default=True
            No progress bar.

        Returns
        -------
        ndarray of shape (n, K)
            The reward of each response of each example.
        """
        self._activate()
        return score_examples(
            self.net,
            examples,
            self.runtime,
            batch_size=batch_size or self.config.batch_size,
            quiet=quiet,
        )

    def examples(self, prompts: Sequence[Any], responses: Sequence[Sequence[Any]]):
        """Tokenize each prompt with its responses as one packed example.

        Parameters
        ----------
        prompts : sequence of str or of conversations
            The prompts.
        responses : sequence of sequence of str or of conversations
            The responses of each prompt.

        Returns
        -------
        list of Example
            One per prompt, for :meth:`score_examples`.
        """
        bb, implicit, fmt = self.backbone, self.kind == "implicit", self.format
        return [
            make_example(bb.tokenizer, p, list(rs), bb.max_length, with_response=implicit,
                         format=fmt)
            for p, rs in zip(prompts, responses)
        ]  # fmt: skip

    def score(
        self, prompts: Sequence[Any], responses: Sequence[Any], *, batch_size: int | None = None
    ) -> np.ndarray:
        """Rewards (n,) of (prompt, response) pairs.

        Parameters
        ----------
        prompts, responses : sequence of str or of conversations
            One prompt and one response per reward.
        batch_size : int, optional
            Examples per forward pass; default the config's ``batch_size``.

        Returns
        -------
        ndarray of shape (n,)
            The rewards.
        """
        examples = self.examples(prompts, [[r] for r in responses])
        return self.score_examples(examples, batch_size=batch_size)[:, 0]

    def score_pairs(
        self, pairs: pd.DataFrame, *, batch_size: int | None = None, quiet: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """(r_chosen, r_rejected), each (n_pairs,).

        Each prompt is encoded once with all its distinct responses (up to
        ``GROUP`` per packed example), so repeated prompts and responses cost nothing extra.

        Parameters
        ----------
        pairs : DataFrame
            A pair table with ``prompt``, ``chosen`` and ``rejected``.
        batch_size : int, optional
            Examples per forward pass; default the config's ``batch_size``.
        quiet : bool, default=True
            No progress bar.

        Returns
        -------
        r_chosen, r_rejected : ndarray of shape (n_pairs,)
            The rewards of the chosen and of the rejected responses.
        """
        groups: dict[str, tuple[Any, dict[str, Any]]] = {}
        keys = []
        for prompt, chosen, rejected in zip(pairs.prompt, pairs.chosen, pairs.rejected):
            p = _key(prompt)
            _, responses = groups.setdefault(p, (prompt, {}))
            for response in (chosen, rejected):
                responses.setdefault(_key(response), response)
            keys.append((p, _key(chosen), _key(rejected)))
        prompts, lists, owners = [], [], []
        for p, (prompt, responses) in groups.items():
            items = list(responses.items())
            for start in range(0, len(items), GROUP):
                chunk = items[start : start + GROUP]
                prompts.append(prompt)
                lists.append([r for _, r in chunk])
                owners.append([(p, k) for k, _ in chunk])
        r = self.score_examples(self.examples(prompts, lists), batch_size=batch_size, quiet=quiet)
        table = {owner: r[i, j] for i, row in enumerate(owners) for j, owner in enumerate(row)}
        r_c = np.array([table[(p, c)] for p, c, _ in keys], dtype=float)
        r_r = np.array([table[(p, j)] for p, _, j in keys], dtype=float)
        return r_c, r_r

    def save(self, path: str | Path) -> Path:
        """Write the RM into the folder ``path`` (other files there are left alone).

        Everything is written to a temporary folder first and moved in entry by entry,
        ``rm_config.json`` last, so a folder with that file holds a complete RM.

        Parameters
        ----------
        path : str or Path
            The folder (created if needed).

        Returns
        -------
        Path
            ``path``.
        """
        self._activate()
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".rm.", suffix=".tmp", dir=path))
        try:
            self._write(tmp)
            readable(tmp)
            (path / "rm_config.json").unlink(missing_ok=True)
            entries = sorted(tmp.iterdir(), key=lambda e: e.name == "rm_config.json")
            for entry in entries:
                target = path / entry.name
                if target.is_dir():
                    shutil.rmtree(target)
                os.replace(entry, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return path

    def _write(self, folder: Path) -> None:
        net, cfg, bb = self.net, self.config, self.backbone
        model = net.lm if self.kind == "implicit" else net.body
        if cfg.finetune == "lora":
            model.save_pretrained(folder / "adapter", safe_serialization=True)
        else:
            model.save_pretrained(folder / "model", safe_serialization=True)
        if self.kind != "implicit":
            head = {k: v.detach().cpu().contiguous() for k, v in net.head.state_dict().items()}
            save_file(head, str(folder / "head.safetensors"))
        bb.tokenizer.save_pretrained(folder)
        write_json(
            {
                "kind": self.kind,
                "version": rmlens.__version__,
                "base": portable_name(bb.name),
                "base_identity": bb.identity,
                "reference": portable_name(bb.name) if self.kind == "implicit" else None,
                "finetune": cfg.finetune,
                "format": self.format,
                "backbone_kind": bb.kind,
                "pooling": bb.pooling,
                "max_length": bb.max_length,
                "beta": cfg.beta if self.kind == "implicit" else None,
                "precision": self.precision,
                "train_config": cfg.to_dict(),
            },
            folder / "rm_config.json",
        )


def load_tuned(
    path: str | Path, saved: dict, *, device: str = "auto", precision: str = "auto", **_: Any
) -> TunedRM:
    """Load a folder written by :meth:`TunedRM.save` (used through ``load_rm``).

    Parameters
    ----------
    path : str or Path
        The RM folder.
    saved : dict
        Its ``rm_config.json``.
    device : str, default="auto"
        Where the RM scores.
    precision : {"auto", "fp32", "bf16"}, default="auto"
        The precision it scores in (a LoRA RM's base weights are then held in bf16 once; a
        fully fine-tuned one keeps fp32 weights and scores under autocast).
    **_
        The other options of ``load_rm``, which a fine-tuned RM does not read.

    Returns
    -------
    TunedRM
        The RM, in eval mode.
    """
    from peft import PeftModel  # optional: only LoRA RMs need it

    path = Path(path)
    config = TrainConfig.from_dict(saved["train_config"])
    implicit = saved["kind"] == "implicit"
    base_name, length = saved["base"], saved["max_length"]
    lora = saved["finetune"] == "lora"
    needed_file(path, "adapter" if lora else "model",
                "its fine-tuned LoRA adapter" if lora else "its fine-tuned model")
    if not implicit:
        needed_file(path, "head.safetensors", "the reward head on its fine-tuned model")
    check_base(base_name, str(path / "rm_config.json"))
    base = (load_causal_lm if implicit else load_backbone)(base_name, max_length=length)
    if base.identity != saved.get("base_identity"):
        warnings.warn(
            f"{path}: the base model '{base_name}' differs from the one this RM was trained "
            "on (files changed)", RmlensWarning, stacklevel=2,
        )  # fmt: skip
    dev = resolve_device(device)
    resolved = resolve_precision(precision, dev, task="score")
    if lora:
        hold_frozen(base.model, resolved)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            model = PeftModel.from_pretrained(base.model, str(path / "adapter"))
    else:
        cls = AutoModelForCausalLM if implicit else AutoModel
        model = cls.from_pretrained(str(path / "model"), dtype=torch.float32)
    tokenizer = prepare_tokenizer(AutoTokenizer.from_pretrained(str(path)))
    if implicit:
        reference = None if lora else base.model
        net = ImplicitNet(model, saved["beta"], reference)
    else:
        hidden = int(model.config.hidden_size)
        net = ExplicitNet(model, hidden, saved["pooling"], saved["backbone_kind"] == "causal")
        net.head.load_state_dict(load_file(str(path / "head.safetensors")))
    net.eval().requires_grad_(False)
    net.to(dev)
    if implicit and net._reference[0] is not None:
        net._reference[0].to(dev).eval()
    backbone = Backbone(
        name=base_name,
        identity=saved.get("base_identity", ""),
        tokenizer=tokenizer,
        model=model,
        kind=saved["backbone_kind"],
        pooling=saved["pooling"],
        max_length=int(length),
    )
    return TunedRM(net, backbone, config, precision=resolved)
