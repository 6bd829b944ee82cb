"""A policy's sampled responses: many per prompt, batched, with a KV cache.

Best-of-n as Gao et al. (2023) run it needs a policy's own samples, tens per prompt. A
causal LM (a preset, a folder or a hub id) writes them through transformers' ``generate``:
each prompt read once in the batch's left-padded input, its keys and values then copied to
its ``n`` sequences (``generate``'s own ``num_return_sequences`` would read the prompt ``n``
times: at 64 samples, most of the work), sampled at temperature 1 (top-p optional) up to
``max_new_tokens`` new tokens. A prompt is written with the model's chat
template (a transcript prompt as its turns), then the assistant's turn opened; without a
template, as raw text.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch

from rmlens._errors import InputError
from rmlens.backbones._load import quiet_hub
from rmlens.backbones._precision import hold_weights
from rmlens.backbones._presets import resolve_model, unloadable
from rmlens.backbones._quiet import quiet_bars
from rmlens.backbones._tokenize import prompt_messages


def prompt_text(tokenizer, prompt: Any) -> str:
    """``prompt`` as the policy reads it: its chat template with the assistant's turn
    opened, or the raw text where the tokenizer has no template."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(prompt_messages(prompt), tokenize=False,
                                             add_generation_prompt=True)  # fmt: skip
    return prompt if isinstance(prompt, str) else "\n".join(m["content"] for m in prompt)


def load_policy(model: str, *, device: str = "cpu", precision: str = "fp32",
                trust_remote_code: bool = False):  # fmt: skip
    """A causal LM and its tokenizer (padding on the left, as generation needs), its linear
    weights held in ``precision`` (resolved)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source, _ = resolve_model(model)
    try:
        with quiet_hub(), quiet_bars():
            tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
            lm = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32,
                                                      trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        raise InputError(unloadable(model, source, err)) from err
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    lm.eval().to(device)
    return hold_weights(lm, precision), tokenizer


@torch.inference_mode()
def sample_responses(
    lm,
    tokenizer,
    prompts: Sequence[Any],
    n: int,
    *,
    max_new_tokens: int = 48,
    temperature: float = 1.0,
    top_p: float | None = None,
    batch_size: int = 256,
    seed: int = 0,
    advance: Callable[[int], None] | None = None,
) -> list[list[str]]:
    """``n`` responses sampled from ``lm`` for each prompt.

    Parameters
    ----------
    lm, tokenizer
        A causal LM and its tokenizer (:func:`load_policy`).
    prompts : sequence
        Prompts as the pair schema holds them (text, a transcript, or chat messages).
    n : int
        Responses per prompt.
    max_new_tokens : int, default=48
    temperature : float, default=1.0
    top_p : float, optional
        Nucleus sampling's mass; None samples from the whole distribution.
    batch_size : int, default=256
        Sequences per ``generate`` call (``batch_size // n`` prompts, at least one).
    seed : int, default=0
        Seeds torch's generator once: the same prompts, settings and seed give the same
        responses on one machine and precision.
    advance : callable, optional
        Called with the number of prompts done.

    Returns
    -------
    list of list of str
        Per prompt, its ``n`` responses (special tokens removed, whitespace stripped).
    """
    torch.manual_seed(seed)
    device = next(lm.parameters()).device
    per_call = max(1, batch_size // n)
    texts = [prompt_text(tokenizer, p) for p in prompts]
    # the whole distribution unless top_p is given: not the model's own generation defaults
    sampling = {"do_sample": True, "temperature": temperature, "top_k": 0,
                "top_p": 1.0 if top_p is None else top_p}
    out: list[list[str]] = []
    for start in range(0, len(texts), per_call):
        chunk = texts[start : start + per_call]
        batch = tokenizer(chunk, return_tensors="pt", padding=True, padding_side="left",
                          add_special_tokens=False)  # fmt: skip
        ids = _sample(lm, batch.to(device), n, max_new_tokens=max_new_tokens,
                      pad_token_id=tokenizer.pad_token_id, **sampling)  # fmt: skip
        new = ids[:, batch["input_ids"].shape[1]:]
        decoded = tokenizer.batch_decode(new, skip_special_tokens=True)
        out += [[d.strip() for d in decoded[i * n : (i + 1) * n]] for i in range(len(chunk))]
        if advance is not None:
            advance(len(chunk))
    return out


def _sample(lm, batch, n: int, *, shared_prefix: bool = True, **generation) -> torch.Tensor:
    """``n`` sequences per row of a left-padded ``batch``: the prompt and its samples.

    With ``shared_prefix``, each prompt but its last token goes through the model once and
    its cache is repeated ``n`` times; ``generate`` then reads only the last token (its
    positions from the attention mask, as for the plain route)."""
    ids, mask = batch["input_ids"], batch["attention_mask"]
    if shared_prefix and ids.shape[1] >= 2:
        # transformers 5 calls the KV cache ``cache``, 4.x ``past_key_values``
        key = "cache" if "cache" in inspect.signature(lm.forward).parameters else "past_key_values"
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
        cache = lm(input_ids=ids[:, :-1], attention_mask=mask[:, :-1],
                   position_ids=positions[:, :-1], use_cache=True)[key]
        if hasattr(cache, "batch_repeat_interleave"):  # a cache that copies per row
            cache.batch_repeat_interleave(n)
            return lm.generate(input_ids=ids.repeat_interleave(n, dim=0),
                               attention_mask=mask.repeat_interleave(n, dim=0), **{key: cache},
                               **generation)  # fmt: skip
    return lm.generate(input_ids=ids, attention_mask=mask, num_return_sequences=n,
                       **generation)  # fmt: skip
