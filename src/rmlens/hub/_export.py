"""Export an rmlens RM as a standard Hugging Face model folder (DESIGN.md section 2, Export).

An explicit RM on a causal backbone, r(x, y) = w . h(x, y) + b with h the last real token's
hidden state, is exactly what ``AutoModelForSequenceClassification`` computes for causal LMs
(``score(hidden)[last non-pad token]``), once:

- the backbone's weights (LoRA merged) are the classifier's base model;
- the head is folded into the ``score`` layer: a linear head on standardized features,
  w . (h - mu) / s + b, is (w / s) . h + (b - (w / s) . mu);
- ``pad_token_id`` is a token that occurs in no formatted sequence: transformers 5.x reads
  the last token that is not padding, transformers 4.44 to 4.48 and TRL's PPO
  (``get_reward``) the token before the *first* pad, and both must find the last real
  token. A pad that doubles as a chat turn's end (``<|im_end|>``) would have 4.48 read the
  end of the system prompt: a dedicated ``<|rmlens_pad|>`` is added instead;
- the tokenizer travels complete: right padding, left truncation at the length rmlens
  scored with (``model_max_length``), no ``token_type_ids`` for a causal LM (RewardBench's
  pipeline passes every key the tokenizer returns), the chat template and the format; an
  RM trained on raw text travels without the chat template, so a consumer that would
  template its inputs (RewardBench, GRPO's conversational path) stops instead of scoring
  text the RM never saw.

The ``score`` layer of causal LMs has no bias, so a constant b cannot live in it: the folder
scores r - b. Every difference r+ - r- (what Bradley-Terry identifies, and what TRL and
RewardBench read) is unchanged; ``config.json`` records b as ``rmlens_reward_offset`` and
rmlens adds it back when it loads the folder. An implicit RM exports its policy as a causal
LM, with the reference and beta in the card. Encoders are refused: no standard class
mean-pools. An RM folder of ``rmlens train`` also leaves what its one-checkpoint audit
reads (``write_training``), in files no other consumer opens.
"""

from __future__ import annotations

import copy
import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from rmlens._errors import InputError
from rmlens._io import readable, write_json, write_text
from rmlens.backbones import encode_pair_text
from rmlens.hub._card import Exported, model_card
from rmlens.hub._classifier import SequenceClassifierRM
from rmlens.hub._ensemble import EnsembleRM
from rmlens.hub._load import load_rm
from rmlens.rewards import ExplicitHeadRM, RewardModel, TunedRM

PAD = "<|rmlens_pad|>"
TRAINING_RECORD = "rmlens_training.json"  # what the one-checkpoint audit needs of train.json
TRAINING_ADAPTER = "rmlens_adapter"  # a LoRA RM's adapter, unmerged, for the same audit
TOLERANCE = 1e-4  # largest |r_rmlens - (r_export + offset)| an export may show
_PROBES = (  # one-turn prompts, an HH transcript and messages with a system turn
    ("What is two plus two?", "Four.", "Five."),
    ("Write a short greeting.", "Hello, nice to meet you!", "no"),
    ("Name a colour.", "Blue is a colour of the sky and the sea.", "I cannot help with that."),
    ("\n\nHuman: Hi there.\n\nAssistant: Hello!\n\nHuman: What is two plus two?"
     "\n\nAssistant:", "Four.", "Five."),
    ([{"role": "system", "content": "Answer briefly."},
      {"role": "user", "content": "Name a fruit."}], "An apple.", "No."),
)


