"""The audit summary's sentences: what summary.json says, in the one wording that the console
(``rmlens memorize``) and the report (its Reward models and Dataset summary sections) print.

A :class:`Sentence` keeps the library's fixed words apart from the data filled into them, so
the report escapes the data and nothing else; :func:`audit_sentences` makes every sentence
of one summary, and each renderer places them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from rmlens._display import fmt, snippet
from rmlens.memorization._damping import damping_sentence
from rmlens.memorization._notes import check_sentence, checkpoint_rows, checkpoint_sentence
from rmlens.memorization._quality import shortcut_sentence
from rmlens.memorization._regime import validation_words
from rmlens.memorization._reliability import WARN_BELOW
from rmlens.rewards.objectives import REGISTRY, Objective


@dataclass(frozen=True)
class Sentence:
    """One sentence: fixed words with the data filled in.

    Parameters
    ----------
    words : str
        A :meth:`str.format` template of the library's own words (HTML-safe: no ``<``,
        ``>`` or ``&``), with a ``{name}`` for each value.
    values : mapping of str to str, default={}
        The data, as text; a renderer to HTML escapes these and only these.

    Examples
    --------
    >>> str(Sentence("Mode: {note}.", {"note": "frozen audit"}))
    'Mode: frozen audit.'
    """

    words: str
    values: Mapping[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.words.format(**self.values)


def _said(text: Any) -> Sentence:
    """A sentence that is all data (a note or message summary.json holds as it is)."""
    return Sentence("{text}", {"text": str(text)})


@dataclass(frozen=True)
class AuditSentences:
    """Every sentence of one audit's summary.json, each None (or empty) when it has none.

    Parameters
    ----------
    warnings : tuple of (str, Sentence)
        Each warning's code and message (the console names the codes: the messages went
        to stderr).
    shortcut : Sentence or None
        The one column held-out accuracy rests on.
    regime : Sentence or None
        How each run was regularized or stopped on its validation pairs.
    membership : Sentence or None
        summary.json's ``validation`` ``membership`` note.
    standing : Sentence or None
        A one-checkpoint audit's standing: measured on its data by check runs
        (``check``), or the benchmark's only.
    estimator, mode, checkpoint, exactness, damping : Sentence or None
        Which estimator made TM, TG and CM; the mode's note; a one-checkpoint audit's
        damping; the paired counterfactuals against exact refits; the paired damping.
    reliability : Sentence or None
        What the split-half reliability figures say (the reliability table's caption).
    reliability_notes : tuple of Sentence
        ``reliability``'s ``reason`` and ``note``.
    significant : Sentence or None
        How many pairs have CM significantly above 0.
    links : tuple of Sentence
        What CM follows besides memory: the size of a pair's group, its margin.
    conflicts : Sentence or None
        How many memorized pairs another group judged the other way, when any did.
    duplicates : Sentence or None
        What pairs repeated across groups do to TG.
    outcome : dict of str to (str, str)
        The outcome's labelled rows by summary.json entry: ``n_runs_finished``,
        ``n_pairs``, ``pairs_lacking_runs``, ``dropped_truncation``, ``mean``,
        ``objective``, ``dedupe``, ``estimator``, ``target_reliability``, ``format``,
        ``truncation``; a one-checkpoint audit's ``checkpoint`` (the RM),
        ``checkpoint_pairs`` and ``checkpoint_standing``.
    """

    warnings: tuple[tuple[str, Sentence], ...] = ()
    shortcut: Sentence | None = None
    regime: Sentence | None = None
    membership: Sentence | None = None
    standing: Sentence | None = None
    estimator: Sentence | None = None
    mode: Sentence | None = None
    checkpoint: Sentence | None = None
    exactness: Sentence | None = None
    damping: Sentence | None = None
    reliability: Sentence | None = None
    reliability_notes: tuple[Sentence, ...] = ()
    significant: Sentence | None = None
    links: tuple[Sentence, ...] = ()
    conflicts: Sentence | None = None
    duplicates: Sentence | None = None
    outcome: dict[str, tuple[str, str]] = field(default_factory=dict)

    def sentences(self) -> Iterator[Sentence]:
        """Every sentence, in the order of the fields (the outcome's rows aside).

        Returns
        -------
        iterator of Sentence
            The warnings' messages, then each sentence the summary has.
        """
        for part in fields(self):
            value = getattr(self, part.name)
            if isinstance(value, Sentence):
                yield value
            elif part.name == "warnings":
                yield from (message for _, message in value)
            elif isinstance(value, tuple):
                yield from value


def audit_sentences(
    summary: dict[str, Any], counts: Sequence[tuple[int, int]] | None = None
) -> AuditSentences:
    """The sentences of an audit's summary.json, for the console and the report alike.

    Parameters
    ----------
    summary : dict
        summary.json, as read.
    counts : sequence of (int, int), optional
        Per run, its validation groups and its training groups, from
        :func:`plan_validation` of the audit's plan.parquet; without them the validation
        groups are given as a share.

    Returns
    -------
    AuditSentences
    """
    validation = summary.get("validation")
    validation = validation if isinstance(validation, dict) else {}
    reliability = summary.get("reliability")
    reliability = reliability if isinstance(reliability, dict) else {}
    return AuditSentences(
        warnings=tuple(_warning(w) for w in summary.get("warnings") or []),
        shortcut=_shortcut(summary.get("shortcut")),
        regime=_regime(validation, counts),
        membership=_membership(summary, validation),
        standing=_standing(summary),
        **_estimator(summary),
        reliability=_reliability_verdict(reliability),
        reliability_notes=tuple(_reliability_note(reliability[k]) for k in ("reason", "note")
                                if reliability.get(k)),  # fmt: skip
        significant=_significant(summary),
        links=_links(summary.get("links")),
        conflicts=_conflicts(summary.get("memorized_conflicts")),
        duplicates=_duplicates(summary.get("duplicates")),
        outcome=_outcome(summary),
    )


def _warning(warning: Any) -> tuple[str, Sentence]:
    """A summary.json warning's code ('' for a bare message) and message."""
    if isinstance(warning, dict):
        return str(warning.get("code", "")), _said(warning.get("message", warning))
    return "", _said(warning)


def _shortcut(found: dict | None) -> Sentence | None:
    """The shortcut's sentence, capitalized: it opens a warning."""
    text = shortcut_sentence(found)
    return _said(text[0].upper() + text[1:]) if text else None


# what counts as in a run and as out of it, where summary.json's own note speaks of validation
# pairs there were none of, or of runs a one-checkpoint audit did not have
NO_VALIDATION = Sentence("A pair is in a run only if the run's RM took gradients on it; no run "
                         "set validation pairs aside.")  # fmt: skip
CHECKPOINT_VALIDATION = Sentence(
    "The evaluation pairs (manifest: val_ids) were never trained on, so they count neither in "
    "n_in nor in n_out: they have no TM, TG or CM."
)


def _membership(summary: dict[str, Any], validation: dict[str, Any]) -> Sentence | None:
    """How pairs count as in or out of a run: summary.json's note; where no run set
    validation pairs aside, without them; for a one-checkpoint audit (one run, trained on
    every pair but its own evaluation split) only what becomes of that split, if it had one."""
    if isinstance(summary.get("checkpoint"), dict):
        return CHECKPOINT_VALIDATION if validation.get("used") else None
    if not validation.get("membership"):
        return None
    if validation.get("used") is False and "l2" not in validation:
        return NO_VALIDATION
    return _said(validation["membership"])


def _reliability_note(text: Any) -> Sentence:
    """A reliability ``reason`` or ``note`` (a clause) as a sentence of its own."""
    return Sentence("Reliability: {text}.", {"text": str(text).rstrip(".")})


def _number(value: Any) -> str:
    """A penalty such as 300 or 0.3 as written, without padded decimals."""
    return f"{value:g}" if isinstance(value, (int, float)) else fmt(value)


def _regime(
    validation: dict[str, Any], counts: Sequence[tuple[int, int]] | None
) -> Sentence | None:
    """How each run was regularized (the logistic head's lambda) or stopped (early stopping),
    on validation pairs from which groups."""
    lam = validation.get("l2")
    share = validation.get("fraction")
    share = float(share) if isinstance(share, (int, float)) else 0.0
    groups = validation.get("pairs_words") or validation_words(share, counts)
    if isinstance(lam, dict):
        return Sentence(
            "Training regime: the logistic head (linear Bradley-Terry with an L2 penalty) "
            "solved to its optimum per run; lambda chosen per run on validation pairs from "
            "{groups}: from {min} to {max} (median {median}).",
            {"groups": str(groups), **{k: _number(lam.get(k)) for k in ("min", "max", "median")}},
        )
    if not validation.get("used"):
        return None
    if validation.get("given"):  # a one-checkpoint audit's --eval-data: its training unknown
        return Sentence(
            "Evaluation pairs: {groups}, given apart; the RM's own training did not read them, "
            "so their accuracy is its held-out standing, and the damping is calibrated on them.",
            {"groups": str(groups)},
        )
    if not validation.get("patience"):  # evaluated each epoch, but nothing stops early
        return Sentence(
            "Training regime: validation pairs from {groups} evaluated each epoch; no early "
            "stopping (patience 0), so the last epoch's weights are kept.",
            {"groups": str(groups)},
        )
    best = validation.get("best_epoch") or {}
    epochs = (f" Best epochs ranged from {fmt(best.get('min'))} to {fmt(best.get('max'))} "
              f"(median {fmt(best.get('median'), 0)})." if best else "")  # fmt: skip
    return Sentence(
        "Training regime: early stopping with patience {patience} on validation pairs from "
        "{groups}; the best epoch's weights are kept.{epochs}",
        {"patience": fmt(validation.get("patience")), "groups": str(groups), "epochs": epochs},
    )


def _standing(summary: dict[str, Any]) -> Sentence | None:
    """A one-checkpoint audit's standing: measured by its check runs, or plainly the
    benchmark's."""
    if isinstance(summary.get("check"), dict):
        return Sentence("{text}.", {"text": check_sentence(summary["check"])})
    if isinstance(summary.get("checkpoint"), dict):
        return Sentence("Standing: the benchmark's only, not measured on this data ({flag} K "
                        "trains K runs in the RM's regime and measures it).",
                        {"flag": "`check_runs`"})  # fmt: skip
    return None


def _estimator(summary: dict[str, Any]) -> dict[str, Sentence | None]:
    """Which estimator made TM, TG and CM, the mode's note, a one-checkpoint audit's damping,
    the exactness check and the paired damping (``estimator`` ... ``damping``)."""
    name = summary.get("estimator")
    if not name:
        return {}
    note = str(summary.get("estimator_note") or name)
    said = {"estimator": Sentence("Estimator: {note}.", {"note": note})}
    if summary.get("mode_note"):
        said["mode"] = Sentence("Mode: {note}.", {"note": str(summary["mode_note"])})
    checkpoint = summary.get("checkpoint")
    if isinstance(checkpoint, dict) and checkpoint.get("damping") is not None:
        said["checkpoint"] = Sentence("{text}.", {"text": checkpoint_sentence(checkpoint)})
    exact = summary.get("exactness")
    if isinstance(exact, dict):
        said["exactness"] = Sentence(
            "Exactness of the paired counterfactuals against exact refits of {groups} groups "
            "({pairs} pairs): |p_cf \u2212 p_refit| median {median}, 90th percentile {p90}, "
            "max {max}, against true effects of median {effect}; Spearman of the effects "
            "{spearman}.",
            {"groups": fmt(exact.get("groups")), "pairs": fmt(exact.get("pairs")),
             "median": fmt(exact.get("median_abs_error"), 5),
             "p90": fmt(exact.get("p90_abs_error"), 5), "max": fmt(exact.get("max_abs_error"), 5),
             "effect": fmt(exact.get("median_abs_effect"), 4),
             "spearman": fmt(exact.get("effect_spearman"), 4)},
        )  # fmt: skip
    damping = summary.get("damping")
    if isinstance(damping, dict) and "damping" in damping:
        said["damping"] = Sentence("{text}.", {"text": damping_sentence(damping)})
    return said


def _reliability_verdict(reliability: dict[str, Any]) -> Sentence | None:
    """What the reliability figures say: which scores are below ``WARN_BELOW``, or that
    the rankings are reliable (between halves that differ only in seeds: seed noise)."""
    scores = [s for s in ("tm", "tg", "cm") if isinstance(reliability.get(s), dict)]
    figures = {s: reliability[s].get("spearman_brown") for s in scores}
    known = {s: v for s, v in figures.items() if isinstance(v, (int, float)) and v == v}
    if not known:  # one run, or too few to split: its reason says why
        return None
    low = [s.upper() for s in scores if s in known and known[s] < WARN_BELOW]
    if not low and len(known) < len(scores):
        return None  # no verdict on a score without a figure
    if low:
        return Sentence("{low} below {limit} (Spearman-Brown): that ranking is not yet reliable",
                        {"low": ", ".join(low), "limit": str(WARN_BELOW)})  # fmt: skip
    if "differ only in seeds" in str(reliability.get("note") or ""):  # _finish.SAME_PARTITION
        return Sentence("every score at or above {limit} (Spearman-Brown), but between halves "
                        "that differ only in seeds: the figures measure seed noise, not how "
                        "reliable the rankings are under another draw of the plan",
                        {"limit": str(WARN_BELOW)})  # fmt: skip
    return Sentence("every score at or above {limit} (Spearman-Brown): the rankings are reliable",
                    {"limit": str(WARN_BELOW)})  # fmt: skip


def _count(value: Any) -> str:
    """A count as an integer with thousands separators (an en dash when missing)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return "\u2013"
    return f"{int(value):,}" if float(value).is_integer() else fmt(value)


def _significant(summary: dict[str, Any]) -> Sentence | None:
    """How many pairs have CM's interval above 0, of how many, with the estimator's note on
    what that means."""
    significant = summary.get("cm_significant")
    if not (isinstance(significant, dict) and "count" in significant):
        return None
    level = (summary.get("intervals") or {}).get("level", 0.95)
    values = {"level": f"{level:.0%}" if isinstance(level, (int, float)) else "95%",
              "count": _count(significant["count"])}  # fmt: skip
    words = "CM significantly above 0 ({level} interval above 0): {count}"
    if "n_pairs" in summary:
        words += " of {n_pairs}"
        values["n_pairs"] = _count(summary["n_pairs"])
    words += " pairs."
    if significant.get("note"):
        words += " {note}."
        values["note"] = significant["note"][0].upper() + significant["note"][1:]
    return Sentence(words, values)


# What each link says of CM where its interval excludes 0 (the findings page measures both)
LINK_WORDS = {
    "group_size": ("the size of a pair's group", " A run holds a group out whole, so a pair's "
                   "CM counts what its group-mates teach the RM about it; size itself barely "
                   "moved CM where measured (the documentation's Findings page: random groups, "
                   "questions cut at random), so this link says how this data's large and "
                   "small groups differ."),
    "margin": ("the pair's margin", " Which way depends on the data and on what a run holds "
               "out with each pair: the documentation's Findings page gives the verdict by kind "
               "of data (on SQuALITY's ratings CM did not rise with the margin; held out "
               "alone, the small-margin pairs were those that annotators judged both ways)."),
}  # fmt: skip


def _links(links: Any) -> tuple[Sentence, ...]:
    """CM's Spearman with group size and margin, with its interval, and what a link means."""
    said = []
    for key, (what, meaning) in LINK_WORDS.items():
        link = links.get(key) if isinstance(links, dict) else None
        if not isinstance(link, dict):
            continue
        way = "rises with" if link["lo"] > 0 else "falls with" if link["hi"] < 0 else None
        shares = [f"{b['memorized']:.0%} of {b['n_pairs']} pairs {b['sizes']}"
                  for b in link.get("by_size", []) if b["n_pairs"]]  # fmt: skip
        said.append(Sentence(
            "CM {way} {what} (Spearman {rho}, 95% interval over groups {lo} to {hi}{shares})."
            + (meaning if way else ""),
            {"way": way or "does not follow", "what": what, "rho": f"{link['spearman']:.2f}",
             "lo": f"{link['lo']:.2f}", "hi": f"{link['hi']:.2f}",
             "shares": "; memorized: " + ", ".join(shares) if shares else ""},
        ))  # fmt: skip
    return tuple(said)


def _conflicts(conflicts: Any) -> Sentence | None:
    """How many memorized pairs another group judged the other way, when any did."""
    if not (isinstance(conflicts, dict) and conflicts.get("count")):
        return None
    return Sentence(
        "{count} of {memorized} memorized pairs ({share}) were judged the other way by another "
        "group: memorized because the groups disagree.",
        {"count": fmt(conflicts["count"]), "memorized": fmt(conflicts["memorized"]),
         "share": f"{conflicts['share']:.0%}"},
    )  # fmt: skip


def _duplicates(dup: Any) -> Sentence | None:
    """What pairs repeated across groups do to TG, when there are any."""
    if not (isinstance(dup, dict) and "texts" in dup and dup["pairs_repeated_across_groups"]):
        return None
    return Sentence("A held-out pair may have been seen through another group's copy: TG is "
                    "optimistic for the repeated pairs.")  # fmt: skip


def _outcome(summary: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """The audit's outcome in labelled rows, by summary.json entry: runs, pairs, pairs without
    runs, pairs dropped, mean scores, objective, dedupe, estimator, target reliability, input
    format, truncation, a one-checkpoint audit's RM."""
    rows: dict[str, tuple[str, str]] = {}
    done, planned = summary.get("n_runs_finished"), summary.get("n_runs_planned")
    if done is not None or planned is not None:
        text = f"{_count(done)} of {_count(planned)}"
        failed = [f for f in summary.get("failed_runs") or [] if isinstance(f, dict)]
        if failed:
            listed = "; ".join(f"run {f.get('run')}: {snippet(f.get('error', ''), 120)}"
                               for f in failed[:10])  # fmt: skip
            more = f"; and {len(failed) - 10} more" if len(failed) > 10 else ""
            text += f" ({len(failed)} failed: {listed}{more})"
        rows["n_runs_finished"] = ("runs finished", text)
    if "n_pairs" in summary:
        rows["n_pairs"] = ("pairs", _count(summary["n_pairs"]))
    lacking = summary.get("pairs_lacking_runs")
    if isinstance(lacking, dict) and "count" in lacking:
        text = _count(lacking["count"])
        if lacking["count"]:
            text += (
                f" ({_count(lacking.get('no_in_run'))} with no in-run, "
                f"{_count(lacking.get('no_out_run'))} with no out-run: no TM, TG or CM)"
            )
        rows["pairs_lacking_runs"] = ("pairs lacking an in- or out-run", text)
    dropped = summary.get("dropped_truncation")
    if isinstance(dropped, dict) and "count" in dropped:
        text = _count(dropped["count"])
        if dropped["count"]:
            text += (" (chosen and rejected the same tokens as the model reads them: cut "
                     "to the length, or different only where the tokenizer does not look; "
                     "not audited)")  # fmt: skip
        rows["dropped_truncation"] = ("pairs dropped as the same tokens", text)
    mean = summary.get("mean")
    if isinstance(mean, dict) and mean:
        scores = " / ".join(fmt(mean.get(k)) for k in ("tm", "tg", "cm"))
        rows["mean"] = ("mean TM / TG / CM", scores)
    objective = summary.get("objective")
    if isinstance(objective, dict) and objective.get("objective") is not None:
        rows["objective"] = ("objective", _objective_words(objective))
    dedupe = summary.get("dedupe")
    if isinstance(dedupe, dict) and dedupe.get("how", "none") != "none":
        rows["dedupe"] = (f"dedupe ({dedupe['how']})", str(dedupe.get("note", "")))
    if summary.get("estimator"):
        estimator = "checkpoint" if summary.get("checkpoint") else str(summary["estimator"])
        rows["estimator"] = ("estimator", ESTIMATORS.get(estimator, estimator))
    target = summary.get("target_reliability")
    if isinstance(target, dict) and target.get("message"):
        rows["target_reliability"] = ("target reliability", str(target["message"]))
    if summary.get("format"):
        rows["format"] = ("input format", str(summary["format"]))
    truncation = summary.get("truncation")
    if isinstance(truncation, dict) and "pairs_cut" in truncation:
        rows["truncation"] = ("pairs cut to the token limit",
                              _truncation_words(truncation, summary.get("n_pairs")))  # fmt: skip
    return rows | checkpoint_rows(summary)


def _truncation_words(truncation: dict[str, Any], n_pairs: Any) -> str:
    """How many pairs the token limit cut, and by how much."""
    text = f"{_count(truncation['pairs_cut'])} of {_count(n_pairs)}" if n_pairs is not None \
        else _count(truncation["pairs_cut"])  # fmt: skip
    text += f" (at most {_count(truncation.get('max_length'))} tokens per prompt + response)"
    if truncation["pairs_cut"]:
        text += (f": {_count(truncation.get('sequences_cut'))} sequences lost a median "
                 f"{_number(truncation.get('tokens_cut_median'))} and at most "
                 f"{_count(truncation.get('tokens_cut_max'))} tokens, the prompt's start "
                 "first")  # fmt: skip
    return text


ESTIMATORS = {
    "paired": "paired (each run scores every pair with its group in and out)",
    "checkpoint": "paired, from one checkpoint (the RM trained on every pair scores it; its "
                  "group removed by a Gauss-Newton step gives TG)",
    "brute": "brute force (in-runs against out-runs)",
}


def _objective_words(objective: dict[str, Any]) -> str:
    """The runs' objective, and whether its mechanism acted in them."""
    name = objective["objective"]
    name = ", ".join(map(str, name)) if isinstance(name, list) else str(name)
    idle = objective.get("runs_inactive") or []
    if idle:
        n_runs = _count(objective.get("n_runs"))
        return f"{name} (its mechanism inactive in {len(idle)} of {n_runs} runs)"
    if REGISTRY.get(name, Objective).plain:
        return name
    return f"{name} (its mechanism acted in every run)"
