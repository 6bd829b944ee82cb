"""The audit: plan, one RM per run, estimators, map and summary, in an experiment directory.

DIR/config.json, plan.parquet, runs/<run>/scores.parquet + rm/ + manifest.json,
memorization.parquet, memorization_map.png, summary.json (DESIGN.md section 6). Every file is
written atomically by this process (the driver), whichever backend trains the runs; a run is
finished when its manifest exists (written last), so starting the audit again on the same
directory redoes only unfinished runs, and a killed audit resumed gives the same tables.

Run until reliable: with ``target_reliability`` the audit starts from ``runs`` (whole repeats
of the plan) and adds one whole repeat at a time until CM's split-half reliability
(Spearman-Brown, mean over splits, as ``summary.json`` reports it) reaches the target or one
more repeat would pass ``max_runs``. The plan grows by its own prefix (run r uses repeat
r // K's seeded shuffle), so runs already finished stay valid; config.json's ``audit.runs``
is the audit's real run count, and summary.json's ``target_reliability`` says why it stopped.

Faults: a run that raises is tried ``retries`` more times, then reported (a warning and
runs/<run>/error.json) while the other runs go on; the tables are then computed from the
finished runs, pairs lacking in- or out-runs get NaN, and summary.json says the audit is
incomplete. When ``abort_after`` runs fail in a row, or every run failed, the failure is
taken as systematic and the run's error is raised. A full disk or an unwritable output
directory raises ``InputError`` (one line; exit code 2 on the command line).
"""

from __future__ import annotations

import errno
import hashlib
import json
import re
import warnings
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

import rmlens
from rmlens._errors import InputError, RmlensNote, RmlensWarning
from rmlens._io import write_json, write_parquet
from rmlens._params import dict_changes, resolve_config
from rmlens.data._fingerprint import FINGERPRINT_COLUMNS, fingerprint
from rmlens.data._schema import to_text
from rmlens.memorization._backends import RunJob, make_backend
from rmlens.memorization._config import (
    EXECUTION_FIELDS,
    GROWTH_FIELDS,
    RESOLVED_FIELDS,
    AuditConfig,
)
from rmlens.memorization._damping import brute_agreement, damping_warning
from rmlens.memorization._estimate import memorization_scores
from rmlens.memorization._map import plot_memorization_map
from rmlens.memorization._paired import (
    choose_estimator,
    exactness_summary,
    exactness_warning,
    group_share,
)
from rmlens.memorization._plan import carve_validation, make_plan, runs_per_repeat
from rmlens.memorization._quality import (
    audit_warnings,
    budget_warning,
    coverage_warning,
    interval_note,
    interval_warning,
    rm_quality,
    run_quality,
    validation_note,
)
from rmlens.memorization._reliability import (
    reliability_warnings,
    same_partition,
    split_half,
    target_status,
    whole_repeats,
)
from rmlens.memorization._runs import (
    RunFailure,
    clean_stale,
    load_matrices,
    load_runs,
    plan_runs,
    read_error,
    run_dir,
    run_done,
    write_error,
    write_run,
)
from rmlens.memorization._summary import categorize, cm_significant, summarize_audit
from rmlens.progress import progress_bar, status
from rmlens.rewards import FrozenHeadTrainer, make_trainer
from rmlens.rewards._trainer import Trainer as PairTrainer

__all__ = ["audit", "finish", "load_runs", "resolve_groups", "run_done"]

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


PAIRED_SIGNIFICANCE = (
    "paired CM: an RM's step with a pair's group (the convex head's, or the last layer's) "
    "almost always scores that pair higher than without it (a training pair's influence on "
    "itself is positive), and the "
    "paired differences share each run's noise, so nearly every pair's interval lies above "
    "0. Significance here says the estimate is precise, not that the pair stands out; CM's "
    "size (the memorized category) does"
)


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
    groups = pairs.prompt.map(lambda p: hashlib.sha1(to_text(p).encode()).hexdigest()[:12])
    note = "no user_id column and no --group-by: grouped by prompt"
    return groups, "prompt", note


def data_fingerprint(pairs: pd.DataFrame, group_col: str) -> str:
    """What the runs read (pairs, margins) and how they are grouped (``fingerprint``)."""
    columns = [c for c in FINGERPRINT_COLUMNS if c in pairs]
    return fingerprint(pairs, [*columns, group_col])


