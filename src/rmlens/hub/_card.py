"""The model card (``README.md``, the hub's format) of an exported RM: how it was made, how
to use it, and, when it came from an audit, the audit's headline."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmlens._errors import InputError
from rmlens.backbones import PRESETS
from rmlens.experiment import MANIFEST, ExperimentDir

HUB_IDS = {  # the hub model each offline preset ships
    "minilm": "sentence-transformers/all-MiniLM-L6-v2",
    "smollm2-135m": "HuggingFaceTB/SmolLM2-135M-Instruct",
}


@dataclass
class Exported:
    """What :func:`export_rm` wrote: the folder, the kind exported, the reward offset (b,
    the part of rmlens's reward the ``score`` layer cannot hold) and the largest difference
    between rmlens's rewards and the reloaded folder's on probe pairs, offset added."""

    path: Path
    kind: str
    offset: float
    max_abs_diff: float
    format: str
    max_length: int


def _json(exp: ExperimentDir, name: str) -> Any:
    """The JSON file ``name`` of ``exp``; None when absent or unusable (the card leaves it
    out)."""
    try:
        return exp.read_json(name, required=False)
    except InputError:
        return None


def _num(value: Any, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "–"


def _origin(source: Path | None, run: str | None) -> tuple[dict, list[str]]:
    """Facts read beside the RM: the training record, or the audit and its run."""
    facts: dict[str, Any] = {}
    audit: list[str] = []
    if source is None:
        return facts, audit
    exp = ExperimentDir(source)
    if run is not None and (exp / f"runs/{run}/{MANIFEST}").is_file():
        manifest = _json(exp, f"runs/{run}/{MANIFEST}") or {}
        config = _json(exp, exp.record_name) or {}
        metrics = manifest.get("metrics") or {}
        facts.update({
            "made by": f"run {run} of the memorization audit in `{source.resolve()}`",
            "data": f"sha1 {config.get('data_sha1', '–')}, {config.get('n_pairs', '–')} pairs",
            "trained on": f"{manifest.get('n_train', '–')} pairs ({manifest.get('n_val', 0)} "
                          "more for validation)",
            "objective": metrics.get("objective", "bt"),
            "held-out accuracy": f"{_num(metrics.get('test_accuracy'))} on this run's held-out "
                                 "groups",
        })  # fmt: skip
        audit = _audit_headline(exp)
        return facts, audit
    record = _json(exp, "train.json")
    if isinstance(record, dict):
        cfg = record.get("train_config") or {}
        history = _json(exp, "history.json") or []
        last = history[-1] if history and isinstance(history[-1], dict) else {}
        held = next((last[k] for k in ("eval_accuracy", "val_accuracy") if k in last), None)
        facts.update({
            "made by": f"`rmlens train` in `{source.resolve()}`",
            "data": f"sha1 {record.get('data_sha1', '–')}, {record.get('n_train', '–')} pairs",
            "objective": f"{cfg.get('objective', 'bt')} ({cfg.get('loss', 'bradley-terry')} "
                         f"loss, {cfg.get('finetune', '–')} fine-tune, {cfg.get('epochs', '–')} "
                         f"epochs, lr {cfg.get('lr', '–')})",
            "held-out accuracy": f"{_num(held)} on the evaluation pairs (last epoch)"
            if held is not None else "– (no evaluation pairs)",
        })  # fmt: skip
        idle = [why for why in (record.get("not_learned") or {}).values() if why]
        if idle:
            facts["**did not learn**"] = idle[0]
    return facts, audit


def _audit_headline(exp: ExperimentDir) -> list[str]:
    """RM quality, memorized share and the shortcut figures the audit directory holds."""
    lines = []
    summary = _json(exp, "summary.json") or {}
    quality = (summary.get("rm_quality") or {}).get("held_out", {}).get("accuracy") or {}
    if quality:
        lines.append(f"- RM quality: held-out accuracy {_num(quality.get('mean'))} "
                     f"± {_num(quality.get('std'))} (mean ± std over the audit's runs)")
    counts, n = summary.get("counts") or {}, summary.get("n_pairs")
    if counts and n:
        lines.append(f"- Memorized: {counts.get('memorized', 0)} of {n} pairs "
                     f"({counts.get('memorized', 0) / n:.1%}); not learned even when trained "
                     f"on: {counts.get('not_learned', 0)} ({counts.get('not_learned', 0) / n:.1%})")
    metrics = _json(exp, "metrics.json") or {}
    if "accuracy" in metrics:
        lines.append(f"- `rmlens evaluate`: accuracy {_num(metrics['accuracy'])}"
                     + (" (cross-fitted: each pair scored by runs that held it out)"
                        if "cross_fitted" in metrics else ""))  # fmt: skip
    for probe in metrics.get("probes") or []:
        if probe.get("probe") in ("pad_filler", "pad_repeat") and probe.get("side") == "rejected":
            lines.append(f"- Length shortcut ({probe['probe']} on the rejected side): "
                         f"{_num(probe.get('flip_rate'))} of pairs flip")
    return lines


def _base_id(name: str) -> str | None:
    """The hub id of the base model, for the card's metadata (None for a local path)."""
    if name in PRESETS:
        return HUB_IDS.get(name)
    return None if Path(name).expanduser().exists() or name.startswith((".", "/")) else name


def _precision_row(rm: Any) -> str:
    """The precision the RM was trained in (a fine-tuned RM's resolved ``precision``; a
    frozen head's, its backbone's encoding), and how this folder holds it."""
    trained = getattr(getattr(rm, "config", None), "precision", None)
    made = trained if trained in ("fp32", "bf16") else rm.backbone.precision
    if made == "bf16":
        return ("trained in bf16 by rmlens (frozen linear weights in bfloat16; adapters, "
                "head, residual stream and statistics fp32); saved and checked in fp32, as "
                "rmlens scores it")  # fmt: skip
    return "trained in fp32"


def model_card(rm: Any, exported: Exported, *, source: str | Path | None = None,
               run: str | None = None) -> str:  # fmt: skip
    """``README.md`` of an exported RM: hub metadata, usage, how it was made."""
    bb = rm.backbone
    source = Path(source) if source is not None else None
    facts, audit = _origin(source, run)
    base_id = _base_id(bb.name)
    meta = ["---", "library_name: transformers"]
    if exported.kind == "sequence_classification":
        meta += ["pipeline_tag: text-classification", "tags:", "- reward-model", "- rmlens"]
    else:
        meta += ["pipeline_tag: text-generation", "tags:", "- implicit-reward-model",
                 "- dpo", "- rmlens"]  # fmt: skip
    if base_id:
        meta.append(f"base_model: {base_id}")
    meta.append("---")
    formats = {"chat": "the tokenizer's chat template (prompt as user turn(s), response as "
               "the assistant turn)", "raw": "raw text: prompt + response + EOS (TRL's text path)"}
    rows = {
        "base model": f"`{bb.name}` (identity {bb.identity})",
        **facts,
        "precision": _precision_row(rm),
        "formatting": formats[exported.format],
        "truncation": f"rmlens kept the last {exported.max_length} tokens of each sequence "
                      "(prompt cut from the left); this folder's tokenizer does the same "
                      "with `truncation=True`",
    }  # fmt: skip
    body = [
        "# Reward model exported by rmlens",
        "",
        "| | |", "|---|---|",
        *[f"| {k} | {v} |" for k, v in rows.items()],
        "",
    ]
    if exported.kind == "sequence_classification":
        body += _use_classifier(exported)
    else:
        body += _use_policy(rm)
    if audit:
        body += ["## The audit it came from", "", *audit, ""]
    body += [
        "## Check at export",
        "",
        f"Rewards of probe pairs, reloaded from this folder with transformers, plus the offset, "
        f"differ from rmlens's (read in fp32) by at most {exported.max_abs_diff:.2e}.",
        "",
    ]
    return "\n".join(meta + [""] + body)


def _use_classifier(exported: Exported) -> list[str]:
    offset = exported.offset
    if exported.format == "chat":
        encode = [
            'messages = [{"role": "user", "content": prompt}, '
            '{"role": "assistant", "content": response}]',
            "text = tokenizer.apply_chat_template(messages, tokenize=False)",
            'inputs = tokenizer(text, add_special_tokens=False, truncation=True, '
            'return_tensors="pt")',
        ]
        transcript = ("An HH-RLHF transcript prompt (`\\n\\nHuman: ... \\n\\nAssistant:`) "
                      "is its turns, one user or assistant message each, as rmlens formats it.")
    else:
        encode = [
            "text = prompt + response + tokenizer.eos_token",
            'inputs = tokenizer(text, truncation=True, return_tensors="pt")',
        ]
        transcript = ("An HH-RLHF transcript prompt (ending with `Assistant:`) is joined to its "
                      "response by one space, as in the transcript. This RM was trained on "
                      "raw text, so the folder has no chat template: a consumer that would "
                      "apply one (RewardBench) stops instead of scoring another format.")
    lines = [
        "## Use it",
        "",
        "```python",
        "import torch",
        "from transformers import AutoModelForSequenceClassification, AutoTokenizer",
        "",
        f'path = "{Path(exported.path).resolve()}"  # this folder (on the hub: its repo id)',
        "rm = AutoModelForSequenceClassification.from_pretrained(path).eval()",
        "tokenizer = AutoTokenizer.from_pretrained(path)",
        'prompt, response = "What is two plus two?", "Four."',
        *encode,
        "with torch.no_grad():",
        "    logit = rm(**inputs).logits[0, 0].item()",
        'reward = logit + getattr(rm.config, "rmlens_reward_offset", 0.0)',
        'print(f"reward {reward:.6f}")',
        "```",
        "",
        f"{transcript} In batches, pad with this tokenizer (`padding=True`): it pads on the "
        "right with a token that occurs in no formatted sequence, so transformers (4.44 and "
        "later, 5.x) and a reader that stops at the first pad (TRL's PPO) read the same last "
        f"token. `truncation=True` cuts from the left at {exported.max_length} tokens, as rmlens "
        "did. For TRL's GRPO, pass `rmlens.hub.reward_function(path)` as `reward_funcs`: "
        "given the folder's path instead, TRL joins string prompts to completions without this "
        "formatting.",
    ]
    if exported.format == "chat":
        lines[-1] += " " + rewardbench_sentence(exported.max_length)
    if offset:
        lines += [
            "",
            f"rmlens's reward is this folder's logit plus {offset:.6g} "
            "(`rmlens_reward_offset` in config.json): the `score` layer of this architecture "
            "has no bias. Every difference r(chosen) - r(rejected) is unchanged.",
        ]
    return lines + [""]


def rewardbench_sentence(max_length: int) -> str:
    """How RewardBench 0.1.4 scores the folder as rmlens does: it truncates only when told."""
    return (f"In RewardBench 0.1.4 pass `--force_truncation`: it then cuts each sequence from "
            f"the left at this tokenizer's `model_max_length` ({max_length} tokens), keeping "
            "what rmlens kept; without it RewardBench truncates nothing, so a pair longer than "
            f"{max_length} tokens is scored whole, with other rewards than rmlens's (it needs "
            "a CUDA GPU).")


def _use_policy(rm: Any) -> list[str]:
    return [
        "## Use it",
        "",
        "This is the policy pi of an implicit (DPO) reward model, "
        f"r(x, y) = beta * (log pi(y|x) - log pi_ref(y|x)) with beta = {rm.config.beta:g} and "
        f"the reference pi_ref = `{rm.backbone.name}`, log-probabilities summed over the "
        "response's tokens. Score with `rmlens.load_rm` on the rmlens folder, or with any DPO "
        "implicit-reward code given this policy, the reference and beta.",
        "",
    ]