def export_rm(
    rm: Any, out: str | Path, *, run: str | None = None, source: str | Path | None = None
) -> Exported:
    """Write ``rm`` as a standard Hugging Face folder that transformers, TRL and RewardBench
    load: ``AutoModelForSequenceClassification`` (explicit RMs) or ``AutoModelForCausalLM``
    (the policy of an implicit RM), its tokenizer and a model card (``README.md``).

    Parameters
    ----------
    rm : str, Path or RewardModel
        An rmlens RM folder, an experiment directory (an audit: pick a run with ``run``),
        or a loaded RM.
    out : str or Path
        The folder to write (created; files of the same names are replaced).
    run : str, optional
        For an ensemble or an audit: the member to export, by name (``000``) or index.
    source : str or Path, optional
        Where ``rm`` was loaded from, for the card (read from ``rm`` when it is a path).

    Returns
    -------
    Exported
        The folder and what was checked: the reloaded folder's rewards on probe pairs,
        plus the recorded offset, equal rmlens's to ``TOLERANCE``.

    Raises
    ------
    InputError
        For an RM that has no standard form (an encoder, an MLP head), an ensemble without
        ``run``, or an unknown ``run``.
    """
    if isinstance(rm, (str, Path)):
        source = Path(rm)
        rm = load_rm(rm, device="cpu", cache_dir=False, precision="fp32")
    member, name = _member(rm, run)
    if (getattr(member, "precision", None) or member.backbone.precision) == "bf16":
        raise InputError(
            "the RM scores in bf16; an export holds fp32 weights, checked against rmlens's "
            "fp32 reading: load it with precision='fp32' (rmlens.hub.load_rm) or export its "
            "folder"
        )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(member, TunedRM) and member.kind == "implicit":
        result = _export_policy(member, out)
    elif isinstance(member, (ExplicitHeadRM, TunedRM)):
        result = _export_explicit(member, out)
    elif isinstance(member, SequenceClassifierRM):
        raise InputError(f"{source or 'rm'}: already a Hugging Face sequence-classification "
                         "model; use its folder as it is")  # fmt: skip
    else:
        raise InputError(f"{source or 'rm'}: a {type(member).__name__} has no standard "
                         "Hugging Face form")  # fmt: skip
    write_training(member, out, source if name is None else None)
    card = model_card(member, result, source=source, run=name)
    (out / "README.md").write_text(card, encoding="utf-8")
    readable(out)
    return result


def write_training(rm: Any, out: Path, source: Path | None) -> None:
    """What the one-checkpoint audit (``rmlens memorize --rm``) reads of the RM folder
    ``source`` besides the classifier: ``rmlens_training.json`` (its ``train.json``: the
    training pairs' fingerprint and the settings that find its evaluation split again; the
    base model, format and length) and, for a LoRA RM, its adapter unmerged in
    ``rmlens_adapter/``, so the audit's gradients go through the adapters and head only.
    Transformers, TRL and RewardBench read neither. A record from an earlier export into
    ``out`` is removed: it would describe another RM."""
    (out / TRAINING_RECORD).unlink(missing_ok=True)
    shutil.rmtree(out / TRAINING_ADAPTER, ignore_errors=True)
    trained = None if source is None else Path(source) / "train.json"
    if not (isinstance(rm, TunedRM) and rm.kind == "explicit_finetuned"
            and trained is not None and trained.is_file()):  # fmt: skip
        return
    lora = rm.config.finetune == "lora"
    record = {**json.loads(trained.read_text()), "base": rm.backbone.name,
              "base_identity": rm.backbone.identity, "format": rm.format,
              "max_length": int(rm.backbone.max_length),
              "adapter": TRAINING_ADAPTER if lora else None}  # fmt: skip
    if lora:
        rm._activate()
        rm.net.body.save_pretrained(out / TRAINING_ADAPTER, safe_serialization=True)
    write_json(record, out / TRAINING_RECORD)


def _member(rm: RewardModel, run: str | None) -> tuple[RewardModel, str | None]:
    """The RM to export: ``rm`` itself, or the ensemble member named or numbered ``run``."""
    if not isinstance(rm, EnsembleRM):
        if run is not None:
            raise InputError(f"`run` {run!r}: the RM is a single model, not an ensemble")
        return rm, None
    if run is None:
        raise InputError(
            f"an ensemble of {len(rm.members)} RMs ({_listing(rm.names)}): choose the one to "
            "export with `run` (its name)"
        )
    if run in rm.names:
        return rm.members[rm.names.index(run)], run
    if run.isdigit() and int(run) < len(rm.members):
        return rm.members[int(run)], rm.names[int(run)]
    raise InputError(f"`run` {run!r}: no such member; the ensemble has {_listing(rm.names)}")