def _os_errno(err: OSError) -> int | None:
    if err.errno is not None:
        return err.errno
    found = re.search(r"\[Errno (\d+)\]", str(err))  # pyarrow puts the errno in the message
    return int(found.group(1)) if found else None


@contextmanager
def output_errors(out: Path):
    """Turn a full disk or an unwritable ``out`` into a one-line ``InputError``."""
    try:
        yield
    except OSError as err:
        code = _os_errno(err)
        if code not in OUTPUT_ERRORS:
            raise
        where = f" ({err.filename})" if err.filename else ""
        raise InputError(f"`out` {out}: cannot write{where}: {OUTPUT_ERRORS[code]}") from None


def _results_part(audit_record: dict, *, runs: bool = True) -> dict:
    """The settings that make the tables: all but execution and growth settings; ``runs``
    left out too when the audit has a target (it is then where the audit starts from)."""
    skip = {*EXECUTION_FIELDS, *GROWTH_FIELDS, *RESOLVED_FIELDS, *(() if runs else ("runs",))}
    return {k: v for k, v in audit_record.items() if k not in skip}


def _show(value) -> str:
    """A setting as in config.json: strings quoted, None as null."""
    return json.dumps(value) if isinstance(value, (str, list, dict, type(None))) else str(value)


def _difference(old: dict, record: dict) -> str | None:
    """What makes the saved audit ``old`` another one than ``record``, or None if the same.

    Execution-only settings (``EXECUTION_FIELDS``) may differ: they never change the tables.
    So may the target and cap (``GROWTH_FIELDS``), and with a target now, ``runs``: the saved
    audit's runs are the first runs of the grown plan, whatever its length. The estimator is
    compared as resolved (brute force for an audit saved before there was a choice).
    """
    # a setting the saved audit lacks (made before it existed) had its default's effect
    was = _with_defaults(old.get("audit") or {}, AuditConfig().to_dict())
    will = record["audit"]
    fixed = will.get("target_reliability") is None  # no target now: the run count is fixed
    changes = dict_changes(
        _results_part(was, runs=fixed),
        json.loads(json.dumps(_results_part(will, runs=fixed))),  # as saved: tuples as lists
    )
    if old.get("group_by") != record["group_by"]:
        changes.append(("grouping column", old.get("group_by"), record["group_by"]))
    estimators = old.get("estimator", "brute"), record.get("estimator", "brute")
    if estimators[0] != estimators[1]:  # "brute": saved before the paired estimator existed
        changes.append(("estimator", *estimators))
    settings = ", ".join(
        f"{name} {_show(then)} (saved) vs {_show(now)} (now)" if i == 0
        else f"{name} {_show(then)} vs {_show(now)}"
        for i, (name, then, now) in enumerate(changes)
    )
    data = None
    if old.get("data_sha1") != record["data_sha1"]:
        n_old, n_now = old.get("n_pairs"), record["n_pairs"]
        size = f"{n_old} pairs (saved) vs {n_now} (now)" if n_old != n_now else f"{n_now} pairs"
        data = (
            f"other data ({size}, fingerprint {old.get('data_sha1')} vs {record['data_sha1']}: "
            "pairs, margins or groups changed)"
        )
    grown = was.get("target_reliability")
    if settings and fixed and grown is not None and was.get("runs") != will["runs"]:
        settings += (
            f" (it grew to {was.get('runs')} runs towards `target_reliability` {grown}: "
            f"give `target_reliability`, or `runs` {was.get('runs')}, to resume it)"
        )
    if settings and data:
        return f"another configuration: {settings}; and {data}"
    if settings:
        return f"another configuration: {settings}"
    return data


def _with_defaults(saved: dict, defaults: dict) -> dict:
    """``saved`` with every key it lacks (nested too) taken from ``defaults``."""
    out = dict(saved)
    for key, value in defaults.items():
        if key not in out:
            out[key] = value
        elif isinstance(value, dict) and isinstance(out[key], dict):
            out[key] = _with_defaults(out[key], value)
    return out


