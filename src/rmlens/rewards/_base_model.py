"""A run's network from its base model: the base loaded (``AutoModel``, or a causal LM for
an implicit RM), wrapped in LoRA adapters or trained fully, reset to the base weights before
each run, and its trained tensors copied out and back in."""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from rmlens._errors import InputError
from rmlens.backbones import (
    Backbone,
    default_max_length,
    hold_weights,
    is_causal,
    load_backbone,
    model_identity,
    prepare_tokenizer,
    quiet_bars,
    resolve_model,
    unloadable,
)
from rmlens.rewards._config import TrainConfig
from rmlens.rewards._nets import ExplicitNet, ImplicitNet


def disable_dropout(model: nn.Module) -> None:
    """Reward training without backbone dropout (as TRL's ``disable_dropout``)."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0


def hold_frozen(model: nn.Module, precision: str) -> nn.Module:
    """The frozen base weights held in bf16 once (``precision`` resolved to bf16;
    ``backbones.hold_weights``: the linear layers' weights, the residual stream fp32), before
    LoRA adapters are added: peft keeps the adapters fp32 (its ``autocast_adapter_dtype``),
    and the head is made fp32 after. fp32: ``model`` as it is."""
    return hold_weights(model, precision)


def lora_config(config: TrainConfig):
    from peft import LoraConfig

    targets = config.lora_targets.strip()
    if targets != "all-linear":
        targets = [t.strip() for t in targets.split(",") if t.strip()]
    return LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=targets,
    )


def wrap_lora(model: nn.Module, config: TrainConfig) -> nn.Module:
    """LoRA adapters through peft; the base weights are frozen."""
    from peft import get_peft_model

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            return get_peft_model(model, lora_config(config))
    except ValueError as err:
        raise InputError(f"`lora_targets` {config.lora_targets!r}: {err}") from err


def reset_lora(model: nn.Module) -> None:
    """Fresh adapters (A random, B = 0: the policy equals the base model again)."""
    from peft.tuners.lora import LoraLayer

    for module in model.modules():
        if isinstance(module, LoraLayer):
            for name in list(module.lora_A):
                module.reset_lora_parameters(name, True)


def trainable_state(net: nn.Module) -> dict[str, torch.Tensor]:
    """Copies (on CPU) of the trainable tensors, by parameter name."""
    return {
        n: p.detach().to("cpu", copy=True) for n, p in net.named_parameters() if p.requires_grad
    }


def load_trainable(net: nn.Module, state: dict[str, torch.Tensor]) -> None:
    params = dict(net.named_parameters())
    missing = [n for n, p in params.items() if p.requires_grad and n not in state]
    if missing or any(n not in params for n in state):
        raise ValueError(f"trainable weights do not match the network (missing {missing[:3]})")
    with torch.no_grad():
        for name, value in state.items():
            params[name].copy_(value)


def load_causal_lm(
    model: str, *, max_length: int | None = None, trust_remote_code: bool = False,
    format: str = "auto",
) -> Backbone:
    """Like ``load_backbone``, with ``AutoModelForCausalLM`` (the LM head is needed).

    Parameters
    ----------
    model : str
        A preset, local directory or hub id of a causal LM.
    max_length : int, optional
        Tokens kept per sequence (default: the model's limit; a given one is clamped to it).
    trust_remote_code : bool, default=False
        Only for models you trust; never on by default.
    format : {"auto", "chat", "raw"}, default="auto"
        How a (prompt, response) becomes tokens; auto: chat when the tokenizer has a
        template, else raw.

    Returns
    -------
    Backbone
        Its tokenizer and the causal LM (``kind`` causal, ``pooling`` last).
    """
    source, preset = resolve_model(model)
    needs = "an implicit RM needs a causal LM (a preset, local directory or hub id that " \
        "AutoModelForCausalLM loads)"
    try:
        with quiet_bars():
            config = AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        raise InputError(f"{unloadable(model, source, err)}; {needs}") from err
    if not (preset.kind == "causal" if preset else is_causal(config)):
        raise InputError(f"`model` '{model}': {needs}; its config names {config.architectures}")
    try:
        with quiet_bars():
            tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
            lm = AutoModelForCausalLM.from_pretrained(
                source, dtype=torch.float32, trust_remote_code=trust_remote_code
            )
    except (OSError, ValueError) as err:
        raise InputError(f"{unloadable(model, source, err)}; {needs}") from err
    limit = max_length or default_max_length(lm.config, tokenizer)  # a set one: clamped
    prepare_tokenizer(tokenizer)
    return Backbone(
        name=model,
        identity=model_identity(source, lm.config.to_dict()),
        tokenizer=tokenizer,
        model=lm.eval(),
        kind="causal",
        pooling="last",
        max_length=int(limit),
        format=format,
    )


def load_base(config: TrainConfig) -> Backbone:
    """The backbone a config trains: ``AutoModel`` (explicit) or a causal LM (implicit)."""
    if config.rm_kind == "implicit":
        return load_causal_lm(config.model, max_length=config.max_length, format=config.format)
    return load_backbone(config.model, max_length=config.max_length, format=config.format)


def body_model(bb: Backbone, cfg):
    """The backbone's model, wrapped in LoRA adapters or trained fully."""
    if cfg.finetune == "lora":
        return wrap_lora(bb.model, cfg)
    return bb.model.requires_grad_(True)


def base_state(bb: Backbone, cfg) -> dict | None:
    """Full fine-tuning: a CPU copy of the base weights, to go back to before each run."""
    if cfg.finetune != "full":
        return None
    return {k: v.detach().to("cpu", copy=True) for k, v in bb.model.state_dict().items()}


def explicit_net(bb: Backbone, cfg) -> ExplicitNet:
    net = ExplicitNet(body_model(bb, cfg), bb.hidden_size, bb.pooling, bb.kind == "causal")
    net.reset_head()
    return net


def implicit_net(bb: Backbone, cfg) -> ImplicitNet:
    if bb.kind != "causal" or bb.model.get_output_embeddings() is None:
        raise InputError(
            f"model '{bb.name}': an implicit RM needs a causal language model with an LM "
            "head (e.g. smollm2-135m), not an encoder"
        )
    reference = None
    if cfg.finetune == "full":
        reference = copy.deepcopy(bb.model).eval().requires_grad_(False)
    return ImplicitNet(body_model(bb, cfg), cfg.beta, reference)


def reset(net, state: dict | None, seed: int) -> None:
    """Back to the base weights, with fresh adapters and head drawn from ``seed``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if state is None:
            reset_lora(net)
        else:
            body = net.lm if isinstance(net, ImplicitNet) else net.body
            body.load_state_dict(state, strict=False)
        if isinstance(net, ExplicitNet):
            net.reset_head()
    net._owner = None


def make_net(bb: Backbone, cfg) -> ExplicitNet | ImplicitNet:
    """The network ``cfg.rm_kind`` trains, on the backbone ``bb``."""
    return implicit_net(bb, cfg) if cfg.rm_kind == "implicit" else explicit_net(bb, cfg)


def head_state(net: nn.Module) -> dict | None:
    """A CPU copy of an explicit RM's head before training (None for an implicit RM)."""
    head = getattr(net, "head", None)
    if head is None:
        return None
    return {k: v.detach().to("cpu", copy=True) for k, v in head.state_dict().items()}


def moved(net: nn.Module, base: dict | None, head_start: dict | None) -> dict[str, float | None]:
    """How far training moved the backbone (``body``) and the head (``head``; None for an
    implicit RM), each as ``|dW| / |W|`` (``body_update``, ``head_update``)."""
    head = None if head_start is None else head_update(net, head_start)
    return {"body": body_update(net, base), "head": head}


def body_update(net: nn.Module, base: dict | None) -> float:
    """How far training moved the backbone: ``|dW| / |W|`` (Frobenius norms summed over the
    body's weights). LoRA (``base`` None): dW is each adapter's update ``scale * B @ A``
    against its base layer's weight; full fine-tuning: the weights against ``base``, the CPU
    copy of the base weights (``base_state``)."""
    if base is None:
        return _relative(_lora_updates(net))
    body = net.lm if isinstance(net, ImplicitNet) else net.body
    return _relative(
        (p.detach().float().cpu() - base[name].float(), base[name].float())
        for name, p in body.named_parameters() if name in base
    )  # fmt: skip


def head_update(net: nn.Module, start: dict[str, torch.Tensor]) -> float:
    """How far training moved an explicit RM's head from ``start`` (its state after the
    run's reset): ``|w - w0| / |w0|``, Frobenius norms over its weight and bias."""
    now = net.head.state_dict()
    return _relative(
        (now[k].detach().float().cpu() - v.float(), v.float()) for k, v in start.items()
    )


def _lora_updates(net: nn.Module):
    """(|dW|^2, |W|^2) per adapter, with |s B A|_F^2 = s^2 sum((B'B) * (A A')) (two r x r
    products: no d_out x d_in update formed, no fp32 copy of a bf16 base weight)."""
    from peft.tuners.lora import LoraLayer

    for module in net.modules():
        if isinstance(module, LoraLayer):
            weight = module.get_base_layer().weight.detach()
            reference = float(torch.linalg.vector_norm(weight, dtype=torch.float32)) ** 2
            for name in module.lora_A:
                a = module.lora_A[name].weight.detach().float()
                b = module.lora_B[name].weight.detach().float()
                s = float(module.scaling[name])
                yield s * s * float(((b.t() @ b) * (a @ a.t())).sum()), reference


def _relative(pairs) -> float:
    """``sqrt(sum |d|^2 / sum |w|^2)`` over (change, reference) pairs, each a tensor or its
    squared norm already; 0 without any."""
    change = reference = 0.0
    for delta, weight in pairs:
        change += delta if isinstance(delta, float) else float(delta.pow(2).sum())
        reference += weight if isinstance(weight, float) else float(weight.pow(2).sum())
    return (change / reference) ** 0.5 if reference > 0 else 0.0
