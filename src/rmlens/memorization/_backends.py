"""Where the training runs of an audit execute: this process, or Ray tasks.

A backend opens a session (where a Ray cluster is joined or started, so that a missing
resource shows before the slow preparation); the session's ``execute(trainer, jobs,
split)`` takes the prepared trainer and the runs to do (``split(job)`` gives the indices of the
pairs the run trains on and of its validation pairs), and yields each run as it ends,
either as a :class:`RunOutput` (written by the driver) or, once every attempt raised, as a
:class:`RunFailure`. A run that raises is tried again up to ``retries`` times. Bad input
(``InputError``) and interrupts are not run failures: they stop the audit at once.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from rmlens._errors import InputError
from rmlens.memorization._config import AuditConfig
from rmlens.memorization._run_folders import RunFailure, RunOutput
from rmlens.progress import status
from rmlens.rewards._trainer_base import Trainer as PairTrainer


@dataclass
class RunJob:
    run: int
    seed: int


# (job) -> indices of the pairs the run trains on, and of its validation pairs
TrainIndex = Callable[[RunJob], tuple[np.ndarray, np.ndarray]]
Outcome = tuple[RunJob, "RunOutput | RunFailure"]


def fit_kwargs(val_index: np.ndarray) -> dict:
    """``val_index`` for ``fit_score`` when the run has validation pairs (a trainer that
    takes none need not accept the argument)."""
    return {"val_index": val_index} if len(val_index) else {}


def describe(err: BaseException) -> str:
    """``Type: first line of the message``, for warnings and error.json."""
    cause = getattr(err, "cause", None) or err  # a Ray task error wraps the run's exception
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def format_traceback(err: BaseException) -> str:
    return "".join(traceback.format_exception(type(err), err, err.__traceback__))


def note_retry(job: RunJob, attempt: int, attempts: int, err: BaseException, quiet: bool) -> None:
    if not quiet:
        status(f"run {job.run}: attempt {attempt} of {attempts} failed ({describe(err)}); "
               "trying again")  # fmt: skip


class LocalBackend:
    """Every run in this process, one after the other (the audit's default)."""

    def __init__(self, config: AuditConfig):
        self.retries = config.retries

    @contextmanager
    def session(self, *, quiet: bool = False):
        yield lambda trainer, jobs, train_index: self._execute(trainer, jobs, train_index, quiet)

    def _execute(
        self, trainer: PairTrainer, jobs: list[RunJob], train_index: TrainIndex, quiet: bool
    ) -> Iterator[Outcome]:
        attempts = self.retries + 1
        for job in jobs:
            index, val_index = train_index(job)
            for attempt in range(1, attempts + 1):
                error = None
                try:
                    result = trainer.fit_score(index, seed=job.seed, **fit_kwargs(val_index))
                except InputError:
                    raise
                except Exception as err:
                    error = err
                if error is None:
                    save = getattr(result.model, "save", None)
                    yield job, RunOutput(
                        result.r_chosen, result.r_rejected, result.metrics, save,
                        getattr(result, "p", None), getattr(result, "p_cf", None),
                    )  # fmt: skip
                    break
                if attempt < attempts:
                    note_retry(job, attempt, attempts, error, quiet)
                    continue
                tb = format_traceback(error)
                yield job, RunFailure(job.run, attempts, describe(error), tb, error)