def _prepare_dir(out: Path, record: dict) -> dict | None:
    """Create ``out`` or check that the audit saved there is this one; the saved record."""
    if out.exists() and not out.is_dir():
        raise InputError(f"`out` {out}: is a file, not a directory; choose another `out`")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"`out` {out}: cannot create the directory ({err.strerror})") from err
    config_path = out / "config.json"
    if config_path.exists():
        try:
            old = json.loads(config_path.read_text())
        except ValueError as err:
            raise InputError(f"{config_path}: not valid JSON ({err}); delete it") from None
        differ = _difference(old, record)
        if differ:
            raise InputError(
                f"`out` {out} holds an audit with {differ}; use another `out`, or the saved "
                "settings and data (its config.json) to resume it"
            )
        return old
    return None


def run_seed(seed: int, run: int) -> int:
    return int(np.random.SeedSequence([seed, run]).generate_state(1)[0] % 2**31)


def default_trainer(config: AuditConfig, bias=None) -> PairTrainer:
    """Frozen features with one head per run, or a fine-tuned RM per run (``mode``);
    ``bias``: the pairs' shortcut feature differences for the ``poe`` and ``reweight``
    objectives."""
    config = config.resolved()  # the audit's model, max_length and seed, said once
    if config.mode == "finetune":
        return make_trainer(config.train, bias=bias)
    return FrozenHeadTrainer(
        config.head,
        model=config.model,
        max_length=config.max_length,
        batch_size=config.encode_batch_size,
        bias=bias,
    )


def audit(
    pairs: pd.DataFrame,
    config: AuditConfig | None = None,
    *,
    out: str | Path | None = None,
    trainer: PairTrainer | None = None,
    bias=None,
    quiet: bool = False,
    **overrides,
) -> pd.DataFrame:
    """Run a counterfactual memorization audit and write the experiment directory.

    Parameters
    ----------
    pairs : DataFrame
        The canonical pair table (``rmlens.data.load_pairs``).
    config : AuditConfig, optional
        The settings (default ``AuditConfig()``). With ``target_reliability``, whole repeats
        of the plan are added to ``runs`` until CM's split-half reliability reaches it or one
        more repeat would pass ``max_runs`` (``summary.json``'s ``target_reliability`` says
        which).
    out : str or Path, optional
        The experiment directory (default ``rmlens-audit``); an unfinished audit there is
        resumed (an audit with a target goes on from its last finished repeat, and a higher
        target or cap continues it).
    trainer : PairTrainer, optional
        Defaults to a frozen backbone with one head per run (``FrozenHeadTrainer``). With the
        Ray backend it is prepared here and shipped to the tasks, so it must pickle.
    bias : DataFrame of shape (n_pairs, k), optional
        Shortcut feature differences phi(chosen) - phi(rejected) that the ``poe`` and
        ``reweight`` objectives need: ``rmlens.attribution.bias_features(pairs,
        config.head.bias_features)`` (``config.train`` in finetune mode).
    quiet : bool, default=False
        No progress bars or status lines.
    **overrides
        Fields of ``AuditConfig``, applied to ``config`` (``audit(pairs, runs=10)``).

    Returns
    -------
    The memorization table: ``id, tm, tg, cm, n_in, n_out`` and intervals, ``group``,
    ``category`` and every pair column. Runs that failed for good are left out (see
    ``summary.json``), unless the failure looks systematic.

    Raises
    ------
    InputError
        Bad data or configuration, a full disk or an unwritable ``out``, Ray missing.
    Exception
        A run's own error when ``config.abort_after`` runs failed in a row or every run
        failed.

    Examples
    --------
    >>> table = audit(load_pairs("prefs.jsonl"), runs=8, out="audit")  # doctest: +SKIP
    >>> table.sort_values("cm", ascending=False).head()  # doctest: +SKIP
    """
    config = resolve_config("audit", AuditConfig, config, overrides).check()
    if config.backend == "ray":
        from rmlens.memorization._ray import import_ray

        import_ray()  # fail before the slow preparation when Ray is missing
    out = Path("rmlens-audit" if out is None else out)
    groups, group_col, note = resolve_groups(pairs, config.group_by)
    folds = config.folds
    if config.plan == "kfold" and 2 <= groups.nunique() < folds:
        folds = int(groups.nunique())
        note += f"; only {folds} groups, so {folds} folds (leave one group out)"
    k = runs_per_repeat(config.plan, folds)
    first = _first_runs(config, k)
    estimator, estimator_note, estimator_warning = choose_estimator(
        config, group_share(groups, config, folds)
    )
    record = {
        "version": rmlens.__version__,
        "audit": config.resolved().to_dict(),
        "regime": f"{config.regime()}; estimator {estimator_note}",
        "estimator": estimator,
        "estimator_note": estimator_note,
        "data_sha1": data_fingerprint(pairs, group_col),
        "n_pairs": len(pairs),
        "group_by": group_col,
        "group_note": note,
        "n_groups": int(groups.nunique()),
        "folds_used": folds,
    }
    with output_errors(out):
        saved = _prepare_dir(out, record)
    n_runs = config.runs
    if config.target_reliability is not None:
        # never fewer runs than the saved audit has (finished runs are kept), whole repeats
        had = (saved or {}).get("audit", {}).get("runs")
        n_runs = whole_repeats(max(first, had if isinstance(had, int) else 0), k, up=True)
        if first != config.runs:
            warnings.warn(
                f"`runs` {config.runs} is not a whole number of repeats of {k} runs: "
                f"starting from {first} runs",
                RmlensNote,
                stacklevel=2,
            )
    if not quiet:
        status(f"{len(pairs)} pairs, {groups.nunique()} groups: {note}")
        status(f"estimator: {estimator_note}")
    if estimator_warning:
        warnings.warn(estimator_warning["message"], RmlensWarning, stacklevel=2)
    with ExitStack() as session:
        execute = kept = None
        while True:
            plan = _write_plan(out, record, groups, n_runs, folds, config, note)
            pending = [r for r in range(n_runs) if not run_done(run_dir(out, r))]
            if pending:
                if execute is None:  # the backend and the trainer once, when a run needs them
                    trainer = trainer or default_trainer(config, bias)
                    execute = session.enter_context(make_backend(config).session(quiet=quiet))
                    kept = np.asarray(
                        _prepare(trainer, pairs, groups, config, estimator, quiet), dtype=bool
                    )
                _run_all(
                    execute, trainer, pairs, groups, plan, kept, pending, config, n_runs, out,
                    quiet,
                )  # fmt: skip
            if config.target_reliability is None:
                break
            target = _target_now(out, config, n_runs, k)
            if target["stopped_because"] is not None:
                break
            if not quiet:
                predicted = target["runs_predicted"]
                status(
                    f"{target['message']}"
                    + (f" (about {predicted} runs predicted)" if predicted else "")
                    + f": adding repeat {n_runs // k + 1} (runs {n_runs} to {n_runs + k - 1})"
                )
            n_runs += k
    with output_errors(out):
        table = finish(pairs, groups, config, out, quiet=quiet)
    _say_summary(json.loads((out / "summary.json").read_text()))
    return table


