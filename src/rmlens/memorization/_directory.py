"""The audit's record (config.json) and its one resume check, and write errors in one line.

The record says what makes the tables: the resolved settings, the estimator, the grouping
column and the data's fingerprint. :func:`check_resume` hands
:meth:`rmlens.experiment.ExperimentDir.resume` the part of it an audit compares, so a
changed setting is refused in the wording every command uses.
"""

from __future__ import annotations

import errno
import json
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

import rmlens
from rmlens._errors import InputError
from rmlens.backbones import precision_note, resolve_precision
from rmlens.data import FINGERPRINT_COLUMNS, data_sha1, dedupe_pairs, derive_id
from rmlens.experiment import ExperimentDir, with_defaults
from rmlens.memorization._config import (
    EXECUTION_FIELDS,
    GROWTH_FIELDS,
    RESOLVED_FIELDS,
    AuditConfig,
    regime_words,
)
from rmlens.memorization._regime import planned_validation
from rmlens.rewards import resolve_device

# errno values meaning "this output cannot be written": full disk or quota, read-only file
# system, no permission, a path through a regular file
OUTPUT_ERRORS = {
    errno.ENOSPC: "no space left on the device; free some space or choose another `out`",
    errno.EDQUOT: "disk quota exceeded; free some space or choose another `out`",
    errno.EROFS: "read-only file system; choose another `out`",
    errno.EACCES: "permission denied; choose another `out`",
    errno.EPERM: "operation not permitted; choose another `out`",
    errno.ENOTDIR: "a part of the path is a file, not a folder; choose another `out`",
}


@dataclass
class Grouping:
    """Every audited pair's group label, the column it came from, the note saying how groups
    were chosen, and the folds of the plan (fewer than asked when there are fewer groups);
    ``kept``: the rows of the given pairs that are audited (``dedupe`` pairs drops repeats),
    ``dedupe``: what ``dedupe`` did (``summary.json``'s ``dedupe``)."""

    groups: pd.Series
    column: str
    note: str
    folds: int
    kept: np.ndarray | None = None
    dedupe: dict | None = None

    def audited(self, pairs: pd.DataFrame) -> pd.DataFrame:
        """The rows of ``pairs`` the audit reads (all of them unless ``dedupe`` dropped
        some), renumbered from 0 as ``groups`` is."""
        if self.kept is None or self.kept.all():
            return pairs
        return pairs[self.kept].reset_index(drop=True)


def audit_precision(config: AuditConfig) -> tuple[str, str]:
    """The resolved precision (fp32 or bf16) of the audit's runs here, and the console's line
    on it: the fine-tuned runs' training and scoring, or the frozen backbone's encoding."""
    typed, device, task = config.precision, "cpu", "encode"
    if config.mode == "finetune":
        train = config.train
        typed, device, task = train.precision, resolve_device(train.device), "finetune"
    return resolve_precision(typed, device, task=task), precision_note(typed, device, task=task)


def resolve_groups(pairs: pd.DataFrame, group_by: str | None) -> tuple[pd.Series, str, str]:
    """Group label of every pair, the column used, and a note saying how groups were chosen."""
    if group_by is not None:
        if group_by not in pairs:
            raise InputError(
                f"`group_by`: no column '{group_by}' in the data (columns: {', '.join(pairs)})"
            )
        missing = pairs[group_by].isna().to_numpy()
        if missing.any():
            row = int(np.flatnonzero(missing)[0]) + 1
            raise InputError(f"row {row}: '{group_by}' (the grouping column) is empty")
        return pairs[group_by].astype(str), group_by, f"grouped by '{group_by}'"
    if "user_id" in pairs and pairs.user_id.notna().all():
        return pairs.user_id.astype(str), "user_id", "grouped by 'user_id'"
    groups = pairs.prompt.map(lambda p: derive_id(p, length=12))
    note = "no user_id column and no `group_by`: grouped by prompt"
    return groups, "prompt", note


