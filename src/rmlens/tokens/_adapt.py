"""Token scorers over the reward models that ``rmlens.hub.load_rm`` returns.

A vocabulary sweep needs more than ``score(prompts, responses)``: it scores token-id
sequences that share a prefix, running the prefix once (KV cache) and only the short
suffixes per batch (``_scorers.py``). This adapter gives any loaded RM that interface with
the same weights, pooling and head, so a sweep and ``rm.score`` agree. It loads nothing:
every RM comes from ``rmlens.hub.load_rm``.

    explicit head (frozen backbone)      -> HeadScorer(backbone, head)
    fine-tuned explicit (LoRA or full)   -> HeadScorer(merged body, head)
    implicit (LoRA or full, or two LMs)  -> ImplicitScorer(policy, reference, beta)
    sequence classifier                  -> SeqClsScorer(model, index)
    ensemble                             -> the mean of its members' scorers (one
                                            scorer when they are heads on one backbone)
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from rmlens._errors import InputError
from rmlens.backbones import hold_weights
from rmlens.tokens._scorers import HeadScorer, ImplicitScorer, SeqClsScorer, TokenScorer


def token_scorer(rm: Any, *, name: str = "rm", consume: bool = False) -> TokenScorer:
    """A :class:`TokenScorer` with the weights of a loaded reward model.

    Parameters
    ----------
    rm : reward model, str or Path
        What :func:`rmlens.hub.load_rm` returns (``ExplicitHeadRM``, ``TunedRM``,
        ``SequenceClassifierRM``, ``EnsembleRM``); a path or preset is loaded with it
        first, on the CPU.
    name : str, default="rm"
        The scorer's name in warnings.
    consume : bool, default=False
        Let the scorer take ``rm``'s modules: LoRA adapters are merged into the weights in
        place, so ``rm`` itself must not be used afterwards. The default works on copies.

    Returns
    -------
    TokenScorer

    Examples
    --------
    >>> from rmlens.rewards import load_rm
    >>> scorer = token_scorer(load_rm("smollm2-135m-hh", device="cpu"))  # doctest: +SKIP
    """
    scorer = _adapted(rm, name, consume)
    if getattr(scorer, "format", None) is None:  # candidates are tokenized as the RM does
        scorer.format = getattr(rm, "format", None)
    return scorer


def _adapted(rm: Any, name: str, consume: bool) -> TokenScorer:
    """:func:`token_scorer` without the format."""
    # lazy: scipy loads only when this runs
    from rmlens.hub import EnsembleRM, SequenceClassifierRM
    from rmlens.rewards import ExplicitHeadRM, TunedRM

    if isinstance(rm, TokenScorer):
        return rm
    if isinstance(rm, (str, Path)):
        from rmlens.hub import load_rm

        return token_scorer(load_rm(rm, device="cpu"), name=name, consume=True)
    if isinstance(rm, ExplicitHeadRM):
        return _heads_scorer(rm.backbone, [rm.head], name, consume)
    if isinstance(rm, TunedRM):
        return _tuned_scorer(rm, name, consume)
    if isinstance(rm, SequenceClassifierRM):
        return SeqClsScorer(rm.model, rm.tokenizer, index=rm.index, name=name)
    if isinstance(rm, EnsembleRM):
        first = rm.members[0]
        if all(isinstance(m, ExplicitHeadRM) and m.backbone is getattr(first, "backbone", None)
               for m in rm.members):
            return _heads_scorer(first.backbone, [m.head for m in rm.members], name, consume)
        return EnsembleScorer([token_scorer(m, name=f"{name}[{n}]", consume=consume)
                               for m, n in zip(rm.members, rm.names)], name=name)
    raise TypeError(f"cannot sweep a {type(rm).__name__}: expected a reward model from "
                    "rmlens.hub.load_rm")


class _MeanHead(nn.Module):
    """Mean of several heads on the same pooled features: (B, d) -> (B,)."""

    def __init__(self, heads: list[nn.Module]):
        super().__init__()
        self.heads = nn.ModuleList(heads)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.stack([head(h).reshape(h.shape[0]) for head in self.heads]).mean(0)


def _heads_scorer(backbone, heads: list, name: str, consume: bool) -> HeadScorer:
    """Frozen-backbone explicit RMs (``HeadRM``): their heads on the backbone's pooling."""
    device = next(backbone.model.parameters()).device
    modules = [(h.head_ if consume else copy.deepcopy(h.head_)).to(device).eval() for h in heads]
    head = modules[0] if len(modules) == 1 else _MeanHead(modules)
    return HeadScorer(backbone.model, backbone.tokenizer, head, pooling=backbone.pooling,
                      name=name)