def _say_summary(summary: dict) -> None:
    """summary.json's warnings (and an incomplete audit) as warnings; a reached target as a
    status line (one out of reach is among the warnings)."""
    for warning in summary.get("warnings", []):
        warnings.warn(warning["message"], RmlensWarning, stacklevel=3)
    message = incomplete_message(summary)
    if message:
        warnings.warn(message, RmlensWarning, stacklevel=3)
    target = summary.get("target_reliability") or {}
    if target.get("reached"):
        status(target["message"])


def _prepare(trainer: PairTrainer, pairs, groups: pd.Series, config: AuditConfig,
             estimator: str, quiet: bool):  # fmt: skip
    """``trainer.prepare``; with the paired estimator it also gets the groups, whose
    removal or addition each run's counterfactuals are of, and the exactness checks."""
    if estimator != "paired":
        return trainer.prepare(pairs, quiet=quiet)
    if not getattr(trainer, "counterfactuals", False):
        raise InputError(
            f"`estimator` paired: the trainer ({type(trainer).__name__}) gives no paired "
            "counterfactuals (the frozen logistic head does); use `estimator` brute"
        )
    return trainer.prepare(
        pairs, quiet=quiet, groups=groups.to_numpy(), check_exact=config.exact_checks(estimator)
    )


def _first_runs(config: AuditConfig, k: int) -> int:
    """The runs an audit starts from: ``runs``, rounded up to whole repeats of ``k`` runs with
    a target reliability (checked against ``max_runs``)."""
    if config.target_reliability is None:
        return config.runs
    first = whole_repeats(config.runs, k, up=True)
    cap = whole_repeats(config.max_runs, k, up=False)
    if first > cap:
        raise InputError(
            f"`max_runs` {config.max_runs} holds {cap // k} whole repeat(s) of {k} runs, fewer "
            f"than `runs` {config.runs} rounded up to whole repeats ({first} runs); raise "
            "`max_runs` or lower `runs`"
        )
    return first


