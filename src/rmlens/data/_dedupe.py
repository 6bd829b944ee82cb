"""Deduplicating an audit's data (``--dedupe``): one copy of each repeated pair, or the groups
that share a response joined into one.

A pair repeated under two groups (several annotators judging the same pair) is seen by a
run that holds one copy out through the other copy it trains on, so that pair's TG is
optimistic. Texts are compared as :func:`~rmlens.data._summary.duplicates_across_groups`
compares them: a response with its prompt, chat messages rendered as text (``to_text``).

    none    the pairs and groups as given
    pairs   the first row of each repeated (prompt, chosen, rejected) is kept, the others
            dropped; a pair judged the other way (chosen and rejected swapped) is another
            pair and is kept: the disagreement between groups is the signal
    texts   every pair kept; groups linked by a shared text become one group (connected
            components of the graph whose edges join each pair's group to its two texts),
            so no held-out pair's response was trained on through another group
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# numpy, pandas and the schema are imported when a function runs: AuditConfig (and so
# ``rmlens --help``) reads DEDUPE without them
if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

DEDUPE = ("none", "pairs", "texts")
SHOWN_IDS = 100  # dropped pair ids a record lists
_NAMED = 3  # a joined group of up to this many groups is named by all of them


def text_codes(pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Integer codes of every pair's prompt, chosen and rejected text.

    Parameters
    ----------
    pairs : DataFrame
        ``prompt``, ``chosen`` and ``rejected`` of ``n_pairs`` pairs.

    Returns
    -------
    prompt, chosen, rejected : ndarray of int, shape (n_pairs,) each
        Equal codes mean equal text; chosen and rejected share one code book, so a
        response has the same code on either side.
    """
    import pandas as pd

    # lazy: numpy, pandas load only when this runs (the command line imports this module)
    from rmlens.data._schema import to_text

    n = len(pairs)
    prompt = pd.factorize(pd.Series([to_text(v) for v in pairs["prompt"]], dtype=object))[0]
    responses = [to_text(v) for v in pairs["chosen"]] + [to_text(v) for v in pairs["rejected"]]
    codes = pd.factorize(pd.Series(responses, dtype=object))[0]
    return prompt, codes[:n], codes[n:]


def first_copies(pairs: pd.DataFrame) -> np.ndarray:
    """Whether each row is the first of its (prompt, chosen, rejected).

    Parameters
    ----------
    pairs : DataFrame
        ``prompt``, ``chosen`` and ``rejected`` of ``n_pairs`` pairs.

    Returns
    -------
    ndarray of bool, shape (n_pairs,)
        False for a row that repeats an earlier row's pair; a swapped pair (the same two
        responses judged the other way) is another pair, so True.
    """
    import pandas as pd

    prompt, chosen, rejected = text_codes(pairs)
    frame = pd.DataFrame({"p": prompt, "c": chosen, "r": rejected})
    return ~frame.duplicated(keep="first").to_numpy()


def join_groups(pairs: pd.DataFrame, groups: Any) -> np.ndarray:
    """Group labels after joining the groups that share a text (a response with its prompt).

    Groups g and h are joined when a text occurs under both, and so on transitively: the
    connected components of the graph with one node per group and per text, and an edge
    from each pair's group to each of its two texts.

    Parameters
    ----------
    pairs : DataFrame
        ``prompt``, ``chosen`` and ``rejected`` of ``n_pairs`` pairs.
    groups : array-like of shape (n_pairs,)
        Each pair's group.

    Returns
    -------
    ndarray of str, shape (n_pairs,)
        Each pair's joined group: a group that shares no text keeps its label; a joined
        group is named by its members' sorted labels joined with ``+`` (up to 3 of them),
        else by the first and a count (``"u1+7 more"``).

    Examples
    --------
    >>> import pandas as pd
    >>> pairs = pd.DataFrame({"prompt": ["q", "q", "r"], "chosen": ["a", "a", "c"],
    ...                       "rejected": ["b", "d", "e"]})
    >>> join_groups(pairs, ["u1", "u2", "u3"]).tolist()
    ['u1+u2', 'u1+u2', 'u3']
    """
    import numpy as np
    import pandas as pd
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    if not len(pairs):
        return np.array([], dtype=object)
    prompt, chosen, rejected = text_codes(pairs)
    group, labels = pd.factorize(pd.Series(np.asarray(groups, dtype=object)).astype(str))
    n, n_groups = len(group), len(labels)
    texts = pd.DataFrame({"p": np.r_[prompt, prompt], "t": np.r_[chosen, rejected]})
    text = texts.groupby(["p", "t"], sort=False).ngroup().to_numpy()  # (2 n_pairs,)
    # nodes 0..n_groups-1 are groups, the rest texts; edges: group -- each of its texts
    size = n_groups + int(text.max()) + 1
    edges = coo_matrix((np.ones(2 * n), (np.r_[group, group], n_groups + text)), (size, size))
    _, component = connected_components(edges, directed=False)
    of_group = component[:n_groups]
    members = pd.Series(np.asarray(labels, dtype=object)).groupby(of_group).agg(sorted)
    names = {k: _joined_name(m) for k, m in members.items()}
    taken = pd.Series(list(names.values())).value_counts()
    for k, name in names.items():  # a joined name that is also another group's label
        if taken[name] > 1 and len(members[k]) > 1:
            names[k] = f"{name} (joined)"
    return np.array([names[k] for k in of_group], dtype=object)[group]