def _listing(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f", ... ({len(names)} in all)" if len(names) > 5 else "")


def _explicit_parts(rm: Any) -> tuple[nn.Module, np.ndarray, float]:
    """The backbone body (LoRA merged into a copy) and the head as r = w . h + b."""
    if isinstance(rm, TunedRM):
        rm._activate()
        body, head = rm.net.body, rm.net.head
        if hasattr(body, "merge_and_unload"):  # a peft model: merge into a copy, in fp32
            body = copy.deepcopy(body).merge_and_unload()
        w = head.weight.detach().double().numpy()[0]
        return body, w, float(head.bias.detach().double().numpy()[0])
    module = rm.head.head_
    if not isinstance(module.net, nn.Linear):
        raise InputError("an MLP head has no standard sequence-classification form (its "
                         "`score` layer is linear): export a linear or logistic head")  # fmt: skip
    scale = module.scale.double().numpy()
    w = module.net.weight.detach().double().numpy()[0] / scale
    b = float(module.net.bias.detach().double().numpy()[0] - w @ module.mean.double().numpy())
    return rm.backbone.model, w, b


def _export_explicit(rm: Any, out: Path) -> Exported:
    from transformers import AutoModelForSequenceClassification

    bb = rm.backbone
    if bb.kind != "causal" or bb.pooling != "last":
        raise InputError(
            f"base model {bb.name!r} is an encoder whose RM mean-pools its tokens; no standard "
            "Hugging Face sequence-classification class mean-pools, so it cannot be exported "
            "(train on a causal LM to export)"
        )
    body, w, b = _explicit_parts(rm)
    config = copy.deepcopy(body.config)
    config.num_labels, config.architectures = 1, None
    config.problem_type = "regression"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForSequenceClassification.from_config(config, dtype=torch.float32)
    base = model.base_model
    missing, unexpected = base.load_state_dict(body.state_dict(), strict=False)
    if missing or unexpected:
        raise InputError(f"base model {bb.name!r}: its weights do not fit "
                         f"{type(model).__name__} (missing {missing[:3]}, unexpected "
                         f"{unexpected[:3]})")  # fmt: skip
    score = _score_layer(model)
    offset = b
    with torch.no_grad():
        score.weight.copy_(torch.as_tensor(w, dtype=score.weight.dtype).reshape(1, -1))
        if score.bias is not None:
            score.bias.fill_(b)
            offset = 0.0
    tokenizer = copy.deepcopy(bb.tokenizer)
    fmt = rm.format
    if fmt == "raw":  # never trained on templated text: a consumer that templates must stop
        tokenizer.chat_template = None
    _set_pad(model, tokenizer, bb.max_length, fmt)
    _set_tokenizer(tokenizer, bb.max_length)
    model.config.rmlens_format = fmt
    model.config.rmlens_max_length = int(bb.max_length)
    model.config.rmlens_reward_offset = float(offset)
    model.eval()
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    readable_by_v4(out)
    diff = _check(rm, out)
    return Exported(out, "sequence_classification", float(offset), diff, fmt, int(bb.max_length))


def _score_layer(model: nn.Module) -> nn.Linear:
    """The classifier's own head: its one child outside the base model, a linear layer to
    one logit (``score`` for Llama, Qwen, Mistral, GPT-2 ...)."""
    prefix = model.base_model_prefix
    heads = [m for n, m in model.named_children() if n != prefix and isinstance(m, nn.Linear)]
    if len(heads) != 1 or heads[0].out_features != 1:
        raise InputError(f"{type(model).__name__}: expected one linear score layer beside the "
                         "base model; this architecture's head is not a single linear layer")
    return heads[0]


def _encode(tokenizer: Any, prompt: Any, response: Any, max_length: int, fmt: str) -> list[int]:
    return encode_pair_text(tokenizer, prompt, response, max_length, format=fmt)


