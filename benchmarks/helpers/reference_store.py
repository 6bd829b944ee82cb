"""Brute-force references kept in the repository, so that they survive restarts (issue 59).

A benchmark's reference is a brute-force audit grown over hours; its audit directory lives
in an ignored work folder. Each finished run is also committed, compactly, under
``benchmarks/references/<setting>/``::

    pairs.json          format, setting, the pair ids in order, the audit's settings
                        (its record less runs and growth), their fingerprint, precision, folds
    runs/<run:04d>.npz  run, seed; member and val: the run's training and validation pairs,
                        packed bits over the ids; margin: r_chosen - r_rejected as float32
                        (NaN: not scored); manifest: its quality, metrics and finishing time

Every file is written atomically (a temporary file beside it, then a rename), and a run is
written only whole and only once, so a killed export leaves at most a ``.*.tmp`` file, which
nothing reads. :func:`load_reference` gives the runs' matrices from these files alone;
:func:`restore_runs` writes them back as run folders of an audit directory, whose audit
then trains only the runs not committed; :func:`grow` does both around the audit, one
repeat of the plan per call, exporting after each.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

from rmlens._errors import InputError, RmlensWarning
from rmlens._io import json_sha1, strict_json, write_atomic, write_json
from rmlens._params import dict_changes
from rmlens.experiment import AuditDir
from rmlens.memorization import AuditConfig, audit
from rmlens.memorization._config import EXECUTION_FIELDS, GROWTH_FIELDS
from rmlens.memorization._directory import comparable, group_pairs, make_record
from rmlens.memorization._paired import choose_estimator, group_share
from rmlens.memorization._plans import runs_per_repeat
from rmlens.memorization._run_folders import RunMatrices, RunOutput, write_run
from rmlens.rewards import Trainer

FORMAT = 1
PAIRS = "pairs.json"
# with max_runs = runs, a target only lets a saved audit grow by whole repeats: without one,
# `runs` must equal the saved audit's (rmlens.memorization._directory.check_resume)
GROWTH_TARGET = 0.99
KEPT = ("audit", "group_by", "estimator", "precision", "data_sha1", "n_pairs", "n_groups",
        "folds_used", "version")  # fmt: skip


def audit_record(pairs: pd.DataFrame, config: AuditConfig) -> dict:
    """The record (config.json) that ``audit(pairs, config)`` writes, made without running it."""
    grouping = group_pairs(pairs, config)
    share = group_share(grouping.groups, config, grouping.folds)
    estimator, note, _ = choose_estimator(config, share)
    return make_record(pairs, config, grouping, estimator, note)


def settings_of(record: dict) -> dict:
    """What must match for runs to belong to one reference: the settings that make an audit's
    tables, ``runs`` aside (the audit's own resume check), and the data's fingerprint."""
    settings = comparable(json.loads(strict_json(record)), fixed=False)
    return {**settings, "data_sha1": record.get("data_sha1")}


def committed_runs(ref_dir: str | Path) -> dict[int, Path]:
    """The committed runs and their files, in run order (temporary files are not runs)."""
    found = Path(ref_dir).glob("runs/[0-9][0-9][0-9][0-9].npz")
    return dict(sorted((int(p.stem), p) for p in found))


def read_info(ref_dir: str | Path) -> dict:
    """The reference's ``pairs.json``."""
    path = Path(ref_dir) / PAIRS
    if not path.is_file():
        raise InputError(f"{ref_dir}: no {PAIRS} (no reference committed there)")
    info = json.loads(path.read_text())
    if info.get("format") != FORMAT:
        raise InputError(f"{path}: format {info.get('format')!r}, this code reads {FORMAT}")
    return info


def check_same(ref_dir: str | Path, info: dict, record: dict, where: str) -> None:
    """Refuse a record whose settings or data are not those of the committed runs, naming
    each setting that differs."""
    shown = _changes(info["record"], record, "committed", "now")
    if shown:
        raise InputError(
            f"{ref_dir}: the committed runs are of another audit than {where}: {shown}. Grow "
            "the reference with its committed settings, or commit these runs under another "
            "setting's folder"
        )


def _changes(then: dict, now: dict, then_word: str, now_word: str) -> str:
    """Each setting (``settings_of``) that differs between two records, in words (the
    first with which side is which)."""
    changes = dict_changes(settings_of(then), settings_of(now))
    return "; ".join(f"{name} {a!r} ({then_word}) vs {b!r} ({now_word})" if i == 0
                     else f"{name} {a!r} vs {b!r}"
                     for i, (name, a, b) in enumerate(changes))  # fmt: skip


def export_runs(audit_dir: str | Path, ref_dir: str | Path, *, ids: Iterable[str] | None = None,
                setting: str | None = None) -> list[int]:  # fmt: skip
    """Commit every finished run of the brute-force audit in ``audit_dir`` that ``ref_dir``
    lacks; the runs written.

    ``ids``: the audit's pairs in their order (default: the pairs its first finished run
    scored), kept in ``pairs.json`` with ``setting`` when the reference is new; a reference
    that exists is checked against the audit instead.
    """
    exp, ref_dir = AuditDir(audit_dir), Path(ref_dir)
    record = exp.read_record(required=True)
    if record.get("estimator", "brute") != "brute":
        raise InputError(f"{exp.path}: a {record['estimator']} audit; a reference is brute force")
    finished = [r for r in exp.run_numbers() if exp.run_done(r)]
    if not finished:
        return []
    info = _info_for(exp, ref_dir, record, finished[0], ids, setting)
    AuditDir(ref_dir).clean_stale(ref_dir / "runs")
    index, have = pd.Index(info["ids"]), committed_runs(ref_dir)
    written = []
    for run in finished:
        if run not in have:
            arrays = _run_arrays(exp, run, index)
            write_atomic(ref_dir / "runs" / f"{run:04d}.npz", lambda tmp, a=arrays: _savez(tmp, a))
            written.append(run)
    return written


def _info_for(exp: AuditDir, ref_dir: Path, record: dict, first: int,
              ids: Iterable[str] | None, setting: str | None) -> dict:  # fmt: skip
    """``pairs.json``, written when the reference is new, else checked against the audit."""
    if (ref_dir / PAIRS).exists():
        info = read_info(ref_dir)
        check_same(ref_dir, info, record, f"the audit at {exp.path}")
        if ids is not None and [str(i) for i in ids] != info["ids"]:
            raise InputError(f"{ref_dir}: the committed runs are of other pairs than {exp.path}")
        return info
    ids = [str(i) for i in (exp.read_scores(first, ["id"]).id if ids is None else ids)]
    kept = {k: record[k] for k in KEPT if k in record}
    skip = {"runs", *GROWTH_FIELDS, *EXECUTION_FIELDS}
    kept["audit"] = {k: v for k, v in record["audit"].items() if k not in skip}
    info = {"format": FORMAT, "setting": setting, "n_pairs": len(ids), "ids": ids,
            "fingerprint": json_sha1(settings_of(record), 16), "precision": record["precision"],
            "folds": record["folds_used"], "record": kept}  # fmt: skip
    write_json(info, ref_dir / PAIRS)
    return info


def _run_arrays(exp: AuditDir, run: int, index: pd.Index) -> dict[str, np.ndarray]:
    """One finished run as the arrays of its ``.npz`` file, rows in ``index``'s order."""
    scores, manifest = exp.read_scores(run, ["id", "r_chosen", "r_rejected"]), exp.manifest(run)
    rows = index.get_indexer(scores.id.astype(str))
    if (rows < 0).any():
        raise InputError(f"{exp.scores_path(run)}: scores pairs the reference does not list")
    margin = np.full(len(index), np.nan, dtype=np.float32)
    margin[rows] = scores.r_chosen.to_numpy(float) - scores.r_rejected.to_numpy(float)
    extra = {"quality": manifest.get("quality"), "metrics": manifest.get("metrics"),
             "finished_at": exp.run_dir(run).joinpath("manifest.json").stat().st_mtime}  # fmt: skip
    return {
        "run": np.int64(run),
        "seed": np.int64(manifest["seed"]),
        "member": np.packbits(index.isin([str(i) for i in manifest["train_ids"]])),
        "val": np.packbits(index.isin([str(i) for i in manifest.get("val_ids", [])])),
        "margin": margin,
        "manifest": np.array(strict_json(extra)),
    }


def _savez(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with path.open("wb") as f:  # a file, not a name: savez would append ".npz" to the name
        np.savez_compressed(f, **arrays)


def _read_run(path: Path, n: int) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return {
            "run": int(z["run"]),
            "seed": int(z["seed"]),
            "member": np.unpackbits(z["member"], count=n).astype(bool),
            "val": np.unpackbits(z["val"], count=n).astype(bool),
            "margin": z["margin"],
            "manifest": json.loads(str(z["manifest"])),
        }


def load_reference(ref_dir: str | Path) -> RunMatrices:
    """The committed runs as ``load_matrices`` gives an audit's: rows are the pairs some run
    scored, sorted by id; p = sigmoid(margin)."""
    info = read_info(ref_dir)
    ids = np.asarray(info["ids"], dtype=object)
    files = committed_runs(ref_dir)
    if not files:
        raise InputError(f"{ref_dir}: no committed runs")
    runs = [_read_run(path, len(ids)) for path in files.values()]
    margin = np.stack([r["margin"] for r in runs], axis=1)
    scored = np.isfinite(margin).any(axis=1)
    rows = np.flatnonzero(scored)[np.argsort(ids[scored], kind="stable")]
    member = np.stack([r["member"] for r in runs], axis=1)[rows]
    val = np.stack([r["val"] for r in runs], axis=1)[rows]
    p = expit(margin[rows].astype(np.float64))
    return RunMatrices(pd.Index(ids[rows]), list(files), p, member, val)


def seconds_per_run(ref_dir: str | Path) -> float:
    """Median seconds between consecutive committed runs' finishing times."""
    stamps = sorted(_read_run(p, 0)["manifest"]["finished_at"]
                    for p in committed_runs(ref_dir).values())  # fmt: skip
    return float(np.median(np.diff(stamps))) if len(stamps) > 2 else float("nan")


def restore_runs(ref_dir: str | Path, audit_dir: str | Path, *,
                 expect: dict | None = None) -> list[int]:  # fmt: skip
    """Write the committed runs that ``audit_dir`` has not finished as its run folders; the
    runs written.

    A restored run's scores hold its margin as ``r_chosen`` (``r_rejected`` 0) and it has no
    ``rm/``; its manifest keeps its finishing time as its mtime. The audit directory's own
    record, and ``expect`` (:func:`audit_record` of the audit about to resume), must have the
    committed settings: the audit then finds these runs finished and trains only the others.
    """
    info, exp = read_info(ref_dir), AuditDir(audit_dir)
    saved = exp.read_record()
    if saved is not None:
        check_same(ref_dir, info, saved, f"the audit at {exp.path}")
    if expect is not None:
        check_same(ref_dir, info, expect, "the audit asked for")
    exp.create()
    ids, restored = np.asarray(info["ids"], dtype=object), []
    for run, path in committed_runs(ref_dir).items():
        if not exp.run_done(run):
            _restore(exp, _read_run(path, len(ids)), ids, Path(ref_dir))
            restored.append(run)
    return restored


def _restore(exp: AuditDir, run: dict, ids: np.ndarray, ref_dir: Path) -> None:
    margin = run["margin"].astype(np.float64)
    extra = run["manifest"]
    manifest = {"run": run["run"], "seed": run["seed"], "n_train": int(run["member"].sum()),
                "train_ids": ids[run["member"]].tolist(), "n_val": int(run["val"].sum()),
                "val_ids": ids[run["val"]].tolist(), "quality": extra["quality"],
                "metrics": extra["metrics"], "restored_from": str(ref_dir)}  # fmt: skip
    output = RunOutput(margin, np.zeros_like(margin), extra["metrics"])
    write_run(exp, run["run"], ids, np.isfinite(margin), output, manifest)
    stamp = extra["finished_at"]  # so that seconds between manifests still time the runs
    os.utime(exp.run_dir(run["run"]) / "manifest.json", (stamp, stamp))


def grow(pairs: pd.DataFrame, config: AuditConfig, runs: int, *, work: str | Path,
         ref_dir: str | Path, setting: str | None = None, trainer: Trainer | None = None,
         quiet: bool = True) -> list[int]:  # fmt: skip
    """Grow the reference of ``audit(pairs, config)`` to ``runs`` runs (rounded up to whole
    repeats of the plan); the runs committed by this call.

    The committed runs are restored into the audit directory ``work`` first, and its
    finished runs not committed yet are committed; then the audit grows one repeat per call,
    and the runs it finished are committed after each call, and when it stops on an error or
    an interrupt.
    """
    record = audit_record(pairs, config)
    if Path(ref_dir, PAIRS).exists():
        restore_runs(ref_dir, work, expect=record)
    elif (saved := AuditDir(work).read_record()) is not None:
        _check_records(saved, record, Path(work))
    ids = group_pairs(pairs, config).audited(pairs).id
    committed = _commit(work, ref_dir, ids, setting)
    k = runs_per_repeat(config.plan, record["folds_used"])
    exp = AuditDir(work)
    done = {r for r in exp.run_numbers() if exp.run_done(r)}
    for n in range(k, -(-runs // k) * k + 1, k):
        if set(range(n - k, n)) <= done:
            continue
        grown = config.replace(runs=n, target_reliability=GROWTH_TARGET, max_runs=n)
        try:
            with warnings.catch_warnings():  # the target is a means to grow, not a goal
                warnings.filterwarnings("ignore", "target reliability", RmlensWarning)
                audit(pairs, grown, out=work, trainer=trainer, quiet=quiet)
        finally:
            committed += _commit(work, ref_dir, ids, setting)
    return committed


def _commit(work: str | Path, ref_dir: str | Path, ids: Iterable[str],
            setting: str | None) -> list[int]:  # fmt: skip
    """:func:`export_runs` once the audit has written its record (restored runs alone have
    none, and are committed already)."""
    if not AuditDir(work).has_record:
        return []
    return export_runs(work, ref_dir, ids=ids, setting=setting)


def _check_records(saved: dict, record: dict, work: Path) -> None:
    """Refuse a work audit of other settings before anything of it is committed."""
    shown = _changes(saved, record, "saved", "now")
    if shown:
        raise InputError(f"{work}: holds another audit: {shown}; use another work folder")
