"""The Ray backend: one Ray task per training run (``rmlens memorize --backend ray``).

The driver prepares the trainer once (a frozen backbone encodes every text here) and ships
it to the cluster once with ``ray.put``; each task trains one run's RM and returns its
scores, metrics and the saved RM's files, which the driver writes atomically. With no
address, a local Ray instance is started for the audit and shut down after it; an
already-initialized Ray (``ray.init`` called by the caller) is used as it is. On a cluster,
every node needs rmlens installed (``pip install 'rmlens[ray]'``).
"""

from __future__ import annotations

import logging
import os
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rmlens._errors import InputError, RmlensWarning
from rmlens._io import write_bytes
from rmlens.memorization._backends import (
    Outcome,
    RunJob,
    TrainIndex,
    describe,
    fit_kwargs,
    format_traceback,
    note_retry,
)
from rmlens.memorization._config import AuditConfig
from rmlens.memorization._run_folders import RunFailure, RunOutput
from rmlens.rewards._trainer_base import Trainer as PairTrainer


def import_ray():
    try:
        import ray
    except ImportError as err:
        raise InputError(
            f"`backend` ray: Ray is not installed ({err}); install it with "
            "pip install 'rmlens[ray]'"
        ) from None
    return ray


def fit_on_worker(trainer: PairTrainer, split, seed: int):
    """The Ray task: one run's RM; its files come back as bytes, keyed by relative path.

    ``split``: the indices of the pairs the run trains on and of its validation pairs.
    """
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
        shipped = ray.put(trainer)  # once: every task reads the same prepared trainer
        task = ray.remote(fit_on_worker).options(
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