def group_pairs(pairs: pd.DataFrame, config: AuditConfig, *, plan: bool = True) -> Grouping:
    """:func:`resolve_groups`, deduplicated as ``config.dedupe`` says, and a K-fold plan's
    folds capped at the number of groups (``plan`` False: no plan of runs, so the note says
    nothing of folds). ``dedupe`` that leaves fewer than 2 groups is refused
    (``InputError``): no plan can hold a group out."""
    groups, column, note = resolve_groups(pairs, config.group_by)
    kept, joined, dedupe = dedupe_pairs(pairs, groups, config.dedupe, group_by=column)
    if config.dedupe != "none":
        _check_left(dedupe, config.dedupe)
        groups = pd.Series(joined[kept], name=groups.name)
        note += f"; `dedupe` {config.dedupe}: {_dedupe_words(dedupe)}"
    folds = config.folds
    n_groups = int(groups.nunique())
    if config.plan == "kfold" and 2 <= n_groups < folds:
        folds = n_groups
        if plan:
            note += f"; only {folds} groups, so {folds} folds (leave one group out)"
    check_groups(config, len(groups), n_groups, folds, column)
    return Grouping(groups, column, note, folds, kept=kept, dedupe=dedupe)


def check_groups(config: AuditConfig, n_pairs: int, n_groups: int, folds: int,
                 column: str) -> None:  # fmt: skip
    """Refuse, before any training, a plan that cannot work as asked, naming its first cause:
    no pairs; one group (nothing to hold out); runs that train on a single group while their
    choice (lambda, early stopping) needs validation groups carved from their training
    groups, where it would otherwise fall to the grid's edge in silence."""
    if n_pairs == 0:
        raise InputError("no pairs to audit")
    if n_groups < 2:
        raise InputError(
            f"{n_pairs} pair(s) in 1 group ('{column}'): a plan needs at least 2 groups, one "
            "to train on and one to hold out; give pairs of more groups, or `group_by` a "
            "column with more than one value"
        )
    if not config.validates:
        return
    counts = planned_validation(n_groups, kind=config.plan, folds=folds,
                                fraction=config.val_fraction)  # fmt: skip
    starved = sum(1 for val, _ in counts if val == 0)
    if not starved:
        return
    if config.mode == "frozen" and config.head.convex:
        choice = "lambda from `l2_grid`"
        fix = "pass one `l2_grid` value (a fixed lambda, e.g. `l2_grid` 1)"
    else:
        choice = "early stopping (`patience`)" + (
            " and the learning rate from `lr_grid`" if config.mode == "finetune" else "")
        fix = "set `patience` 0 (train every epoch)" + (
            " and one `lr_grid` value" if config.mode == "finetune" else "")
    raise InputError(
        f"{n_groups} groups ('{column}'): {starved} of the {len(counts)} runs of each repeat "
        f"train on a single group, leaving no group to validate {choice} on, so the choice "
        f"would fall to a default in silence; {fix}, or audit data with more groups "
        "(`group_by` another column)"
    )


def _dedupe_words(record: dict) -> str:
    """What ``dedupe`` did, for the grouping note (short: the console says it per audit)."""
    if record["how"] == "pairs":
        return (f"{record['pairs_dropped']['count']} repeated pairs dropped, "
                f"{record['pairs_after']} left")  # fmt: skip
    return f"{record['groups_before']} groups joined into {record['groups_after']}"


def _check_left(record: dict, how: str) -> None:
    """Refuse a dedupe that leaves fewer than 2 groups, saying how many remain."""
    left, before, by = record["groups_after"], record["groups_before"], record["group_by"]
    if left >= 2:
        return
    if how == "texts":
        what = (f"joined the {before} groups ('{by}') into {left} through the responses they "
                "share")  # fmt: skip
        fix = ("`group_by` a column that keeps the copies together (a passage or prompt id), "
               "or use `dedupe` pairs (drops repeated pairs only)")  # fmt: skip
    else:
        what = f"left {left} group of {before} ('{by}')"
        fix = "use `dedupe` none, or `group_by` a column with more groups"
    raise InputError(
        f"`dedupe` {how} {what}: {left} group remains, and a plan needs at least 2 (one to "
        f"train on, one to hold out); {fix}"
    )


def audit_data_sha1(pairs: pd.DataFrame, group_col: str) -> str:
    """What the runs read (pairs, margins) and how they are grouped (``data_sha1``)."""
    columns = [c for c in FINGERPRINT_COLUMNS if c in pairs]
    return data_sha1(pairs, [*columns, group_col])