def _joined_name(members: list[str]) -> str:
    if len(members) <= _NAMED:
        return "+".join(members)
    return f"{members[0]}+{len(members) - 1} more"


def dedupe_pairs(
    pairs: pd.DataFrame, groups: Any, how: str = "pairs", *, group_by: str = "group"
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Deduplicate pairs for an audit: drop repeated pairs, or join groups sharing texts.

    Parameters
    ----------
    pairs : DataFrame
        ``id`` (optional: the row labels otherwise), ``prompt``, ``chosen`` and ``rejected``
        of ``n_pairs`` pairs.
    groups : array-like of shape (n_pairs,)
        Each pair's group (the audit's unit: a user, or the prompt).
    how : {"none", "pairs", "texts"}, default="pairs"
        ``pairs``: keep the first row of each repeated (prompt, chosen, rejected); pairs
        judged the other way are kept. ``texts``: keep every pair, join the groups that
        share a text (:func:`join_groups`). ``none``: change nothing.
    group_by : str, default="group"
        The groups' column, for the record.

    Returns
    -------
    kept : ndarray of bool, shape (n_pairs,)
        The rows to audit.
    groups : ndarray of str, shape (n_pairs,)
        Every row's group after the join (the given groups unless ``how="texts"``).
    record : dict
        JSON-ready: ``how``, ``group_by``, ``pairs_before``, ``pairs_after``,
        ``pairs_dropped`` (``count`` and the first 100 ``ids``), ``groups_before``,
        ``groups_after``, ``joined`` (``texts``: groups made of several, and the largest
        one's ``groups`` and ``pairs``) and ``note`` (what was done, in words).

    Examples
    --------
    >>> import pandas as pd
    >>> pairs = pd.DataFrame({"id": ["x", "y", "z"], "prompt": ["q", "q", "q"],
    ...                       "chosen": ["a", "a", "b"], "rejected": ["b", "b", "a"]})
    >>> kept, groups, record = dedupe_pairs(pairs, ["u1", "u2", "u3"], "pairs")
    >>> kept.tolist(), record["pairs_dropped"]
    ([True, False, True], {'count': 1, 'ids': ['y']})
    """
    import numpy as np
    import pandas as pd

    if how not in DEDUPE:
        raise ValueError(
            f"The 'how' parameter of dedupe_pairs must be one of {DEDUPE}. Got {how!r}."
        )
    given = pd.Series(np.asarray(groups, dtype=object)).astype(str).to_numpy(dtype=object)
    n = len(pairs)
    if len(given) != n:
        raise ValueError(f"dedupe_pairs: {len(given)} group labels for {n} pairs")
    kept, labels = np.ones(n, dtype=bool), given
    if how == "pairs":
        kept = first_copies(pairs)
    elif how == "texts":
        labels = join_groups(pairs, given)
    ids = (pairs["id"] if "id" in pairs else pd.Series(pairs.index)).astype(str).to_numpy()
    before, after = len(set(given)), len(set(labels[kept]))
    record: dict[str, Any] = {
        "how": how,
        "group_by": group_by,
        "pairs_before": n,
        "pairs_after": int(kept.sum()),
        "pairs_dropped": {"count": int(n - kept.sum()), "ids": ids[~kept][:SHOWN_IDS].tolist()},
        "groups_before": before,
        "groups_after": after,
    }
    if how == "texts":
        per_group = pd.DataFrame({"given": given, "joined": labels}).groupby("joined")
        counts = per_group.given.agg(["nunique", "size"])
        largest = counts.sort_values(["nunique", "size"], ascending=False).iloc[0] if n else None
        record["joined"] = {
            "groups": int((counts["nunique"] > 1).sum()),
            "largest": None if largest is None else {"groups": int(largest["nunique"]),
                                                     "pairs": int(largest["size"])},
        }  # fmt: skip
    record["note"] = _note(record)
    return kept, labels, record


def _note(record: dict[str, Any]) -> str:
    """What a dedupe did, in one sentence."""
    by = f"'{record['group_by']}'"
    before, after = record["groups_before"], record["groups_after"]
    if record["how"] == "pairs":
        dropped = record["pairs_dropped"]["count"]
        return (
            f"kept the first row of each repeated pair (same prompt, chosen and rejected): "
            f"{dropped} of {record['pairs_before']} pairs dropped, {after} of {before} groups "
            f"({by}) left; pairs judged the other way kept"
        )
    if record["how"] == "texts":
        largest = record["joined"]["largest"]
        biggest = (
            f" (the largest joins {largest['groups']} groups, {largest['pairs']} pairs)"
            if largest and largest["groups"] > 1 else ""
        )  # fmt: skip
        return (
            f"joined the groups ({by}) that share a response (with its prompt): {before} "
            f"groups became {after}{biggest}; every pair kept"
        )
    return "the pairs and groups as given"
