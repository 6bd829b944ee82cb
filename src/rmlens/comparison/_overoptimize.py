"""``overoptimize``: best-of-n against a known gold reward, for every run of every audit.

Every audit's runs score each candidate of the pool (each unique text encoded once, through
the embedding cache, then one head product per run); ``_bon_curves`` turns the scores into
gold and proxy curves against KL_bon, for each audit's single RMs and its ensembles, with
the oracle as the ceiling; ``_hacking`` lines the curves up with the audits' own figures.

OUT/ gets ``overoptimization.parquet`` (one row per RM and n), ``overoptimization_runs.parquet``
(one row per audit, run and n), ``overoptimization.json`` (the settings, each RM's summary
figures, the audit figures and their correlations with hacking) and
``overoptimization*.png``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rmlens._base import needed_out, resolve_config
from rmlens._errors import InputError
from rmlens._io import jsonable, write_json, write_parquet
from rmlens.comparison._audit import default_labels, find_audits, load_audit
from rmlens.comparison._bon_curves import (
    Curves,
    PoolCurves,
    default_ns,
    run_summaries,
    standardize,
    summarize,
)
from rmlens.comparison._config import OveroptimizeConfig
from rmlens.comparison._hacking import audit_figures, check_same_world, correlations
from rmlens.comparison._overoptimize_plots import plot_overoptimization
from rmlens.data import load_candidates
from rmlens.progress import status
from rmlens.rewards import resolve_device
from rmlens.stats import percentile_interval

ORACLE = "oracle"
PLOTS = ("overoptimization.png", "overoptimization_ensembles.png", "overoptimization_hacking.png")
SHARES = {  # pool column -> (value name, indicator of the shortcut)
    "signature": ("signature", lambda s: s.astype(bool)),
    "padding": ("padded", lambda s: pd.to_numeric(s, errors="coerce").fillna(0) > 0),
    "taste": ("taste", lambda s: s.fillna("").astype(str).str.strip() != ""),
}


@dataclass
class Pool:
    """A candidate pool as arrays: P prompts x N candidates, in file order."""

    path: str
    frame: pd.DataFrame  # P * N rows, grouped by prompt
    prompt_ids: list[str]
    values: np.ndarray  # (k, P, N)
    names: tuple[str, ...]  # "gold", "words", then the shortcut shares the pool records

    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape[1], self.values.shape[2]


def read_pool(candidates) -> Pool:
    """Load and check a pool (``rmlens.data.load_candidates``) and lay it out as arrays."""
    frame = load_candidates(candidates)
    order = pd.unique(frame["prompt_id"])
    rank = pd.Series(np.arange(len(order)), index=order)
    frame = frame.iloc[np.argsort(rank[frame["prompt_id"]].to_numpy(), kind="stable")]
    frame = frame.reset_index(drop=True)
    n_prompts = len(order)
    words = frame["response"].map(lambda t: len(str(t).split())).to_numpy(float)
    columns = {"gold": frame["gold"].to_numpy(float), "words": words}
    for column, (name, indicator) in SHARES.items():
        if column in frame:
            columns[name] = indicator(frame[column]).to_numpy(float)
    values = np.stack([v.reshape(n_prompts, -1) for v in columns.values()])
    name = str(candidates) if isinstance(candidates, (str, Path)) else "<candidates>"
    return Pool(name, frame, list(map(str, order)), values, tuple(columns))


def score_pool(path: Path, pool: Pool, device: str, features: dict,
               quiet: bool) -> tuple[list[int], np.ndarray]:  # fmt: skip
    """The finished runs of an audit and their rewards of every candidate, (R, P, N).

    Runs that are heads on one frozen backbone read the pool's features from ``features``
    (filled once per backbone, so audits on the same backbone encode nothing more)."""
    # lazy: torch, transformers load only when this runs
    from rmlens.hub import load_rm, member_scores

    rm = load_rm(path, device=device)
    scores = member_scores(rm, list(pool.frame["prompt"]), list(pool.frame["response"]),
                           quiet=quiet, features=features)  # fmt: skip
    if not np.isfinite(scores).all():
        bad = int((~np.isfinite(scores)).any(axis=1).sum())
        raise InputError(f"{path}: {bad} run RM(s) gave non-finite rewards on the pool")
    return [int(name) for name in rm.names], scores.reshape(len(scores), *pool.shape)


@dataclass
class Overoptimization:
    """What :func:`overoptimize` found (and wrote).

    Parameters
    ----------
    curves : DataFrame
        ``rm, audit, kind, n, kl, gold, lo, hi, proxy, proxy_lo, proxy_hi, words, ...``:
        one row per RM and n (``overoptimization.parquet``). ``kind`` is ``runs`` (the mean
        of an audit's single-run RMs), ``ensemble`` or ``oracle`` (best-of-n by gold;
        ``rm`` is ``oracle``). ``lo``/``hi`` bound ``gold``; every value has its own
        ``_lo``/``_hi``. ``proxy`` is the picking RM's reward standardized over the pool.
    runs : DataFrame
        ``audit, run, n, kl, gold, proxy, words, ...``: each single run's curves.
    summary : DataFrame
        One row per RM: ``gold_at_max_n``, ``peak_n``, ``gold_peak``, ``gold_drop``,
        ``oracle_gap_area``, ``spearman`` (within-prompt proxy-gold), with intervals.
    hacking : dict
        The audits' own figures per audit and per run, and their Spearman correlations
        with the hacking figures across runs and across audits.
    notes : list of str
        What the run noted, in words.
    out : Path or None
        The output directory (None when nothing was written).
    files : list of str
        The files written into ``out``.
    """

    curves: pd.DataFrame
    runs: pd.DataFrame
    summary: pd.DataFrame
    hacking: dict
    notes: list[str] = field(default_factory=list)
    out: Path | None = None
    files: list[str] = field(default_factory=list)


def _rows(rm: str, audit: str, kind: str, curves: Curves, ns, kl, level: float) -> list[dict]:
    rows = []
    for k, n in enumerate(ns):
        row = {"rm": rm, "audit": audit, "kind": kind, "n": int(n), "kl": float(kl[k])}
        for v, name in enumerate(curves.values):
            row[name] = float(curves.curve[v, k])
            lo, hi = (percentile_interval(curves.draws[:, v, k], level)
                      if curves.draws is not None else (np.nan, np.nan))  # fmt: skip
            row[f"{name}_lo"], row[f"{name}_hi"] = lo, hi
        row["lo"], row["hi"] = row["gold_lo"], row["gold_hi"]
        rows.append(row)
    return rows


def _run_rows(audit: str, runs: list[int], single: Curves, ns, kl) -> list[dict]:
    """``overoptimization_runs.parquet``'s rows of one audit: each run's curves."""
    return [{"audit": audit, "run": run, "n": n, "kl": kl[k],
             **{v: single.per_run[r, i, k] for i, v in enumerate(single.values)}}
            for r, run in enumerate(runs) for k, n in enumerate(ns)]  # fmt: skip


def overoptimize(
    dirs: Sequence[str | Path],
    candidates,
    config: OveroptimizeConfig | None = None,
    *,
    out: str | Path | None = None,
    quiet: bool = False,
    **overrides,
) -> Overoptimization:
    """Best-of-n curves of every audit's RMs on a candidate pool with a gold reward.

    Parameters
    ----------
    dirs : list of path
        Experiment directories of ``rmlens memorize`` whose runs saved their RMs; a folder
        holding audits one level down (a comparison directory) stands for them.
    candidates : path or DataFrame
        The pool: ``prompt_id``, ``prompt``, ``response``, ``gold`` per candidate
        (``rmlens data candidates`` writes one; see ``rmlens.data.load_candidates``).
    config : OveroptimizeConfig, optional
        The settings (default ``OveroptimizeConfig()``).
    out : str or Path
        Folder for ``overoptimization.*`` (created; may be the comparison directory).
    quiet : bool, default=False
        No progress bars or status lines.
    **overrides
        Fields of ``OveroptimizeConfig``, applied to ``config``.

    Returns
    -------
    Overoptimization

    Raises
    ------
    InputError
        A pool without ``gold`` (or otherwise malformed), an audit on other data than the
        pool, an audit without saved RMs, labels that do not match, an ``n`` above N.

    Examples
    --------
    >>> from rmlens.comparison import overoptimize
    >>> found = overoptimize(["cmp"], "pool.jsonl", out="cmp")  # doctest: +SKIP
    >>> found.summary[["rm", "gold_at_max_n", "gold_drop"]]  # doctest: +SKIP
    """
    config = resolve_config("overoptimize", OveroptimizeConfig, config, overrides).check()
    out = Path(needed_out("overoptimize", out))
    pool = read_pool(candidates)
    n_prompts, n_candidates = pool.shape
    ns = config.ns or default_ns(n_candidates)
    if max(ns) > n_candidates:
        raise InputError(f"`ns`: best-of-{max(ns)} needs N >= {max(ns)} candidates per prompt; "
                         f"{pool.path} has {n_candidates}")  # fmt: skip
    ns = tuple(sorted(set(ns)))
    paths = find_audits(list(dirs))
    labels = list(config.labels) or default_labels(paths)
    if len(labels) != len(paths):
        raise InputError(f"`labels`: {len(labels)} names for {len(paths)} audits "
                         f"({', '.join(map(str, paths))})")  # fmt: skip
    audits = [load_audit(p, label) for p, label in zip(paths, labels)]
    notes = [note for a in audits for note in check_same_world(a, pool)]
    device = resolve_device(config.device)
    bon = PoolCurves(pool.values, pool.names, ns, n_boot=config.n_boot, seed=config.seed)
    oracle = bon.oracle()
    rows = _rows(ORACLE, "", ORACLE, oracle, ns, bon.kl, config.level)
    summary = [{"rm": ORACLE, "audit": "", "kind": ORACLE,
                **summarize(oracle, oracle, bon.kl, ns, config.level)}]  # fmt: skip
    run_rows, per_run, features = [], {}, {}
    for audit in audits:
        status(f"{audit.label}: scoring {n_prompts} x {n_candidates} candidates")
        runs, scores = score_pool(audit.path, pool, device, features, quiet)
        z = standardize(scores)
        single = bon.runs(z)
        rows += _rows(audit.label, audit.label, "runs", single, ns, bon.kl, config.level)
        summary.append({"rm": audit.label, "audit": audit.label, "kind": "runs",
                        **summarize(single, oracle, bon.kl, ns, config.level)})  # fmt: skip
        per_run[audit.label] = dict(zip(runs, run_summaries(single, oracle, bon.kl, ns)))
        run_rows += _run_rows(audit.label, runs, single, ns, bon.kl)
        for kind in config.ensembles:
            name = f"{audit.label} ensemble {kind}"
            curves = bon.ensemble(z, kind, config.uwo_lambda)
            rows += _rows(name, audit.label, "ensemble", curves, ns, bon.kl, config.level)
            summary.append({"rm": name, "audit": audit.label, "kind": "ensemble",
                            "ensemble": kind,
                            **summarize(curves, oracle, bon.kl, ns, config.level)})  # fmt: skip
    by_audit = {row["audit"]: row for row in summary if row["kind"] == "runs"}
    hacking = correlations(audit_figures(audits), per_run, by_audit)
    found = Overoptimization(pd.DataFrame(rows), pd.DataFrame(run_rows),
                             pd.DataFrame(summary), hacking, notes, out)  # fmt: skip
    record = {"settings": config.to_dict(), "candidates": pool.path, "prompts": n_prompts,
              "candidates_per_prompt": n_candidates, "ns": list(ns),
              "values": list(pool.names), "audits": [a.describe() for a in audits]}  # fmt: skip
    found.files = _write(found, record)
    return found


def _write(found: Overoptimization, record: dict) -> list[str]:
    out = found.out
    out.mkdir(parents=True, exist_ok=True)
    write_parquet(found.curves, out / "overoptimization.parquet")
    write_parquet(found.runs, out / "overoptimization_runs.parquet")
    summary = found.summary.replace({np.nan: None}).to_dict("records")
    write_json(jsonable({**record, "summary": summary, "hacking": found.hacking,
                         "notes": found.notes}), out / "overoptimization.json")  # fmt: skip
    files = ["overoptimization.parquet", "overoptimization_runs.parquet",
             "overoptimization.json"]  # fmt: skip
    plots = plot_overoptimization(found, out)
    for stale in PLOTS:  # an earlier call's plot that this one did not draw
        if stale not in plots:
            (out / stale).unlink(missing_ok=True)
    files += plots
    status(f"results in {out}/ ({', '.join(files)})")
    return files
