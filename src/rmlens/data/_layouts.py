"""Map the common preference layouts onto the canonical pair table (DESIGN.md section 1).

- explicit: ``prompt``, ``chosen``, ``rejected``;
- implicit prompt: ``chosen``/``rejected`` are whole transcripts (HH-RLHF) or message lists
  (TRL) sharing a beginning, which becomes the prompt;
- rankings: ``prompt``, ``responses`` and ``ranks`` (1 = best) or ``scores`` (higher = better),
  expanded to every strictly ordered pair.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from rmlens._errors import InputError
from rmlens.data._loaders import Records
from rmlens.data._schema import ASSISTANT_TURN, TEXT_COLUMNS, derive_id, describe, id_text
from rmlens.data._validate import Label, number_problem, quote, text_problem

Report = Callable[[str], None]
RANKING_FIELDS = ("id", "prompt", "responses", "ranks", "scores", "models", "margin")


def apply_column_map(records: Records, column_map: Mapping[str, str]) -> None:
    """Rename fields in place: ``{new: old}``; a mapped field replaces one of the same name."""
    if not column_map:
        return
    fields = records.fields
    for new, old in column_map.items():
        if old not in fields:
            raise InputError(
                f"{records.name}: column map {new}={old}: no field {old!r} "
                f"(fields: {', '.join(fields)})"
            )
    olds = set(column_map.values())
    for row in records.rows:
        values = {new: row[old] for new, old in column_map.items() if old in row}
        for name in olds | set(column_map):
            row.pop(name, None)
        row.update(values)
    records.renamed()


def detect_layout(records: Records) -> str:
    """``"explicit"``, ``"implicit"`` or ``"rankings"`` from the field names."""
    fields = records.fields
    have = set(fields)
    if "responses" in have and have & {"ranks", "scores"}:
        return "rankings"
    if {"chosen", "rejected"} <= have:
        return "explicit" if "prompt" in have else "implicit"
    if "responses" in have:
        hint = "'responses' but neither 'ranks' nor 'scores'"
    elif have & {"chosen", "rejected"}:
        hint = f"{'chosen' if 'chosen' in have else 'rejected'!r} without its counterpart"
    else:
        hint = "no 'chosen'/'rejected' or 'responses' field"
    raise InputError(
        f"{records.name}: cannot tell the layout, found {hint} (fields: {', '.join(fields)}); "
        "expected prompt/chosen/rejected, chosen/rejected transcripts or message lists, or "
        "prompt/responses with ranks or scores; rename fields with --map NEW=OLD"
    )


def split_transcripts(chosen: str, rejected: str) -> tuple[str, str, str] | None:
    """Split two transcripts at the last ``"\\n\\nAssistant:"`` inside their shared prefix.

    Returns ``(prompt, chosen_response, rejected_response)``: the prompt ends with the
    marker, the responses lose their leading whitespace. None when no marker is shared.
    """
    shared = os.path.commonprefix([chosen, rejected])
    cut = shared.rfind(ASSISTANT_TURN)
    if cut < 0:
        return None
    end = cut + len(ASSISTANT_TURN)
    return chosen[:end], chosen[end:].lstrip(), rejected[end:].lstrip()


def _key(message: Mapping[str, Any]) -> tuple[Any, Any]:
    return message.get("role"), message.get("content")


def _is_assistant(messages: list, k: int) -> bool:
    return k >= len(messages) or messages[k].get("role") == "assistant"


def split_messages(chosen: list, rejected: list) -> tuple[list, list, list] | None:
    """Shared leading messages become the prompt; the rest, from an assistant turn, the responses.

    When the conversations diverge at a non-assistant message, the split moves back to the
    last assistant message inside the shared part. None when there is no such split.
    """
    n = 0
    while n < min(len(chosen), len(rejected)) and _key(chosen[n]) == _key(rejected[n]):
        n += 1
    k = n
    if k == len(chosen) == len(rejected) or not (
        _is_assistant(chosen, k) and _is_assistant(rejected, k)
    ):
        k = max((i for i in range(n) if chosen[i].get("role") == "assistant"), default=0)
    if k == 0:
        return None
    return list(chosen[:k]), list(chosen[k:]), list(rejected[k:])


def _strip_prompt(prompt: Any, chosen: Any, rejected: Any) -> tuple[Any, Any]:
    """Remove a prompt that the responses repeat (HH transcripts, UltraFeedback messages)."""
    if isinstance(chosen, str) and isinstance(rejected, str):
        if (
            isinstance(prompt, str)
            and prompt.rstrip().endswith("Assistant:")
            and chosen.startswith(prompt)
            and rejected.startswith(prompt)
        ):
            return chosen[len(prompt) :].lstrip(), rejected[len(prompt) :].lstrip()
        return chosen, rejected
    if isinstance(chosen, list) and isinstance(rejected, list):
        head = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        k = len(head)
        same = [_key(m) for m in head] == [_key(m) for m in chosen[:k]] == [
            _key(m) for m in rejected[:k]
        ]
        if same and len(chosen) > k and len(rejected) > k:
            return chosen[k:], rejected[k:]
    return chosen, rejected


def _texts(row: dict, fields: tuple[str, ...], where: str, report: Report, label: Label) -> bool:
    ok = True
    for field in fields:
        if field not in row:
            report(f"{where}: missing required field {label(field)}")
            ok = False
            continue
        problem = text_problem(row[field])
        if problem:
            report(f"{where}: {label(field)} {problem}")
            ok = False
    pair = {"chosen", "rejected"} <= set(fields)
    if ok and pair and isinstance(row["chosen"], str) != isinstance(row["rejected"], str):
        report(
            f"{where}: {label('chosen')} and {label('rejected')} must both be strings or "
            f"both be message lists, got {describe(row['chosen'])} and "
            f"{describe(row['rejected'])}"
        )
        ok = False
    return ok


def explicit_pair(row: dict, where: str, report: Report, label: Label = quote) -> dict | None:
    if not _texts(row, TEXT_COLUMNS, where, report, label):
        return None
    pair = dict(row)
    pair["chosen"], pair["rejected"] = _strip_prompt(row["prompt"], row["chosen"], row["rejected"])
    return pair


def implicit_pair(row: dict, where: str, report: Report, label: Label = quote) -> dict | None:
    if not _texts(row, ("chosen", "rejected"), where, report, label):
        return None
    chosen, rejected = row["chosen"], row["rejected"]
    if isinstance(chosen, str):
        split = split_transcripts(chosen, rejected)
        marker = repr(ASSISTANT_TURN).replace("'", "")
        how = f"share no '{marker}' turn"
    else:
        split = split_messages(list(chosen), list(rejected))
        how = "share no leading messages followed by an assistant turn"
    if split is None:
        report(
            f"{where}: cannot split off the prompt: {label('chosen')} and {label('rejected')} "
            f"{how}; give the prompt as a field (--map prompt=FIELD)"
        )
        return None
    pair = {"prompt": split[0], "chosen": split[1], "rejected": split[2]}
    pair.update({k: v for k, v in row.items() if k not in pair})
    return pair


def ranking(row: dict, where: str, report: Report, label: Label = quote) -> dict | None:
    """Check one ranking; returns prompt, responses, scores (higher = better), ranks, models."""
    ok = _texts(row, ("prompt",), where, report, label)
    responses = row.get("responses")
    if "responses" not in row:
        report(f"{where}: missing required field {label('responses')}")
        return None
    if not isinstance(responses, list) or len(responses) < 2:
        report(
            f"{where}: {label('responses')} must be a list of at least 2 responses, "
            f"got {describe(responses)}"
        )
        return None
    for k, response in enumerate(responses, 1):
        problem = text_problem(response)
        if problem:
            report(f"{where}: {label('responses')} item {k} {problem}")
            ok = False
    key = "scores" if row.get("scores") is not None else "ranks"
    values = row.get(key)
    if key not in row:
        report(f"{where}: missing required field {label('ranks')} or {label('scores')}")
        return None
    if not isinstance(values, list) or len(values) != len(responses):
        report(
            f"{where}: {label(key)} must be a list of {len(responses)} numbers (one per "
            f"response), got {describe(values)}"
        )
        return None
    numbers = []
    for k, value in enumerate(values, 1):
        x, problem = number_problem(value, minimum=1 if key == "ranks" else None)
        if problem:
            report(f"{where}: {label(key)} item {k} {problem}")
            ok = False
        numbers.append(x)
    models = row.get("models")
    if models is not None and (
        not isinstance(models, list)
        or len(models) != len(responses)
        or not all(isinstance(m, str) for m in models)
    ):
        report(
            f"{where}: {label('models')} must be a list of {len(responses)} strings, "
            f"got {describe(models)}"
        )
        ok = False
    if not ok:
        return None
    if key == "ranks":
        scores = [max(numbers) + 1 - r for r in numbers]
        ranks = numbers
    else:
        scores = numbers
        ranks = [1 + sum(other > s for other in numbers) for s in numbers]
    out = {k: v for k, v in row.items() if k not in RANKING_FIELDS}
    out.update(prompt=row["prompt"], responses=responses, scores=scores, ranks=ranks)
    if models is not None:
        out["models"] = models
    return out


def ranking_id(row: dict, where: str, report: Report, label: Label = quote) -> str | None:
    if "id" not in row:
        return derive_id(row["prompt"], *row["responses"])
    ident = id_text(row["id"])
    if ident is None:
        report(f"{where}: {label('id')} must be a non-empty string or a number, "
               f"got {describe(row['id'])}")
    return ident


def expand_ranking(rank: dict, rank_id: str) -> list[dict]:
    """All strictly ordered pairs of one ranking; ``margin`` is the score (or rank) gap."""
    responses, scores = rank["responses"], rank["scores"]
    models = rank.get("models")
    own = ("prompt", "responses", "scores", "ranks", "models")
    extras = {k: v for k, v in rank.items() if k not in own}
    pairs = []
    for i in range(len(responses)):
        for j in range(len(responses)):
            if scores[i] <= scores[j]:
                continue
            pair = {
                **extras,
                "id": f"{rank_id}:{i}>{j}",
                "prompt": rank["prompt"],
                "chosen": responses[i],
                "rejected": responses[j],
                "margin": float(scores[i] - scores[j]),
                "ranking_id": rank_id,
            }
            if models is not None:
                pair["chosen_model"], pair["rejected_model"] = models[i], models[j]
            pairs.append(pair)
    return pairs