def _probe_ids(tokenizer: Any, max_length: int, fmt: str) -> list[list[int]]:
    return [_encode(tokenizer, p, r, max_length, fmt) for p, c, j in _PROBES for r in (c, j)]


def _set_pad(model: nn.Module, tokenizer: Any, max_length: int, fmt: str) -> None:
    """A pad token that occurs in no formatted sequence (module docstring): the tokenizer's
    own when it is none of EOS, BOS or UNK and no probe sequence holds it, else
    ``<|rmlens_pad|>``, added (the embedding grows only when the id is new to it)."""
    used = {t for seq in _probe_ids(tokenizer, max_length, fmt) for t in seq}
    taken = used | {tokenizer.eos_token_id, tokenizer.bos_token_id, tokenizer.unk_token_id}
    if tokenizer.pad_token_id is None or tokenizer.pad_token_id in taken:
        tokenizer.add_special_tokens({"pad_token": PAD})
        rows = model.get_input_embeddings().num_embeddings
        if tokenizer.pad_token_id >= rows:
            model.resize_token_embeddings(tokenizer.pad_token_id + 1, mean_resizing=False)
    pad = int(tokenizer.pad_token_id)
    if any(pad in seq for seq in _probe_ids(tokenizer, max_length, fmt)):
        raise RuntimeError(f"export: pad id {pad} occurs inside a formatted probe sequence")
    model.config.pad_token_id = pad


def _set_tokenizer(tokenizer: Any, max_length: int) -> None:
    """What a consumer of the folder needs from its tokenizer, saved in
    ``tokenizer_config.json``: right padding (a first-pad reader), left truncation at the
    length rmlens scored with (transformers' ``truncation=True`` then keeps what rmlens
    kept), and the inputs a causal LM takes."""
    settings = {"padding_side": "right", "truncation_side": "left",
                "model_max_length": int(max_length),
                "model_input_names": ["input_ids", "attention_mask"]}  # fmt: skip
    for name, value in settings.items():
        setattr(tokenizer, name, value)
        tokenizer.init_kwargs[name] = value  # what save_pretrained writes


def _check(rm: Any, out: Path) -> float:
    """Largest |r_rmlens - r_folder| over the probe pairs (rmlens's reading, in fp32), the
    folder read back two ways:
    as any Hugging Face RM (``load_rm``: ``AutoModelForSequenceClassification``, the
    recorded format and offset), one sequence at a time and in padded batches; and by a
    reader that stops at the first pad (transformers 4.44 to 4.48, TRL's PPO), one
    right-padded batch. Raises when it is above ``TOLERANCE``."""
    prompts = [p for p, c, j in _PROBES for _ in (c, j)]
    responses = [r for _, c, j in _PROBES for r in (c, j)]
    expected = np.asarray(rm.score(prompts, responses), dtype=float)
    folder = load_rm(out, device="cpu")
    diff = 0.0
    for batch_size in (1, len(prompts)):
        folder.batch_size = batch_size
        got = np.asarray(folder.score(prompts, responses), dtype=float)
        diff = max(diff, float(np.abs(expected - got).max()))
    seqs = _probe_ids(folder.tokenizer, folder.max_length, folder.format)
    got = first_pad_rewards(folder.model, seqs, folder.tokenizer.pad_token_id) + folder.offset
    diff = max(diff, float(np.abs(expected - got).max()))
    if not diff <= TOLERANCE:
        raise RuntimeError(f"export check failed: the exported folder's rewards differ from "
                           f"rmlens's by up to {diff:.3g} on probe pairs")
    return diff


