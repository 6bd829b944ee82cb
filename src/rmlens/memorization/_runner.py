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

import copy
import json
from contextlib import ExitStack
from pathlib import Path

import pandas as pd

from rmlens._base import resolve_config
from rmlens._io import jsonable
from rmlens.experiment import AuditDir
from rmlens.memorization._config import AuditConfig
from rmlens.memorization._directory import (
    Grouping,
    audit_precision,
    check_resume,
    group_pairs,
    make_record,
    output_errors,
    resolve_groups,
)
from rmlens.memorization._execute import Executor, default_trainer, run_seed
from rmlens.memorization._finish import finish
from rmlens.memorization._notes import say_growing, say_start, say_summary
from rmlens.memorization._paired import choose_estimator, group_share
from rmlens.memorization._plans import (
    build_plan,
    check_training_pairs,
    first_runs,
    membership_matrix,
    runs_per_repeat,
    start_runs,
    target_now,
    write_plan,
)
from rmlens.memorization._run_folders import load_runs
from rmlens.progress import status
from rmlens.rewards import Trainer as PairTrainer

FINISHED = ("memorization.parquet", "summary.json", "memorization_map.png")  # what finish writes

# the audit, and the steps that benchmarks and tests import from here
__all__ = [
    "audit",
    "default_trainer",
    "finish",
    "load_runs",
    "membership_matrix",
    "resolve_groups",
    "run_seed",
]


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
        config.head.bias_features)`` (``config.train`` in finetune mode). One row per given
        pair, as is a given trainer's own ``bias``: the rows of pairs ``dedupe`` drops
        are dropped from both.
    quiet : bool, default=False
        No progress bars or status lines.
    **overrides
        Fields of ``AuditConfig``, applied to ``config`` (``audit(pairs, runs=10)``).

    Returns
    -------
    The memorization table: ``id, tm, tg, cm, n_in, n_out`` and intervals, ``group``,
    ``category`` and every pair column, one row per audited pair (``dedupe`` pairs drops
    repeated ones; ``dedupe`` texts gives ``group`` the joined groups). Runs that failed
    for good are left out (see ``summary.json``), unless the failure looks systematic.

    Raises
    ------
    InputError
        Bad data or configuration, a full disk or an unwritable ``out``, Ray missing, a
        ``dedupe`` that leaves fewer than 2 groups.
    Exception
        A run's own error when ``config.abort_after`` runs failed in a row or every run
        failed.

    Examples
    --------
    >>> table = audit(load_pairs("prefs.jsonl"), runs=8, out="audit")  # doctest: +SKIP
    >>> table.sort_values("cm", ascending=False).head()  # doctest: +SKIP
    """
    config = _checked(resolve_config("audit", AuditConfig, config, overrides))
    exp = AuditDir("rmlens-audit" if out is None else out)
    grouping = group_pairs(pairs, config)
    k = runs_per_repeat(config.plan, grouping.folds)
    first = first_runs(config, k)
    estimator, estimator_note, warning = choose_estimator(
        config, group_share(grouping.groups, config, grouping.folds)
    )
    record = make_record(pairs, config, grouping, estimator, estimator_note)
    pairs, bias = grouping.audited(pairs), _rows(bias, grouping.kept)
    if trainer is not None and getattr(trainer, "bias", None) is not None:
        trainer.bias = _rows(trainer.bias, grouping.kept)  # built for the given pairs
    with output_errors(exp):
        saved = check_resume(exp, record)
    for key in ("format", "truncation"):  # what the finished runs were tokenized with
        if saved and key in saved:
            record[key] = saved[key]
    n_runs = start_runs(config, saved, first, k)
    if _nothing_to_do(exp, record, saved, n_runs, config):
        if not quiet:
            status(f"{exp.path}: every run is finished and the tables are up to date")
        say_summary(exp.read_json("summary.json"))
        return exp.read_table("memorization.parquet")
    say_start(pairs, grouping.groups, grouping.note, estimator_note, warning, quiet,
              audit_precision(config)[1])
    with ExitStack() as session:
        executor = Executor(exp, pairs, grouping.groups, config, estimator, session=session,
                            trainer=trainer, bias=bias, quiet=quiet)  # fmt: skip
        while True:
            run_plan(exp, record, grouping, n_runs, config, executor)
            if not _grows(exp, config, n_runs, k, quiet):
                break
            n_runs += k
    with output_errors(exp):
        table = finish(pairs, grouping.groups, config, exp, quiet=quiet)
    say_summary(exp.read_json("summary.json"))
    return table


def _nothing_to_do(exp: AuditDir, record: dict, saved: dict | None, n_runs: int,
                   config: AuditConfig) -> bool:  # fmt: skip
    """A finished audit started again with the same settings on the same data: every run
    done and the tables written after the last of them, so finishing again would rewrite
    the same files (an audit with a target reliability is always checked again)."""
    if saved is None or config.target_reliability is not None:
        return False
    expected = copy.deepcopy(record)
    expected["audit"]["runs"] = n_runs  # as write_plan records it
    if json.loads(json.dumps(jsonable(expected))) != saved:
        return False
    return len(exp.finished_runs(n_runs)) == n_runs and exp.outputs_current(FINISHED, n_runs)


def _rows(bias, kept):
    """The rows of ``bias`` (one per given pair) of the pairs ``dedupe`` kept."""
    if bias is None or kept is None or kept.all() or len(bias) != len(kept):
        return bias
    return bias[kept].reset_index(drop=True) if hasattr(bias, "iloc") else bias[kept]


def _checked(config: AuditConfig) -> AuditConfig:
    """``config`` checked; with the Ray backend, Ray imported before the slow preparation."""
    config.check()
    if config.backend == "ray":
        # lazy: Ray (optional, rmlens[ray]) loads only for the Ray backend
        from rmlens.memorization._backends import import_ray

        import_ray()
    return config


def run_plan(exp: AuditDir, record: dict, grouping: Grouping, n_runs: int,
             config: AuditConfig, executor: Executor) -> None:  # fmt: skip
    """Plan ``n_runs`` runs and train those not finished. A plan whose run would train on no
    usable pair is refused before its record and plan are written."""
    groups = grouping.groups
    plan = build_plan(groups, n_runs, grouping.folds, config, grouping.note)
    pending = [r for r in range(n_runs) if not exp.run_done(r)]
    if pending:
        member = membership_matrix(plan, groups, n_runs)
        val = membership_matrix(plan, groups, n_runs, "validation")
        check_training_pairs(executor.kept, member, val, pending, groups)
        record.update(executor.tokenization())  # format and truncation, in config.json
    with output_errors(exp):
        write_plan(exp, record, plan, n_runs)
    if pending:
        executor.run(member, val, pending, n_runs)


def _grows(exp: AuditDir, config: AuditConfig, n_runs: int, k: int, quiet: bool) -> bool:
    """Whether the audit adds a repeat towards its target reliability (saying so)."""
    if config.target_reliability is None:
        return False
    target = target_now(exp, config, n_runs, k)
    if target["stopped_because"] is not None:
        return False
    if not quiet:
        say_growing(target, n_runs, k)
    return True
