"""Summary statistics of a pair table, for ``rmlens data inspect``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from rmlens._errors import InputError
from rmlens.data._dedupe import text_codes
from rmlens.data._load import read_pairs
from rmlens.data._schema import to_text


def _stats(values: Any) -> dict[str, float] | None:
    x = np.asarray(values, dtype="float64")
    x = x[~np.isnan(x)]
    if x.size == 0:
        return None
    return {
        "mean": round(float(x.mean()), 4),
        "std": round(float(x.std()), 4),
        "min": round(float(x.min()), 4),
        "median": round(float(np.median(x)), 4),
        "max": round(float(x.max()), 4),
    }


def default_groups(pairs: pd.DataFrame, group_by: str | None = None) -> tuple[pd.Series, str]:
    """The groups an audit would use, and their column: ``group_by``; else ``user_id`` when
    every pair has one; else the prompt (``rmlens memorize``'s rule)."""
    if group_by is not None:
        if group_by not in pairs:
            raise InputError(
                f"`group_by`: no column '{group_by}' in the data (columns: {', '.join(pairs)})"
            )
        return pairs[group_by].astype(str), group_by
    if "user_id" in pairs and pairs["user_id"].notna().all():
        return pairs["user_id"].astype(str), "user_id"
    return pairs["prompt"].map(to_text), "prompt"


def duplicates_across_groups(
    pairs: pd.DataFrame, groups: Any, *, group_by: str = "group"
) -> tuple[dict[str, Any], np.ndarray]:
    """Repeated texts, repeated pairs and conflicting pairs, within and across groups.

    A text is a response with its prompt (the RM's input); a pair is (prompt, chosen,
    rejected); a pair conflicts when (prompt, rejected, chosen) also occurs: the same two
    responses judged the other way. Across groups, a held-out pair may have been seen
    through another group's copy (its TG is optimistic), and a conflicting pair's TG is
    pulled down by the other group's label (its CM is disagreement between groups).

    Parameters
    ----------
    pairs : DataFrame
        ``prompt``, ``chosen`` and ``rejected`` of ``n_pairs`` pairs.
    groups : array-like of shape (n_pairs,)
        Each pair's group (the audit's unit: a user, or the prompt).
    group_by : str, default="group"
        The groups' column, recorded in the result.

    Returns
    -------
    record : dict
        JSON-ready counts: ``group_by``, ``groups``; ``texts`` (response slots, unique texts,
        texts under several groups), ``pairs_sharing_text_across_groups``; ``unique_pairs``,
        ``repeated_pairs``, ``pairs_repeated_across_groups``; ``conflicting_pairs``,
        ``conflicts_across_groups``. Pair counts count rows: both copies of a repeated pair.
    conflict : ndarray of bool, shape (n_pairs,)
        Whether another group judged the pair's two responses the other way.
    """
    n = len(pairs)
    prompt, c, r = text_codes(pairs)
    codes = np.r_[c, r]
    g = pd.factorize(pd.Series(np.asarray(groups)).astype(str))[0]

    # per ordered pair (p, c, r): rows, distinct groups and the smallest group code
    frame = pd.DataFrame({"p": prompt, "c": c, "r": r, "g": g})
    by_pair = frame.groupby(["p", "c", "r"]).g.agg(["size", "nunique", "min"])
    own = by_pair.reindex(pd.MultiIndex.from_arrays([prompt, c, r])).to_numpy()
    swapped = by_pair.reindex(pd.MultiIndex.from_arrays([prompt, r, c])).to_numpy()
    with np.errstate(invalid="ignore"):
        found = ~np.isnan(swapped[:, 0]) & (c != r)  # chosen == rejected: not a conflict
        conflict = found & ((swapped[:, 1] >= 2) | (swapped[:, 2] != g))

    # per text (p, response): distinct groups it appears under
    texts = pd.DataFrame({"p": np.r_[prompt, prompt], "t": codes, "g": np.r_[g, g]})
    by_text = texts.groupby(["p", "t"]).g.nunique()
    spread = by_text.reindex(pd.MultiIndex.from_arrays([texts.p, texts.t])).to_numpy()
    shared = (spread[:n] >= 2) | (spread[n:] >= 2)
    record = {
        "group_by": group_by,
        "groups": int(len(np.unique(g))),
        "texts": {
            "responses": 2 * n,
            "unique": int(len(by_text)),
            "in_several_groups": int((by_text >= 2).sum()),
        },
        "pairs_sharing_text_across_groups": int(shared.sum()),
        "unique_pairs": int(len(by_pair)),
        "repeated_pairs": int(n - len(by_pair)),
        "pairs_repeated_across_groups": int((own[:, 1] >= 2).sum()),
        "conflicting_pairs": int(found.sum()),
        "conflicts_across_groups": int(conflict.sum()),
    }
    return record, conflict


def data_warnings(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """What an audit of these pairs should know (``code``, ``message``, ``pairs``), from
    :func:`summarize`'s counts; empty when there is nothing to say."""
    n, found = summary["pairs"], []

    def add(code: str, count: int, message: str) -> None:
        if count:
            found.append({"code": code, "message": message, "pairs": int(count)})

    dup, across = summary["duplicates"], summary["across_groups"]
    by = f"'{across['group_by']}'"
    add("duplicate_ids", dup["ids"], f"{dup['ids']} ids repeat an earlier pair's id")
    add("empty_responses", summary["empty_responses"],
        f"{summary['empty_responses']} of {n} pairs have an empty chosen or rejected "
        "response")  # fmt: skip
    add("identical_responses", summary["identical_responses"],
        f"{summary['identical_responses']} of {n} pairs have chosen == rejected: they carry "
        "no preference")  # fmt: skip
    add("repeated_pairs", dup["pairs"],
        f"{dup['pairs']} of {n} pairs repeat an earlier (prompt, chosen, rejected) "
        f"({across['unique_pairs']} unique pairs)")  # fmt: skip
    add("duplicates_across_groups", across["pairs_repeated_across_groups"],
        f"{across['pairs_repeated_across_groups']} pairs occur under more than one group "
        f"({by}): an audit's TG is then optimistic, since a held-out pair may have been seen "
        "through another group's copy; audit with --dedupe pairs (one copy of each pair) or "
        "--dedupe texts (groups that share a response joined)")  # fmt: skip
    add("conflicting_pairs", across["conflicting_pairs"],
        f"{across['conflicting_pairs']} pairs have a copy judged the other way (same prompt, "
        f"chosen and rejected swapped), {across['conflicts_across_groups']} of them in another "
        f"group ({by}): an audit's CM there measures disagreement between groups (--dedupe "
        "pairs keeps them; --dedupe texts puts both judgements in one group)")  # fmt: skip
    return found


def summarize(pairs: pd.DataFrame, *, group_by: str | None = None) -> dict[str, Any]:
    """Counts and statistics of a canonical pair table.

    Parameters
    ----------
    pairs : pandas.DataFrame
        A table from :func:`load_pairs` or :func:`synthesize`, shape ``(n_pairs, n_columns)``.
    group_by : str, optional
        The column an audit would group by; default ``user_id`` when every pair has one,
        else the prompt (as ``rmlens memorize``).

    Returns
    -------
    dict
        JSON-ready: ``pairs``, ``columns``, ``format`` (text / conversational counts),
        ``users`` (count, or None without ``user_id``) and ``pairs_per_user``, ``models``
        (per system: pairs, times chosen, win rate), ``margin`` statistics (or None),
        ``length`` (characters and words of prompt, chosen and rejected), ``chosen_longer``
        (share of pairs whose chosen response has more characters), ``duplicates`` (repeated
        ids and repeated prompt/chosen/rejected), ``across_groups`` (repeated texts, repeated
        and conflicting pairs across the audit's groups: :func:`duplicates_across_groups`),
        ``identical_responses``, ``empty_responses`` and ``mechanisms`` (counts, or None).

    Examples
    --------
    >>> from rmlens.data import load_pairs
    >>> summarize(load_pairs([{"prompt": "2+2?", "chosen": "4", "rejected": "5"}]))["pairs"]
    1
    """
    n = len(pairs)
    texts = {c: [to_text(v) for v in pairs[c]] for c in ("prompt", "chosen", "rejected")}
    out: dict[str, Any] = {"pairs": n, "columns": [str(c) for c in pairs.columns]}
    conversational = int(sum(not isinstance(v, str) for v in pairs["chosen"]))
    out["format"] = {"text": n - conversational, "conversational": conversational}

    if "user_id" in pairs:
        users = pairs["user_id"].dropna()
        counts = users.value_counts()
        out["users"] = int(counts.size)
        out["pairs_per_user"] = _stats(counts.to_numpy())
        out["missing_user_id"] = int(n - users.size)
    else:
        out["users"] = None

    models: dict[str, dict[str, Any]] = {}
    if "chosen_model" in pairs and "rejected_model" in pairs:
        chosen = pairs["chosen_model"].dropna().value_counts()
        rejected = pairs["rejected_model"].dropna().value_counts()
        for name in sorted(set(chosen.index) | set(rejected.index)):
            wins, losses = int(chosen.get(name, 0)), int(rejected.get(name, 0))
            models[str(name)] = {
                "pairs": wins + losses,
                "chosen": wins,
                "win_rate": round(wins / (wins + losses), 4),
            }
    out["models"] = models or None
    out["margin"] = _stats(pairs["margin"]) if "margin" in pairs else None

    chars = {c: np.array([len(t) for t in v], dtype="float64") for c, v in texts.items()}
    words = {c: np.array([len(t.split()) for t in v], dtype="float64") for c, v in texts.items()}
    out["length"] = {c: {"chars": _stats(chars[c]), "words": _stats(words[c])} for c in texts}
    longer = chars["chosen"] > chars["rejected"]
    differ = chars["chosen"] != chars["rejected"]
    out["chosen_longer"] = round(float(longer.sum() / differ.sum()), 4) if differ.any() else None

    keys = list(zip(texts["prompt"], texts["chosen"], texts["rejected"]))
    out["duplicates"] = {
        "ids": int(pairs["id"].duplicated().sum()) if "id" in pairs else 0,
        "pairs": int(n - len(set(keys))),
    }
    groups, column = default_groups(pairs, group_by)
    out["across_groups"] = duplicates_across_groups(pairs, groups, group_by=column)[0]
    responses = list(zip(texts["chosen"], texts["rejected"]))
    out["identical_responses"] = int(sum(c == r for c, r in responses))
    out["empty_responses"] = int(sum(not c.strip() or not r.strip() for c, r in responses))
    if "mechanism" in pairs:
        counts = pairs["mechanism"].value_counts()
        out["mechanisms"] = {str(k): int(v) for k, v in counts.sort_index().items()}
    else:
        out["mechanisms"] = None
    return out


def inspect_pairs(
    source: Any,
    *,
    column_map: Mapping[str, str] | None = None,
    split: str | None = None,
    group_by: str | None = None,
    sep: str | None = None,
) -> dict[str, Any]:
    """Read a preference source leniently: summary of the good pairs plus every problem.

    Parameters
    ----------
    source, column_map, split, sep
        As in :func:`load_pairs`.
    group_by : str, optional
        The column an audit would group by (see :func:`summarize`).

    Returns
    -------
    dict
        ``source``, ``layout`` (explicit, implicit or rankings), ``summary`` (see
        :func:`summarize`, over the pairs without problems), ``problems`` (list of str: rows
        that could not be read) and ``warnings`` (what the readable pairs hold that an audit
        should know: empty or identical responses, repeated or conflicting pairs; a list of
        ``code``, ``message``, ``pairs``, see :func:`data_warnings`).

    Raises
    ------
    InputError
        When the source cannot be read at all (missing, empty, unknown layout).
    """
    loaded = read_pairs(source, column_map=column_map, split=split, collect=True, sep=sep)
    summary = summarize(loaded.table, group_by=group_by)
    return {
        "source": loaded.name,
        "layout": loaded.layout,
        "summary": summary,
        "problems": loaded.problems,
        "warnings": data_warnings(summary),
    }