def _merged(model: nn.Module, precision: str = "fp32") -> nn.Module:
    """A plain transformers model: LoRA adapters merged into the weights in fp32 (exact for
    scoring; bf16 would round the update away), then held in ``precision``
    (``backbones.hold_weights``: bf16 rounds the merged weights once, as autocast would at
    each call)."""
    if hasattr(model, "merge_and_unload"):
        model = model.float().merge_and_unload()
    return hold_weights(model, precision)


def _tuned_scorer(tuned, name: str, consume: bool) -> TokenScorer:
    """A fine-tuned RM (``TunedRM``), explicit or implicit, LoRA or full."""
    tuned._activate()  # its own trained tensors, when several RMs share one network
    net, tokenizer = tuned.net, tuned.backbone.tokenizer
    own = (lambda m: m) if consume else copy.deepcopy
    if tuned.kind == "implicit":
        reference = net._reference[0]
        # fp32 whatever the RM's precision: log-probs from bf16 logits are too coarse
        if reference is None:  # LoRA: the reference is the policy with its adapters off
            policy = copy.deepcopy(net.lm).float().merge_and_unload()
            reference = own(net.lm).unload().float()
        else:
            policy = _merged(own(net.lm))
        return ImplicitScorer(policy.eval(), reference.eval(), tokenizer, beta=net.beta,
                              name=name)
    body = _merged(own(net.body), getattr(tuned, "precision", "fp32"))
    return HeadScorer(body.eval(), tokenizer, net.head,
                      pooling=tuned.backbone.pooling, name=name)


class EnsembleScorer(TokenScorer):
    """Mean reward of several token scorers over one vocabulary (an ensemble's sweep).

    Each member runs its own prefix cache; a candidate takes the cached route only when
    every member can score it from the cache.

    Parameters
    ----------
    scorers : list of TokenScorer
        The members; they must share a tokenizer and chat template (an InputError
        otherwise).
    name : str, default="rm"
        The ensemble's name in sweep tables.
    """

    def __init__(self, scorers: list[TokenScorer], *, name: str = "rm"):
        first = scorers[0].tokenizer
        for s in scorers[1:]:
            if s.tokenizer.get_vocab() != first.get_vocab() or getattr(
                s.tokenizer, "chat_template", None
            ) != getattr(first, "chat_template", None):
                raise InputError(f"{name}: ensemble members must share a tokenizer and chat "
                                 "template to be swept together; sweep them one by one")
        self.scorers = scorers
        self.tokenizer = first
        self.name = name
        self.can_cache = all(s.can_cache for s in scorers)

    def prepare(self, prompt):
        for s in self.scorers:
            s.prepare(prompt)

    def cacheable(self, seq, prefix_len):
        return all(s.cacheable(seq, prefix_len) for s in self.scorers)

    @torch.inference_mode()
    def full(self, seqs, padding_side="right"):
        return np.mean([s.full(seqs, padding_side) for s in self.scorers], axis=0)

    @torch.inference_mode()
    def prefix(self, ids):
        return [s.prefix(ids) for s in self.scorers]

    @torch.inference_mode()
    def suffix(self, state, suffix):
        return np.mean([s.suffix(st, suffix) for s, st in zip(self.scorers, state)], axis=0)