def _write_plan(
    out: Path, record: dict, groups: pd.Series, n_runs: int, folds: int, config, note: str
) -> pd.DataFrame:
    """The plan of ``n_runs`` runs in plan.parquet, and ``n_runs`` in config.json.

    Both plan steps are seeded per repeat and per run, so the plan of more runs starts with
    the plan of fewer: a grown audit's finished runs keep their training groups.
    """
    try:
        plan = make_plan(groups, n_runs=n_runs, n_folds=folds, kind=config.plan, seed=config.seed)
    except ValueError as err:
        raise InputError(f"{err} ({note})") from err
    # validation groups for early stopping: carved from each run's own training groups
    share = config.val_fraction if config.validates else 0.0
    plan = carve_validation(plan, share, seed=config.seed)
    record["audit"]["runs"] = n_runs  # the real run count (a target grows it past --runs)
    with output_errors(out):
        write_json(record, out / "config.json")
        write_parquet(plan, out / "plan.parquet")
        for folder in (out, *(run_dir(out, r) for r in range(n_runs))):
            clean_stale(folder)  # a killed writer's temporary files (one audit per folder)
    return plan


def _target_now(out: Path, config: AuditConfig, n_runs: int, k: int) -> dict:
    """Whether the audit stops adding repeats (``target_status``), from the runs on disk."""
    m = load_matrices(out, n_runs)
    reliability = split_half(
        m.p, m.member, m.val, np.asarray(m.runs) // k, folds=k, p_cf=m.p_cf, seed=config.seed
    )
    return target_status(
        reliability,
        config.target_reliability,
        runs=n_runs,
        max_runs=config.max_runs,
        folds=k,
        missing=n_runs - len(m.runs),
    )


def membership_matrix(
    plan: pd.DataFrame, groups: pd.Series, runs: int, which: str = "in_train"
) -> np.ndarray:
    """(n_runs, n_pairs) bool: whether each run's plan puts each pair's group in training
    (``which="in_train"``) or in validation (``which="validation"``)."""
    n = len(plan) // runs
    column = plan.group.array
    blocks = len(plan) == n * runs and np.array_equal(
        plan.run.to_numpy(), np.repeat(np.arange(runs), n)
    )
    if blocks and all(bool((column[r * n : (r + 1) * n] == column[:n]).all()) for r in range(runs)):
        # make_plan's layout: every run lists the same groups in the same order, so only one
        # run's labels are hashed (not n_runs x n_groups strings)
        labels = pd.Index(column[:n])
        by_group = plan[which].to_numpy(bool).reshape(runs, n)
    else:
        labels = pd.Index(np.sort(plan.group.unique()))
        by_group = np.zeros((runs, len(labels)), dtype=bool)
        by_group[plan.run.to_numpy(), labels.get_indexer(plan.group)] = plan[which].to_numpy(bool)
    codes = labels.get_indexer(groups.astype(str))
    return by_group[:, codes] & (codes >= 0)


def _run_all(
    execute, trainer, pairs, groups, plan, kept, pending, config, n_runs, out, quiet
) -> None:
    member = membership_matrix(plan, groups, n_runs)
    val = membership_matrix(plan, groups, n_runs, "validation")
    _check_training_pairs(kept, member, val, pending, groups)
    ids = pairs.id.to_numpy()
    jobs = [RunJob(run, run_seed(config.seed, run)) for run in pending]

    def train_index(job: RunJob) -> tuple[np.ndarray, np.ndarray]:
        # the pairs the run trains on, and its validation pairs (its own training groups)
        return np.flatnonzero(kept & member[job.run]), np.flatnonzero(kept & val[job.run])

    failures: list[RunFailure] = []
    in_a_row = 0
    with (
        progress_bar("runs", total=len(pending), quiet=quiet) as advance,
        closing(execute(trainer, jobs, train_index)) as outcomes,
    ):
        for job, outcome in outcomes:
            advance(1)
            if isinstance(outcome, RunFailure):
                failures.append(outcome)
                in_a_row += 1
                warnings.warn(
                    f"run {job.run} failed {outcome.attempts} times ({outcome.error}); the "
                    "audit goes on without it", RmlensWarning, stacklevel=3,
                )  # fmt: skip
                everything = len(failures) == n_runs
                if in_a_row >= config.abort_after or everything:
                    why = "every run" if everything else f"{in_a_row} runs in a row"
                    warnings.warn(
                        f"{why} failed, so the failure looks systematic: stopping with run "
                        f"{job.run}'s error", RmlensWarning, stacklevel=3,
                    )  # fmt: skip
                    raise outcome.exception
                continue
            in_a_row = 0
            index, val_index = train_index(job)
            p = expit(np.asarray(outcome.r_chosen) - np.asarray(outcome.r_rejected))
            p = np.where(kept, p, np.nan)
            # membership: "in" = the RM took gradients on the pair; validation pairs are
            # neither in nor out (the estimators leave them out for this run)
            manifest = {
                "run": job.run,
                "seed": job.seed,
                "n_train": int(len(index)),
                "train_ids": ids[index].tolist(),
                "n_val": int(len(val_index)),
                "val_ids": ids[val_index].tolist(),
                "quality": run_quality(p, kept & member[job.run], kept & val[job.run]),
                "metrics": outcome.metrics,
            }
            if outcome.p_cf is not None:
                manifest["estimator"] = "paired"
            with output_errors(out):
                write_run(out, job.run, ids, kept, outcome, manifest)
    with output_errors(out):
        for failure in failures:
            write_error(out, failure)


