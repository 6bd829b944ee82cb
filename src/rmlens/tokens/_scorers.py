"""Reward models as token scorers: full sequences, or a cached prefix plus short suffixes.

A scorer gives the reward of token-id sequences two ways that must agree:

- ``full(seqs)``: padded batches of whole sequences (the reference);
- ``prefix(ids)`` once, then ``suffix(state, suffix_ids)`` per batch: only the suffix runs,
  at positions ``L .. L + s - 1``, attending to the prefix's cached keys and values (shared
  by the batch without copies where the architecture allows, see ``_attention.py``; else
  the KV cache broadcast over the batch).

Three kinds: :class:`HeadScorer` (explicit RM: causal backbone + head on the last real
token, r = w . h + b), :class:`SeqClsScorer` (a Hugging Face sequence-classification RM)
and :class:`ImplicitScorer` (beta * (log pi - log pi_ref) of the response tokens).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from rmlens.backbones import collate, pool, position_ids
from rmlens.tokens._prefix_cache import (
    is_decoder_only,
    model_device,
    positions_kwarg,
    run_prefix,
    run_suffix,
)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class TokenScorer:
    """Base class: reward of token-id sequences, full or with a cached prefix.

    Attributes
    ----------
    tokenizer : PreTrainedTokenizerBase
    name : str
    can_cache : bool
        False for encoders (the prompt's states depend on the response): full scoring only.
    fast_attention : bool
        Attend to the shared prefix without copying it per candidate
        (:func:`~rmlens.tokens._attention.shared_prefix_attention`) where the architecture
        allows; False uses the broadcast KV cache.
    """

    tokenizer: PreTrainedTokenizerBase
    name: str = "rm"
    can_cache: bool = True
    fast_attention: bool = True

    def prepare(self, prompt: str) -> None:
        """Called once per prompt before scoring its candidates.

        Parameters
        ----------
        prompt : str
            The prompt whose candidates are scored next (an implicit RM templates it to
            find where the response starts).
        """

    def cacheable(self, seq: Sequence[int], prefix_len: int) -> bool:
        """Whether ``seq`` (which starts with the prefix) can be scored from the cache.

        Parameters
        ----------
        seq : sequence of int
            Token ids of the whole sequence, prefix first.
        prefix_len : int
            Length of the cached prefix.

        Returns
        -------
        bool
            False when the reward reads a position inside the prefix (then ``seq`` is
            scored with :meth:`full`).
        """
        return True

    @torch.inference_mode()
    def full(self, seqs: Sequence[Sequence[int]], padding_side: str = "right") -> np.ndarray:
        """Rewards of whole sequences, padded into one batch (the reference scoring).

        Parameters
        ----------
        seqs : sequence of sequence of int
            Token ids of each sequence.
        padding_side : {"right", "left"}, default="right"
            Where the batch is padded.

        Returns
        -------
        ndarray of shape (len(seqs),), float
        """
        raise NotImplementedError

    @torch.inference_mode()
    def prefix(self, ids: Sequence[int]) -> Any:
        """Run the shared prefix once and keep what :meth:`suffix` needs.

        Parameters
        ----------
        ids : sequence of int
            Token ids of the prefix.

        Returns
        -------
        object
            The scorer's state: the KV cache of the prefix and whatever else its suffixes
            need (a pooled sum, the last log-probabilities).
        """
        raise NotImplementedError

    @torch.inference_mode()
    def suffix(self, state: Any, suffix: torch.Tensor) -> np.ndarray:
        """Rewards of the prefix followed by each row of ``suffix``, from the cached state.

        Parameters
        ----------
        state : object
            What :meth:`prefix` returned.
        suffix : torch.Tensor of shape (B, s), int
            A batch of suffixes of equal length ``s``.

        Returns
        -------
        ndarray of shape (B,), float
            Equal to :meth:`full` of the whole sequences, up to float error.
        """
        raise NotImplementedError

    @property
    def pad_id(self) -> int:
        """The tokenizer's pad id, else its end-of-sequence or unknown id, else 0."""
        tok = self.tokenizer
        for pad in (tok.pad_token_id, tok.eos_token_id, tok.unk_token_id):
            if pad is not None:
                return int(pad)
        return 0


def _as_head(head: Any, bias: Any = None) -> Callable[[torch.Tensor], torch.Tensor]:
    """A (B, d) -> (B,) reward head from a weight vector (+ bias), a Linear or any module."""
    if isinstance(head, nn.Module) or (callable(head) and not isinstance(head, np.ndarray)):
        return lambda h: head(h).reshape(h.shape[0], -1)[:, 0]
    w = torch.as_tensor(np.asarray(head, dtype=np.float32)).reshape(-1)  # (d,)
    b = torch.as_tensor(np.asarray(0.0 if bias is None else bias, dtype=np.float32)).reshape(())
    return lambda h: h @ w.to(h) + b.to(h)  # r = w . h + b, (B,)


class PooledScorer(TokenScorer):
    """Reward = head(pooled hidden states) of a transformer body.

    ``pooling="last"``: the last real token or, with ``pad_rule=pad_id``, the rightmost
    token whose id is not ``pad_id`` (how Hugging Face sequence classifiers pool);
    ``pooling="mean"``: the mean over real tokens (the prefix's sum is cached too).

    Parameters
    ----------
    body : torch.nn.Module
        The transformer body; called with ``input_ids`` and ``attention_mask``, it returns
        ``last_hidden_state``.
    head : callable
        Maps pooled hidden states (B, d) to rewards (B,).
    tokenizer : PreTrainedTokenizerBase
        The body's tokenizer.
    name : str, default="rm"
        The RM's name in sweep tables.
    pooling : {"last", "mean"}, default="last"
        Pool at the last real token or average over the real tokens.
    pad_rule : int, optional
        With ``pooling="last"``: pool at the rightmost token whose id is not this one.
    can_cache : bool, default=True
        False scores every sequence in full (encoders, whose prompt states depend on the
        response).
    """

    def __init__(self, body: nn.Module, head: Callable, tokenizer, *, name: str = "rm",
                 pooling: str = "last", pad_rule: int | None = None, can_cache: bool = True):
        if pooling not in ("last", "mean"):
            raise ValueError(f"pooling must be 'last' or 'mean', got {pooling!r}")
        self.body = body
        self.head = head
        self.tokenizer = tokenizer
        self.name = name
        self.pooling = pooling
        self.pad_rule = pad_rule
        self.can_cache = can_cache

    def _pool_index(self, seq: Sequence[int]) -> int:
        if self.pad_rule is None:
            return len(seq) - 1
        real = [i for i, t in enumerate(seq) if t != self.pad_rule]
        return real[-1] if real else 0

    def cacheable(self, seq: Sequence[int], prefix_len: int) -> bool:
        return self.pooling == "mean" or self._pool_index(seq) >= prefix_len

    @torch.inference_mode()
    def full(self, seqs, padding_side="right"):
        device = model_device(self.body)
        ids, mask = collate(seqs, self.pad_id, padding_side)
        mask = mask.to(device)
        hidden = self.body(
            input_ids=ids.to(device), attention_mask=mask,
            **positions_kwarg(self.body, position_ids(mask)),
        ).last_hidden_state  # (B, T, d)
        if self.pooling == "mean" or self.pad_rule is None:
            return self.head(pool(hidden, mask, self.pooling)).float().cpu().numpy()
        offset = (mask.shape[1] - mask.sum(1)) if padding_side == "left" else 0
        index = torch.as_tensor([self._pool_index(s) for s in seqs], device=device) + offset
        pooled = hidden[torch.arange(len(seqs), device=device), index]  # (B, d)
        return self.head(pooled).float().cpu().numpy()

    @torch.inference_mode()
    def prefix(self, ids):
        out, cache = run_prefix(self.body, ids)
        return cache, len(ids), out.last_hidden_state[0].sum(0)  # prefix sum (d,) for "mean"

    @torch.inference_mode()
    def suffix(self, state, suffix):
        cache, prefix_len, prefix_sum = state
        hidden = run_suffix(self.body, cache, prefix_len, suffix,
                            self.fast_attention).last_hidden_state  # (B, s, d)
        if self.pooling == "mean":
            pooled = (prefix_sum + hidden.sum(1)) / (prefix_len + suffix.shape[1])
            return self.head(pooled).float().cpu().numpy()
        index = torch.as_tensor(
            [self._pool_index([-1] * prefix_len + row) - prefix_len for row in suffix.tolist()]
        )
        pooled = hidden[torch.arange(len(suffix)), index.to(hidden.device)]  # (B, d)
        return self.head(pooled).float().cpu().numpy()


class HeadScorer(PooledScorer):
    """Explicit RM: a backbone and a head on its pooled hidden state, r = w . h + b.

    Parameters
    ----------
    model : PreTrainedModel
        A causal LM or its base model (``AutoModel``); its ``base_model`` gives the hidden
        states, as featurization does. Encoders work too, scored in full (no cache).
    tokenizer : PreTrainedTokenizerBase
    weight : array-like of shape (d,) or (1, d), or torch.nn.Module
        Head weights ``w``, or a module mapping (B, d) features to (B,) or (B, 1) rewards
        (an ``nn.Linear(d, 1)``, or ``HeadRM.head_``).
    bias : float, optional
        ``b`` when ``weight`` is a vector.
    pooling : {"last", "mean"}, default="last"
        Last real token (causal backbones) or mean over tokens (encoders), as featurized.
    name : str, default="rm"

    Examples
    --------
    >>> import torch
    >>> from rmlens.tokens import sweep_prompt
    >>> from rmlens.tokens._tiny import tiny_causal_lm, tiny_tokenizer
    >>> tok = tiny_tokenizer()
    >>> scorer = HeadScorer(tiny_causal_lm(tok), tok, torch.ones(32), 0.0)
    >>> frame, info = sweep_prompt(scorer, "What, in one word, is the best thing ever?")
    >>> len(frame) + info.n_skipped_special == len(tok)
    True
    """

    def __init__(self, model, tokenizer, weight, bias=None, *, pooling: str = "last",
                 name: str = "rm"):
        body = getattr(model, "base_model", model)
        super().__init__(body, _as_head(weight, bias), tokenizer, name=name, pooling=pooling,
                         can_cache=is_decoder_only(body.config))


class SeqClsScorer(PooledScorer):
    """A Hugging Face ``AutoModelForSequenceClassification`` RM: reward = logits[:, index].

    Decoder-only classifiers (``score`` head on the body, pooled at the rightmost non-pad
    token as transformers does) use the prefix cache; other models are scored in full with
    their own forward.

    Parameters
    ----------
    model : PreTrainedModel
        The sequence-classification model.
    tokenizer : PreTrainedTokenizerBase
        Its tokenizer.
    index : int, default=0
        Which logit is the reward.
    name : str, default="rm"
        The RM's name in sweep tables.
    """

    def __init__(self, model, tokenizer, *, index: int = 0, name: str = "rm"):
        n_labels = int(getattr(model.config, "num_labels", 1))
        if not 0 <= index < n_labels:
            raise ValueError(f"score index {index} is outside the model's {n_labels} logits")
        self.model = model
        self.index = index
        pad = model.config.get_text_config().pad_token_id if hasattr(
            model.config, "get_text_config") else model.config.pad_token_id
        score = getattr(model, "score", None)
        fast = isinstance(score, nn.Module) and is_decoder_only(model.config)
        super().__init__(
            getattr(model, "base_model", model),
            lambda h: score(h)[..., index],
            tokenizer, name=name, pad_rule=pad, can_cache=fast,
        )
        self._generic = isinstance(score, nn.Module)

    @torch.inference_mode()
    def full(self, seqs, padding_side="right"):
        if self._generic:
            return super().full(seqs, padding_side)
        device = model_device(self.model)
        rows = [seqs] if self.model.config.pad_token_id is not None else [[s] for s in seqs]
        out = []
        for group in rows:
            ids, mask = collate(group, self.pad_id, "right")
            logits = self.model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
            out.append(logits[:, self.index].float().cpu().numpy())
        return np.concatenate(out)


class ImplicitScorer(TokenScorer):
    """Implicit RM (DPO): r = beta * sum_t (log pi(y_t | .) - log pi_ref(y_t | .)).

    The sum runs over the response tokens: every token after the templated prompt
    (``add_generation_prompt=True``), closing tokens included, as DPO training masks them.

    Parameters
    ----------
    policy, reference : PreTrainedModel
        Causal LMs with LM heads sharing ``tokenizer``.
    tokenizer : PreTrainedTokenizerBase
        The tokenizer of both models.
    beta : float, default=0.1
        The KL coefficient of the implicit reward.
    name : str, default="rm"
        The RM's name in sweep tables.
    """

    def __init__(self, policy, reference, tokenizer, *, beta: float = 0.1, name: str = "rm"):
        self.models = (policy, reference)
        self.tokenizer = tokenizer
        self.beta = float(beta)
        self.name = name
        self.can_cache = is_decoder_only(policy.config) and is_decoder_only(reference.config)
        self._prompt_ids: list[int] = []

    def prepare(self, prompt):
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                           add_generation_prompt=True)
            self._prompt_ids = tok(text, add_special_tokens=False)["input_ids"]
        else:
            self._prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]

    def response_start(self, seq: Sequence[int]) -> int:
        """Index of the first response token: where ``seq`` leaves the templated prompt.

        Parameters
        ----------
        seq : sequence of int
            Token ids of the prompt and response, as scored.

        Returns
        -------
        int
            The length of the common start of ``seq`` and the prompt of :meth:`prepare`
            (at least 1).
        """
        n = 0
        for a, b in zip(seq, self._prompt_ids):
            if a != b:
                break
            n += 1
        return max(n, 1)

    def cacheable(self, seq, prefix_len):
        return self.response_start(seq) >= prefix_len

    @torch.inference_mode()
    def full(self, seqs, padding_side="right"):
        ids, mask = collate(seqs, self.pad_id, padding_side)
        positions = position_ids(mask)
        offset = mask.shape[1] - mask.sum(1) if padding_side == "left" else 0
        start = torch.as_tensor([self.response_start(s) for s in seqs]) + offset  # (B,)
        cols = torch.arange(ids.shape[1])
        keep = (cols[None, 1:] >= start[:, None]) & mask[:, 1:].bool()  # (B, T-1) targets kept
        total = []
        for model in self.models:
            device = model_device(model)
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device),
                           position_ids=positions.to(device)).logits.float()  # (B, T, V)
            logp = torch.log_softmax(logits[:, :-1], -1)  # predicts tokens 1..T-1
            target = logp.gather(-1, ids[:, 1:, None].to(device))[..., 0]  # (B, T-1)
            total.append((target * keep.to(device)).sum(1).cpu())
        return (self.beta * (total[0] - total[1])).numpy()

    @torch.inference_mode()
    def prefix(self, ids):
        states = []
        for model in self.models:
            out, cache = run_prefix(model, ids)
            states.append((cache, torch.log_softmax(out.logits[0, -1].float(), -1)))  # (V,)
        return states, list(ids)

    @torch.inference_mode()
    def suffix(self, state, suffix):
        states, prefix = state
        cut, s = len(prefix), suffix.shape[1]
        start = torch.as_tensor([self.response_start(prefix + row) for row in suffix.tolist()])
        keep = (cut + torch.arange(s))[None, :] >= start[:, None]  # (B, s) response tokens
        total = []
        for model, (cache, last) in zip(self.models, states):
            out = run_suffix(model, cache, cut, suffix, self.fast_attention)
            logits = out.logits.float()  # (B, s, V)
            suf = suffix.to(logits.device)
            first = last.to(logits.device)[suf[:, :1]]  # (B, 1): log p(suffix[0] | prefix)
            logp = torch.log_softmax(logits[:, :-1], -1)  # (B, s-1, V)
            rest = logp.gather(-1, suf[:, 1:, None])[..., 0]  # (B, s-1)
            token_lp = torch.cat([first, rest], 1)  # (B, s) log p of each suffix token
            total.append((token_lp * keep.to(token_lp.device)).sum(1).cpu())
        return (self.beta * (total[0] - total[1])).numpy()