@torch.inference_mode()
def first_pad_rewards(model: nn.Module, seqs: list[list[int]], pad: int) -> np.ndarray:
    """Rewards read as TRL's PPO reads them (``trl.experimental.utils.get_reward``): one
    right-padded batch, the attention mask and positions from ``ids != pad``, the score
    of the token before the first pad. Equal to rmlens's only when no sequence holds the
    pad id."""
    width = max(len(s) for s in seqs)
    ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs])
    mask = ids != pad
    positions = mask.cumsum(1) - mask.long()
    body = getattr(model, model.base_model_prefix)
    hidden = body(input_ids=ids.masked_fill(~mask, 0), attention_mask=mask,
                  position_ids=positions, use_cache=False).last_hidden_state  # fmt: skip
    logits = _score_layer(model)(hidden)[..., 0]
    first_pad = torch.where(mask.all(1, keepdim=True), width, (~mask).int().argmax(1, True))
    return logits.gather(1, first_pad - 1)[:, 0].double().numpy()


def _export_policy(rm: Any, out: Path) -> Exported:
    """An implicit RM's policy as a causal LM (LoRA merged); the card names the reference
    and beta: r(x, y) = beta * (log pi(y|x) - log pi_ref(y|x))."""
    rm._activate()
    lm = rm.net.lm
    if hasattr(lm, "merge_and_unload"):
        lm = copy.deepcopy(lm).merge_and_unload()
    lm.config.rmlens_implicit = {"reference": rm.backbone.name, "beta": float(rm.config.beta)}
    lm.config.rmlens_format = rm.format
    lm.save_pretrained(out, safe_serialization=True)
    rm.backbone.tokenizer.save_pretrained(out)
    readable_by_v4(out)
    return Exported(out, "causal_lm_policy", 0.0, 0.0, rm.format, int(rm.backbone.max_length))


def readable_by_v4(folder: Path) -> None:
    """Add the keys transformers 4.x reads (RewardBench 0.1.4 pins 4.51) beside 5.x's.

    Without them 4.x fails on the tokenizer (``TokenizersBackend`` is 5.x's class; 5.x
    writes the extra special tokens as a list where 4.x expects a dict; tokenizers 0.19,
    transformers 4.44's, reads BPE merges only as ``"a b"`` strings, and 4.44 reads the
    chat template only from ``tokenizer_config.json``) or, worse, silently
    scores with its default RoPE base (5.x writes ``rope_parameters`` only): SmolLM2's
    100000 read as 10000 moved rewards by up to 1.4 and accuracy from 0.78 to 0.66
    (``benchmarks/rewardbench_export.py``). The keys added are the 4.x names of the same
    values, which 5.x reads back unchanged (the export check runs after this).
    """
    tok_file, config_file = folder / "tokenizer_config.json", folder / "config.json"
    fast_file = folder / "tokenizer.json"
    if fast_file.is_file():  # tokenizers < 0.20 (transformers 4.44) reads merges as "a b"
        fast = json.loads(fast_file.read_text(encoding="utf-8"))
        merges = (fast.get("model") or {}).get("merges") or []
        if merges and all(isinstance(m, list) and not any(" " in t for t in m) for m in merges):
            fast["model"]["merges"] = [" ".join(m) for m in merges]
            write_text(json.dumps(fast, ensure_ascii=False), fast_file)
    template_file = folder / "chat_template.jinja"
    if tok_file.is_file():
        tok = json.loads(tok_file.read_text())
        if template_file.is_file() and "chat_template" not in tok:  # 4.44 reads it only here
            tok["chat_template"] = template_file.read_text(encoding="utf-8")
        if tok.get("tokenizer_class") == "TokenizersBackend":
            tok["tokenizer_class"] = "PreTrainedTokenizerFast"
        if isinstance(tok.get("extra_special_tokens"), list):
            tok["additional_special_tokens"] = tok.pop("extra_special_tokens")
        write_json(tok, tok_file)
    config = json.loads(config_file.read_text())
    rope = dict(config.get("rope_parameters") or {})
    if rope and "rope_theta" not in config:
        config["rope_theta"] = rope.pop("rope_theta", 10000.0)
        config["rope_scaling"] = None if rope.get("rope_type", "default") == "default" else rope
    if "dtype" in config and "torch_dtype" not in config:
        config["torch_dtype"] = config["dtype"]
    write_json(config, config_file)