def _check_training_pairs(kept: np.ndarray, member: np.ndarray, val: np.ndarray,
                          pending: list[int], groups: pd.Series) -> None:  # fmt: skip
    """Refuse a plan with a run that would train on no usable pair (``InputError``)."""
    trains = (kept & member[pending] & ~val[pending]).sum(axis=1)
    empty = [run for run, n in zip(pending, trains) if n == 0]
    if not empty:
        return
    dropped = int((~kept).sum())
    shown = ", ".join(map(str, empty[:5])) + (", ..." if len(empty) > 5 else "")
    raise InputError(
        f"{int(kept.sum())} usable pair(s) left of {len(kept)} ({dropped} dropped: chosen == "
        f"rejected after truncation), in {groups[kept].nunique()} of {groups.nunique()} "
        f"groups; {len(empty)} run(s) of the plan ({shown}) would train on none, and every "
        "run needs at least one: give more pairs, or more groups with usable pairs"
    )


def finish(
    pairs: pd.DataFrame, groups: pd.Series, config: AuditConfig, out: Path, *, quiet: bool = False
) -> pd.DataFrame:
    """Estimators, memorization table, map and summary from the finished runs on disk.

    Runs that are not finished (failed, or not run yet) are left out and listed in
    ``summary.json`` (``complete``, ``failed_runs``, ``pairs_lacking_runs``). The run count is
    the plan's (plan.parquet), which a target reliability grows past ``config.runs``; with a
    target, ``summary.json``'s ``target_reliability`` says whether it was reached and why the
    audit stopped.
    """
    out = Path(out)
    plan = pd.read_parquet(out / "plan.parquet")
    n_runs = plan_runs(out)
    config = config.replace(runs=n_runs)  # the real run count (coverage_warning reads it)
    m = load_matrices(out, n_runs)
    ids, finished = m.ids, m.runs
    # A run's validation pairs count neither in nor out for it: it took no gradients on
    # them, and its early stopping read them (as out-pairs they would bias TG upwards).
    p_cf = None if m.p_cf is None else np.where(m.val, np.nan, m.p_cf)
    table = memorization_scores(
        np.where(m.val, np.nan, m.p), m.member, p_cf=p_cf, n_boot=config.n_boot,
        seed=config.seed,
    )  # fmt: skip
    table.insert(0, "id", ids.to_numpy())
    records = [_run_record(out, r) for r in finished]
    checks = [r.pop("exactness") for r in records]  # the Newton step against refits
    quality = rm_quality(m.p, m.member, m.val, finished, records)
    record = json.loads((out / "config.json").read_text())
    folds = record.get("folds_used", config.folds)
    k = runs_per_repeat(config.plan, folds)
    reliability = split_half(
        m.p, m.member, m.val, np.asarray(finished) // k, folds=k, p_cf=m.p_cf, seed=config.seed
    )
    estimator = m.estimator
    damping = m.damping
    if damping is not None:
        damping["brute_check"] = brute_agreement(
            table.cm.to_numpy(), m, reliability, np.asarray(finished) // k, k, config.seed
        )
    del m, p_cf
    if same_partition(plan, k):
        reliability["note"] = (
            "every repeat of the plan draws the same partition of groups, so the halves "
            "differ only in seeds: the figure measures seed noise, not the plan's"
        )
    meta = pairs.assign(group=groups.to_numpy())
    for col in ("prompt", "chosen", "rejected"):
        meta[col] = meta[col].map(to_text)
    table = table.merge(meta, on="id", how="left")
    table["category"] = categorize(table, cm_threshold=config.cm_threshold)
    table["cm_significant"] = cm_significant(table)
    write_parquet(table, out / "memorization.parquet")
    plot_memorization_map(table, out / "memorization_map.png")
    summary = {
        "estimator": estimator,
        "estimator_note": record.get("estimator_note", "brute force: in-runs against out-runs"),
        "rm_quality": quality,
        "reliability": reliability,
    }
    exactness = exactness_summary(checks)
    if exactness is not None:
        summary["exactness"] = exactness
    if damping is not None:
        summary["damping"] = damping
    summary.update(summarize_audit(table, cm_threshold=config.cm_threshold))
    if estimator == "paired":
        summary["cm_significant"]["note"] = PAIRED_SIGNIFICANCE
    summary["n_runs_finished"] = len(finished)
    summary["n_runs_planned"] = n_runs
    missing = sorted(set(range(n_runs)) - set(finished))
    summary["complete"] = not missing
    summary["failed_runs"] = [
        {"run": r, "error": read_error(out, r) or "not finished"} for r in missing
    ]
    lacking = (table.n_in == 0) | (table.n_out == 0)
    summary["pairs_lacking_runs"] = {
        "count": int(lacking.sum()),
        "no_in_run": int((table.n_in == 0).sum()),
        "no_out_run": int((table.n_out == 0).sum()),
        "ids": table.id[lacking].head(100).tolist(),
    }
    dropped = sorted(set(pairs.id) - set(table.id))
    summary["dropped_truncation"] = {"count": len(dropped), "ids": dropped[:100]}
    summary["validation"] = validation_note(config, quality)
    summary["intervals"] = interval_note(table)
    warnings = audit_warnings(table, quality)
    warnings += reliability_warnings(reliability)
    warnings.append(budget_warning(summary["validation"], len(finished)))
    if estimator == "brute":  # paired: every run gives every pair an in- and an out-side
        warnings.append(coverage_warning(table, plan, config, folds))
    warnings.append(exactness_warning(exactness))
    warnings.append(damping_warning(damping))
    warnings.append(interval_warning(summary["intervals"], len(table)))
    if config.target_reliability is not None:
        status = target_status(
            reliability,
            config.target_reliability,
            runs=n_runs,
            max_runs=config.max_runs,
            folds=k,
            missing=len(missing),
        )
        summary["target_reliability"] = status
        if status["stopped_because"] in ("max_runs", "failed_runs"):
            warnings.append(
                {"code": "target_not_reached", "message": status["message"],
                 "runs_predicted": status["runs_predicted"]}
            )  # fmt: skip
    summary["warnings"] = [w for w in warnings if w is not None]
    write_json(summary, out / "summary.json")
    return table


def _run_record(out: Path, run: int) -> dict:
    """What a run's manifest says about its training: validation pairs, epochs, best epoch."""
    manifest = json.loads((run_dir(out, run) / "manifest.json").read_text())
    metrics = manifest.get("metrics") or {}
    record = {"n_val": int(manifest.get("n_val", 0))}
    record.update({k: metrics[k] for k in ("epochs", "best_epoch", "l2") if k in metrics})
    record["exactness"] = metrics.get("exactness")
    return record


def incomplete_message(summary: dict) -> str | None:
    """One line saying what an incomplete audit lacks, or None when it is complete."""
    if summary.get("complete", True):
        return None
    failed = summary["failed_runs"]
    runs = ", ".join(str(f["run"]) for f in failed)
    lacking = summary["pairs_lacking_runs"]["count"]
    return (
        f"incomplete audit: {len(failed)} of {summary['n_runs_planned']} runs failed "
        f"(runs {runs}; errors in runs/<run>/error.json); {lacking} of {summary['n_pairs']} "
        "pairs lack in- or out-runs and have NaN TM/TG/CM; the others use the finished runs. "
        "Start the same command again to retry the failed runs."
    )
