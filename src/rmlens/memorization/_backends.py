"""Where the training runs of an audit execute: this process (``LocalBackend``), or Ray
tasks (``RayBackend``, ``rmlens memorize --backend ray``).

A backend opens a session (where a Ray cluster is joined or started, so that a missing
resource shows before the slow preparation); the session's ``execute(trainer, jobs,
split)`` takes the prepared trainer and the runs to do (``split(job)`` gives the indices of the
pairs the run trains on and of its validation pairs), and yields each run as it ends,
either as a :class:`RunOutput` (written by the driver) or, once every attempt raised, as a
:class:`RunFailure`. A run that raises is tried again up to ``retries`` times. Bad input
(``InputError``) and interrupts are not run failures: they stop the audit at once.

Ray: the driver prepares the trainer once (a frozen backbone encodes every text here) and
ships it to the cluster once with ``ray.put``; each task trains one run's RM and returns its
scores, metrics and the saved RM's files, which the driver writes atomically. With no
address, a local Ray instance is started for the audit and shut down after it; an
already-initialized Ray (``ray.init`` called by the caller) is used as it is. On a cluster,
every node needs rmlens installed (``pip install 'rmlens[ray]'``).
"""

from __future__ import annotations

import logging
import os
import tempfile
import traceback
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rmlens._errors import InputError, RmlensWarning
from rmlens._io import write_bytes
from rmlens.memorization._config import AuditConfig
from rmlens.memorization._run_folders import RunFailure, RunOutput
from rmlens.progress import status
from rmlens.rewards import Trainer as PairTrainer


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


def import_ray():
    try:
        import ray
    except ImportError as err:
        raise InputError(
            f"`backend` ray: Ray is not installed ({err}); install it with "
            "pip install 'rmlens[ray]'"
        ) from None
    return ray


# Per worker process: the prepared trainer of the audit it serves, deserialized once
_PREPARED: dict[str, PairTrainer] = {}


def prepared_on_worker(held: list) -> PairTrainer:
    """The prepared trainer that ``held[0]`` refers to (a Ray object ref), deserialized by
    the first task a worker runs and reused by the next ones: a worker loads the base model
    and the tokenized pairs once, not once per run."""
    import ray

    ref = held[0]
    if not isinstance(ref, ray.ObjectRef):
        return ref
    key = ref.hex()
    if key not in _PREPARED:
        _PREPARED.clear()  # one audit at a time: the previous one's model goes
        _PREPARED[key] = ray.get(ref)
    return _PREPARED[key]


def fit_on_worker(held: list, split, seed: int):
    """The Ray task: one run's RM; its files come back as bytes, keyed by relative path.

    ``held``: ``[ref]``, the prepared trainer's object ref inside a list, so that Ray passes
    the ref and the worker deserializes it once (``prepared_on_worker``); ``split``: the
    indices of the pairs the run trains on and of its validation pairs.
    """
    trainer = prepared_on_worker(held)
    train_index, val_index = split
    result = trainer.fit_score(train_index, seed=seed, **fit_kwargs(val_index))
    files = None
    if hasattr(result.model, "save"):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "rm"
            result.model.save(root)
            files = {
                str(f.relative_to(root)): f.read_bytes() for f in root.rglob("*") if f.is_file()
            }
    paired = getattr(result, "p", None), getattr(result, "p_cf", None)
    return result.r_chosen, result.r_rejected, result.metrics, files, *paired


def _saver(files: dict[str, bytes] | None):
    if files is None:
        return None

    def save(folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            write_bytes(data, folder / name)

    return save


class RayBackend:
    """Runs as Ray tasks, each reserving ``cpus_per_run`` CPUs and ``gpus_per_run`` GPUs."""

    def __init__(self, config: AuditConfig):
        self.address = config.address
        self.cpus = config.cpus_per_run
        self.gpus = config.gpus_per_run
        self.retries = config.retries

    @contextmanager
    def session(self, *, quiet: bool = False):
        ray = import_ray()
        started = not ray.is_initialized()
        if started:
            level = logging.ERROR if quiet else logging.INFO
            if self.address:
                ray.init(address=self.address, log_to_driver=False, logging_level=level)
            else:
                ray.init(
                    num_cpus=os.cpu_count(),
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level=level,
                )
        try:
            self._check_resources(ray, local=started and not self.address)
            yield lambda trainer, jobs, train_index: self._execute(
                ray, trainer, jobs, train_index, quiet
            )
        finally:
            if started:
                ray.shutdown()

    def _check_resources(self, ray, *, local: bool) -> None:
        total = ray.cluster_resources()
        for name, param, want in (("CPU", "cpus_per_run", self.cpus),
                                  ("GPU", "gpus_per_run", self.gpus)):  # fmt: skip
            have = float(total.get(name, 0))
            if want > have:
                message = f"`{param}` {want:g}: the Ray cluster has {have:g} {name}s in all"
                if local:
                    raise InputError(message + "; no run could ever start")
                warnings.warn(f"{message}; runs wait until the cluster grows", RmlensWarning,
                              stacklevel=2)  # fmt: skip

    def _execute(
        self, ray, trainer: PairTrainer, jobs: list[RunJob], train_index: TrainIndex, quiet: bool
    ) -> Iterator[Outcome]:
        shipped = [ray.put(trainer)]  # once: every worker reads the same prepared trainer
        task = ray.remote(max_calls=0)(fit_on_worker).options(  # workers kept between runs
            num_cpus=self.cpus, num_gpus=self.gpus, max_retries=0, retry_exceptions=False
        )
        attempts = self.retries + 1
        inflight = {}
        for job in jobs:
            inflight[task.remote(shipped, train_index(job), job.seed)] = (job, 1)
        try:
            while inflight:
                ready, _ = ray.wait(list(inflight), num_returns=1)
                job, attempt = inflight.pop(ready[0])
                error = None
                try:
                    r_c, r_r, metrics, files, p, p_cf = ray.get(ready[0])
                except InputError as err:
                    raise (getattr(err, "cause", None) or err) from None
                except Exception as err:
                    error = err
                if error is None:
                    yield job, RunOutput(r_c, r_r, metrics, _saver(files), p, p_cf)
                elif attempt < attempts:
                    note_retry(job, attempt, attempts, error, quiet)
                    inflight[task.remote(shipped, train_index(job), job.seed)] = (job, attempt + 1)
                else:
                    tb = format_traceback(error)
                    yield job, RunFailure(job.run, attempts, describe(error), tb, error)
        finally:
            for ref in inflight:
                ray.cancel(ref, force=True)