def make_record(
    pairs: pd.DataFrame, config: AuditConfig, grouping: Grouping, estimator: str, note: str
) -> dict:
    """config.json of the audit (its ``audit.runs`` set when the plan is written)."""
    n_groups = int(grouping.groups.nunique())
    return {
        "version": rmlens.__version__,
        "audit": config.resolved().to_dict(),
        "regime": f"{regime_words(config, n_groups=n_groups, folds=grouping.folds)}; "
                  f"estimator {note}",
        "estimator": estimator,
        "estimator_note": note,
        "precision": audit_precision(config)[0],
        "data_sha1": audit_data_sha1(pairs, grouping.column),
        "n_pairs": len(pairs),
        "group_by": grouping.column,
        "group_note": grouping.note,
        "n_groups": n_groups,
        "folds_used": grouping.folds,
        "dedupe": grouping.dedupe,
    }


def check_resume(exp: ExperimentDir, record: dict) -> dict | None:
    """Create ``exp`` or check that the audit saved there is this one; the saved record.

    Execution-only settings (``EXECUTION_FIELDS``) may differ: they never change the tables.
    So may the target and cap (``GROWTH_FIELDS``), and with a target now, ``runs``: the saved
    audit's runs are the first runs of the grown plan, whatever its length. The estimator is
    compared as resolved (brute force for an audit saved before there was a choice).
    """
    exp.create()
    fixed = record["audit"].get("target_reliability") is None  # no target: runs are fixed
    return exp.resume(
        record,
        what="an audit",
        settings=lambda r: comparable(r, fixed=fixed),
        hint=lambda saved: grew_hint(saved, record, fixed=fixed),
    )


def comparable(record: dict, *, fixed: bool) -> dict:
    """The part of an audit's record that makes its tables (compared field by field)."""
    settings = _results_part(saved_audit(record), runs=fixed)
    settings["grouping column"] = record.get("group_by")
    settings["estimator"] = record.get("estimator", "brute")  # saved before there was a choice
    settings["precision"] = record.get("precision", "fp32")  # saved before there was bf16
    return settings


def saved_audit(record: dict) -> dict:
    """A record's ``audit`` settings; one it lacks (saved before it existed) had its
    default's effect."""
    defaults = json.loads(json.dumps(AuditConfig().to_dict()))  # as saved: tuples as lists
    return with_defaults(AuditConfig.upgrade(record.get("audit") or {}), defaults)


def grew_hint(saved: dict, record: dict, *, fixed: bool) -> str:
    """How to resume an audit a target grew, when it is now given without one."""
    was = saved_audit(saved)
    grown = was.get("target_reliability")
    if not fixed or grown is None or was.get("runs") == record["audit"]["runs"]:
        return ""
    return (
        f" (it grew to {was.get('runs')} runs towards `target_reliability` {grown}: "
        f"give `target_reliability`, or `runs` {was.get('runs')}, to resume it)"
    )


def _results_part(audit_record: dict, *, runs: bool = True) -> dict:
    """The settings that make the tables: all but execution and growth settings; ``runs``
    left out too when the audit has a target (it is then where the audit starts from)."""
    skip = {*EXECUTION_FIELDS, *GROWTH_FIELDS, *RESOLVED_FIELDS, *(() if runs else ("runs",))}
    return {k: {n: x for n, x in v.items() if n not in RESOLVED_FIELDS} if isinstance(v, dict)
            else v for k, v in audit_record.items() if k not in skip}  # fmt: skip


def _os_errno(err: OSError) -> int | None:
    if err.errno is not None:
        return err.errno
    found = re.search(r"\[Errno (\d+)\]", str(err))  # pyarrow puts the errno in the message
    return int(found.group(1)) if found else None


@contextmanager
def output_errors(out: str | Path | ExperimentDir):
    """Turn a full disk or an unwritable ``out`` into a one-line ``InputError``."""
    try:
        yield
    except OSError as err:
        code = _os_errno(err)
        if code not in OUTPUT_ERRORS:
            raise
        where = f" ({err.filename})" if err.filename else ""
        raise InputError(
            f"`out` {Path(out)}: cannot write{where}: {OUTPUT_ERRORS[code]}"
        ) from None
