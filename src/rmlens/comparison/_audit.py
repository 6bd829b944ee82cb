"""One audit's experiment directory, read once for the comparison: run scores and membership
as (n_pairs, n_runs) matrices over one sorted index of pair ids, and the memorization table
aligned to them.

An audit directory (DESIGN.md section 6) holds ``config.json``, ``plan.parquet``,
``runs/<run>/scores.parquet`` + ``manifest.json``, ``memorization.parquet`` and
``summary.json``. A folder that is no audit but holds audits one level down (a comparison
directory: one experiment directory per objective) stands for those audits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit, logit

from rmlens._errors import InputError
from rmlens.experiment import PLAN, RECORD, AuditDir, ExperimentDir
from rmlens.memorization import AuditConfig, load_matrices
from rmlens.rewards.objectives import BradleyTerry

NEEDED = (RECORD, PLAN, "memorization.parquet")
PAIR_COLUMNS = ("id", "tm", "tg", "cm", "prompt", "chosen", "rejected")


@dataclass
class Audit:
    """An audit's runs and tables, pairs in the order of ``ids``.

    Parameters
    ----------
    label : str
        The audit's name in the comparison.
    path : Path
        Its experiment directory.
    record : dict
        ``config.json``: ``audit`` (the resolved AuditConfig), ``group_by``, ``data_sha1``.
    summary : dict
        ``summary.json`` (empty when absent).
    ids : Index of shape (n_pairs,), sorted
        The pairs the runs scored.
    runs : list of int
        The finished runs (the matrices' columns).
    r_chosen, r_rejected : ndarray of shape (n_pairs, n_runs)
        Each run's rewards; NaN where the run did not score the pair.
    member, val : ndarray of shape (n_pairs, n_runs), bool
        Trained on (``train_ids``) and validation pairs (``val_ids``) of each run.
    cf_delta : ndarray of shape (n_pairs, n_runs) or None
        A paired audit: logit(p_cf) - logit(p), how much each pair's margin moves when its
        group is removed or added; None for brute force. A reference row keeps it, so its
        counterfactual margins move with its scores.
    table : DataFrame of n_pairs rows
        ``memorization.parquet``, in the order of ``ids``.
    reference : str or None, default=None
        What turned the audit's scores into a reference row (``"length calibration"``).
    """

    label: str
    path: Path
    record: dict
    summary: dict
    ids: pd.Index
    runs: list[int]
    r_chosen: np.ndarray
    r_rejected: np.ndarray
    member: np.ndarray
    val: np.ndarray
    table: pd.DataFrame
    reference: str | None = None
    cf_delta: np.ndarray | None = None

    def probabilities(self) -> tuple[np.ndarray, np.ndarray | None]:
        """p = sigmoid(r+ - r-) of every pair under every run, and the paired p_cf.

        Returns
        -------
        p : ndarray of shape (n_pairs, n_runs)
            NaN where the run did not score the pair.
        p_cf : ndarray of shape (n_pairs, n_runs) or None
            None for a brute-force audit. Both are what
            :func:`rmlens.memorization.memorization_scores` reads.
        """
        p_cf = None if self.cf_delta is None else expit(self.margins + self.cf_delta)
        return expit(self.margins), p_cf

    @property
    def margins(self) -> np.ndarray:
        """r+ - r- of every pair under every run, (n_pairs, n_runs); NaN where unscored."""
        return self.r_chosen - self.r_rejected

    @property
    def held_out(self) -> np.ndarray:
        """(n_pairs, n_runs) bool: the run scored the pair, never trained on it and did not
        read it for early stopping (what TG averages over)."""
        return ~self.member & ~self.val & np.isfinite(self.margins)

    @property
    def mode(self) -> str:
        """``"frozen"`` or ``"finetune"``, from the record (``frozen`` when it names none)."""
        return str((self.record.get("audit") or {}).get("mode", "frozen"))

    @property
    def objective(self) -> str:
        """The training objective (``head.objective`` frozen, ``train.objective`` finetune);
        ``bt`` where the config names none (audits made before objectives existed)."""
        cfg = self.record.get("audit") or {}
        part = cfg.get("train" if self.mode == "finetune" else "head") or {}
        return str(part.get("objective") or BradleyTerry.name)

    @property
    def group_by(self) -> str | None:
        """The audit's grouping column (None when the record has none)."""
        return self.record.get("group_by")

    @property
    def data_sha1(self) -> str | None:
        """The fingerprint of the audit's data."""
        return self.record.get("data_sha1")

    def describe(self) -> dict:
        """What the audit is, for compare.json and the page.

        Returns
        -------
        dict
            ``label, path, reference, model, mode, head, objective, plan, seed, runs,
            estimator, n_pairs, group_by, data_sha1``.
        """
        cfg = AuditConfig.upgrade(self.record.get("audit") or {})  # records before rm_kind too
        part = cfg.get("train" if self.mode == "finetune" else "head") or {}
        kind = part.get("rm_kind", "explicit") if self.mode == "finetune" else part.get("head")
        return {
            "label": self.label,
            "path": str(self.path),
            "reference": self.reference,
            "model": cfg.get("model"),
            "mode": self.mode,
            "head": kind,
            "objective": self.objective,
            "plan": cfg.get("plan"),
            "seed": cfg.get("seed"),
            "runs": len(self.runs),
            "estimator": "brute" if self.cf_delta is None else "paired",
            "n_pairs": len(self.ids),
            "group_by": self.group_by,
            "data_sha1": self.data_sha1,
        }

    def with_scores(self, r_chosen: np.ndarray, r_rejected: np.ndarray, *, label: str,
                    reference: str) -> Audit:  # fmt: skip
        """The same audit with other run scores (a reference row), same shape.

        Parameters
        ----------
        r_chosen, r_rejected : ndarray of shape (n_pairs, n_runs)
            The new rewards.
        label : str
            The reference row's label.
        reference : str
            What made the scores (``"length calibration"``).

        Returns
        -------
        Audit
            A copy with these scores.
        """
        assert r_chosen.shape == self.r_chosen.shape == r_rejected.shape
        return replace(self, r_chosen=r_chosen, r_rejected=r_rejected, label=label,
                       reference=reference)  # fmt: skip


def is_audit(path: Path) -> bool:
    return path.is_dir() and not ExperimentDir(path).missing(NEEDED)


def find_audits(dirs: list[str | Path]) -> list[Path]:
    """The audit directories named by ``dirs``, in order.

    A directory that is no audit but holds audits one level down (a comparison directory)
    stands for them, sorted by name. The same audit named twice is refused.
    """
    if not dirs:
        raise InputError("no audit directories given (DIR: an experiment directory of "
                         "`rmlens memorize`)")
    found: list[Path] = []
    for given in map(Path, dirs):
        if not given.is_dir():
            raise InputError(f"{given}: no such directory (expected an experiment directory "
                             "of `rmlens memorize`)")
        if is_audit(given):
            found.append(given)
            continue
        inside = sorted(p for p in given.iterdir() if is_audit(p))
        if not inside:
            missing = ", ".join(ExperimentDir(given).missing(NEEDED))
            raise InputError(f"{given}: not an audit directory (missing {missing}; run "
                             "`rmlens memorize --out` there) and none is inside it")
        found.extend(inside)
    seen: dict[Path, Path] = {}
    for path in found:
        key = path.resolve()
        if key in seen:
            raise InputError(f"{path}: the same audit is given twice (also as {seen[key]})")
        seen[key] = path
    return found


def default_labels(paths: list[Path]) -> list[str]:
    """Each directory's name; ``parent/name`` where names repeat; a number where that does."""
    labels = [p.resolve().name for p in paths]
    if len(set(labels)) < len(labels):
        labels = [f"{p.resolve().parent.name}/{p.resolve().name}" for p in paths]
    if len(set(labels)) < len(labels):
        labels = [f"{label} ({i + 1})" for i, label in enumerate(labels)]
    return labels


def load_audit(path: str | Path, label: str) -> Audit:
    """Read an audit directory (its finished runs) as an :class:`Audit`.

    Parameters
    ----------
    path : str or Path
        The experiment directory of ``rmlens memorize``.
    label : str
        The audit's name in the comparison.

    Returns
    -------
    Audit
        Its runs' scores and membership, and its tables; no finished run is an
        :class:`~rmlens.InputError`.
    """
    path = Path(path)
    exp = AuditDir(path)
    record = exp.read_record(required=True)
    summary = exp.read_json("summary.json", required=False, mapping=True) or {}
    matrices = load_matrices(path, exp.n_runs())  # InputError: no finished run
    ids, runs, member, val = matrices.ids, matrices.runs, matrices.member, matrices.val
    cf_delta = None
    if matrices.p_cf is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            cf_delta = logit(matrices.p_cf) - logit(matrices.p)
    r_c = np.full(member.shape, np.nan)
    r_r = np.full(member.shape, np.nan)
    for j, run in enumerate(runs):
        scores = exp.read_scores(run)
        rows = ids.get_indexer(scores["id"])
        ok = rows >= 0
        r_c[rows[ok], j] = scores["r_chosen"].to_numpy(float)[ok]
        r_r[rows[ok], j] = scores["r_rejected"].to_numpy(float)[ok]
    table = exp.read_table("memorization.parquet", needed=PAIR_COLUMNS)
    table = table.drop_duplicates("id").set_index("id").reindex(pd.Index(ids, name="id"))
    table = table.reset_index()
    return Audit(label=label, path=path, record=record, summary=summary, ids=ids,
                 runs=list(runs), r_chosen=r_c, r_rejected=r_r, member=member, val=val,
                 table=table, cf_delta=cf_delta)  # fmt: skip
