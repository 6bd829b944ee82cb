"""Executing an audit's runs: the trainer, its backend session, and each run written as it
ends (``runs/<run>/``: scores, rm/, then manifest.json; error.json for a run that failed for
good). Every file is written by this process (the driver), whichever backend trains."""

from __future__ import annotations

import warnings
from contextlib import ExitStack, closing

import numpy as np
import pandas as pd
from scipy.special import expit

from rmlens._errors import InputError, RmlensWarning
from rmlens.experiment import AuditDir
from rmlens.memorization._backends import LocalBackend, RayBackend, RunJob
from rmlens.memorization._config import AuditConfig
from rmlens.memorization._directory import output_errors
from rmlens.memorization._notes import run_failed, systematic_failure
from rmlens.memorization._quality import run_quality
from rmlens.memorization._run_folders import RunFailure, RunOutput, write_run
from rmlens.progress import progress_bar
from rmlens.rewards import FrozenHeadTrainer, make_trainer
from rmlens.rewards import Trainer as PairTrainer

STACK = 5  # warnings point at audit()'s caller: audit > run_plan > run > _give_up_or_go_on


def make_backend(config: AuditConfig):
    """The backend that ``config.backend`` names."""
    return RayBackend(config) if config.backend == "ray" else LocalBackend(config)


def run_seed(seed: int, run: int) -> int:
    return int(np.random.SeedSequence([seed, run]).generate_state(1)[0] % 2**31)


def default_trainer(config: AuditConfig, bias=None) -> PairTrainer:
    """The trainer an audit runs: frozen features with one head per run, or a fine-tuned RM
    per run (``config.mode``).

    Parameters
    ----------
    config : AuditConfig
        The audit's settings (its shared settings, model and precision among them, are
        resolved first).
    bias : ndarray or None, default=None
        The pairs' shortcut feature differences, for the ``poe`` and ``reweight``
        objectives.

    Returns
    -------
    Trainer
    """
    config = config.resolved()  # the audit's shared settings, said once
    if config.mode == "finetune":
        return make_trainer(config.train, bias=bias)
    return FrozenHeadTrainer(
        config.head,
        model=config.model,
        max_length=config.max_length,
        format=config.format,
        precision=config.precision,
        batch_size=config.encode_batch_size,
        bias=bias,
    )


def prepare_trainer(trainer: PairTrainer, pairs, groups: pd.Series, config: AuditConfig,
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


class Executor:
    """Trains an audit's pending runs and writes each one as it ends.

    The trainer (``trainer``, else :func:`default_trainer`), the backend session (entered on
    ``session``) and the usable-pair mask are made once, when a run first needs them.
    """

    def __init__(self, exp: AuditDir, pairs: pd.DataFrame, groups: pd.Series,
                 config: AuditConfig, estimator: str, *, session: ExitStack,
                 trainer: PairTrainer | None = None, bias=None, quiet: bool = False):  # fmt: skip
        self.exp, self.pairs, self.groups = exp, pairs, groups
        self.config, self.estimator, self.quiet = config, estimator, quiet
        self.session, self.trainer, self.bias = session, trainer, bias
        self.execute = self._kept = None

    @property
    def kept(self) -> np.ndarray:
        """(n_pairs,) bool: the pairs the trainer can use (``prepare``; done once)."""
        if self.execute is None:
            self.trainer = self.trainer or default_trainer(self.config, self.bias)
            backend = make_backend(self.config)
            self.execute = self.session.enter_context(backend.session(quiet=self.quiet))
            self._kept = np.asarray(prepare_trainer(
                self.trainer, self.pairs, self.groups, self.config, self.estimator, self.quiet
            ), dtype=bool)  # fmt: skip
        return self._kept

    def tokenization(self) -> dict:
        """How the prepared trainer tokenized the pairs, for config.json: ``format`` (chat,
        raw or pair) and ``truncation`` (what ``max_length`` cut); empty for a trainer that
        does not say."""
        self.kept  # noqa: B018 (prepares the trainer once)
        found = {key: getattr(self.trainer, f"{key}_", None) for key in ("format", "truncation")}
        return {k: v for k, v in found.items() if v is not None}

    def run(self, member: np.ndarray, val: np.ndarray, pending: list[int], n_runs: int) -> None:
        """Train runs ``pending`` of a plan of ``n_runs`` (``member``/``val``: its training
        and validation masks, (n_runs, n_pairs)); a run that failed for good gets its
        error.json, and too many failures raise the run's own error."""
        kept = self.kept
        jobs = [RunJob(run, run_seed(self.config.seed, run)) for run in pending]

        def train_index(job: RunJob) -> tuple[np.ndarray, np.ndarray]:
            # the pairs the run trains on, and its validation pairs (its own training groups)
            return np.flatnonzero(kept & member[job.run]), np.flatnonzero(kept & val[job.run])

        failures: list[RunFailure] = []
        in_a_row = 0
        with (
            progress_bar(f"runs of {self.exp.path}", total=len(pending),
                         quiet=self.quiet) as advance,  # fmt: skip
            closing(self.execute(self.trainer, jobs, train_index)) as outcomes,
        ):
            for job, outcome in outcomes:
                advance(1)
                if isinstance(outcome, RunFailure):
                    failures.append(outcome)
                    in_a_row += 1
                    self._give_up_or_go_on(outcome, in_a_row, len(failures) == n_runs)
                    continue
                in_a_row = 0
                self._write(job, outcome, member, val, train_index(job))
        with output_errors(self.exp):
            for failure in failures:
                self.exp.write_error(failure.run, failure.record())

    def _give_up_or_go_on(self, failure: RunFailure, in_a_row: int, everything: bool) -> None:
        """Warn of ``failure``; raise its error when the failures look systematic
        (``abort_after`` in a row, or every run of the plan)."""
        warnings.warn(run_failed(failure), RmlensWarning, stacklevel=STACK)
        if in_a_row >= self.config.abort_after or everything:
            warnings.warn(systematic_failure(failure, in_a_row, everything), RmlensWarning,
                          stacklevel=STACK)  # fmt: skip
            raise failure.exception

    def _write(self, job: RunJob, outcome: RunOutput, member: np.ndarray, val: np.ndarray,
               index: tuple[np.ndarray, np.ndarray]) -> None:  # fmt: skip
        """The run's scores, RM and manifest (``write_run``)."""
        kept, ids = self.kept, self.pairs.id.to_numpy()
        train, validation = index
        p = expit(np.asarray(outcome.r_chosen) - np.asarray(outcome.r_rejected))
        p = np.where(kept, p, np.nan)
        # membership: "in" = the RM took gradients on the pair; validation pairs are
        # neither in nor out (the estimators leave them out for this run)
        manifest = {
            "run": job.run,
            "seed": job.seed,
            "n_train": int(len(train)),
            "train_ids": ids[train].tolist(),
            "n_val": int(len(validation)),
            "val_ids": ids[validation].tolist(),
            "quality": run_quality(p, kept & member[job.run], kept & val[job.run]),
            "metrics": outcome.metrics,
        }
        if outcome.p_cf is not None:
            manifest["estimator"] = "paired"
        with output_errors(self.exp):
            write_run(self.exp, job.run, ids, kept, outcome, manifest)
