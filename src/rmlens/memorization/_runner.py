"""The audit: plan, one RM per run, estimators, map and summary, in an experiment directory.

DIR/config.json, plan.parquet, runs/<run>/scores.parquet + manifest.json, memorization.parquet,
memorization_map.png, summary.json (DESIGN.md section 6). Every file is written atomically; a
run is finished when its manifest exists (written after its scores), so starting the audit
again on the same directory redoes only unfinished runs.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

import rmlens
from rmlens._errors import InputError
from rmlens._io import write_json, write_parquet
from rmlens.data import to_text
from rmlens.memorization._config import AuditConfig
from rmlens.memorization._estimate import estimate
from rmlens.memorization._map import plot_memorization_map
from rmlens.memorization._plan import make_plan
from rmlens.memorization._summary import categorize, summarize_audit
from rmlens.progress import progress_bar, stderr
from rmlens.rewards import FrozenHeadTrainer, PairTrainer


def resolve_groups(pairs: pd.DataFrame, group_by: str | None) -> tuple[pd.Series, str, str]:
    """Group label of every pair, the column used, and a note saying how groups were chosen."""
    if group_by is not None:
        if group_by not in pairs:
            raise InputError(
                f"--group-by: no column '{group_by}' in the data (columns: {', '.join(pairs)})"
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


def data_fingerprint(pairs: pd.DataFrame) -> str:
    digest = hashlib.sha1()
    for row in zip(pairs.id, pairs.prompt, pairs.chosen, pairs.rejected):
        digest.update("\x1f".join(to_text(x) for x in row).encode())
    return digest.hexdigest()[:16]


def _prepare_dir(out: Path, record: dict) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"--out {out}: cannot create the directory ({err.strerror})") from err
    config_path = out / "config.json"
    if config_path.exists():
        old = json.loads(config_path.read_text())
        keys = ("audit", "data_sha1", "group_by")
        if any(old.get(k) != record[k] for k in keys):
            raise InputError(
                f"--out {out}: holds an audit with another configuration or data; "
                "use a new directory or delete this one"
            )
    write_json(record, config_path)


def run_done(run_dir: Path) -> bool:
    manifest = run_dir / "manifest.json"
    if not manifest.exists() or not (run_dir / "scores.parquet").exists():
        return False
    try:
        return "train_ids" in json.loads(manifest.read_text())
    except json.JSONDecodeError:
        return False


def run_seed(seed: int, run: int) -> int:
    return int(np.random.SeedSequence([seed, run]).generate_state(1)[0] % 2**31)


def audit(
    pairs: pd.DataFrame,
    config: AuditConfig | None = None,
    out: str | Path = "rmlens-audit",
    *,
    trainer: PairTrainer | None = None,
    quiet: bool = False,
) -> pd.DataFrame:
    """Run a counterfactual memorization audit and write the experiment directory.

    Parameters
    ----------
    pairs : DataFrame
        The canonical pair table (``rmlens.data.load_pairs``).
    config : AuditConfig, optional
    out : path
        Experiment directory; an unfinished audit there is resumed.
    trainer : PairTrainer, optional
        Defaults to a frozen backbone with one head per run (``FrozenHeadTrainer``).

    Returns
    -------
    The memorization table: ``id, tm, tg, cm, n_in, n_out`` and intervals, ``group``,
    ``category`` and every pair column.
    """
    config = config or AuditConfig()
    config.check()
    out = Path(out)
    groups, group_col, note = resolve_groups(pairs, config.group_by)
    folds = config.folds
    if config.plan == "kfold" and 2 <= groups.nunique() < folds:
        folds = int(groups.nunique())
        note += f"; only {folds} groups, so {folds} folds (leave one group out)"
    record = {
        "version": rmlens.__version__,
        "audit": config.to_dict(),
        "data_sha1": data_fingerprint(pairs),
        "n_pairs": len(pairs),
        "group_by": group_col,
        "group_note": note,
        "n_groups": int(groups.nunique()),
        "folds_used": folds,
    }
    _prepare_dir(out, record)
    if not quiet:
        stderr.print(f"{len(pairs)} pairs, {groups.nunique()} groups: {note}")
    try:
        plan = make_plan(
            groups, n_runs=config.runs, n_folds=folds, kind=config.plan, seed=config.seed
        )
    except ValueError as err:
        raise InputError(f"{err} ({note})") from err
    write_parquet(plan, out / "plan.parquet")

    pending = [r for r in range(config.runs) if not run_done(out / "runs" / f"{r:03d}")]
    if pending:
        trainer = trainer or FrozenHeadTrainer(
            model=config.model,
            head=config.head,
            max_length=config.max_length,
            batch_size=config.batch_size,
        )
        kept = np.asarray(trainer.prepare(pairs, quiet=quiet), dtype=bool)
        with progress_bar("runs", total=len(pending), quiet=quiet) as advance:
            for run in pending:
                _train_run(trainer, pairs, groups, plan, kept, run, config.seed, out)
                advance(1)
    return finish(pairs, groups, config, out, quiet=quiet)


def _train_run(trainer, pairs, groups, plan, kept, run: int, seed: int, out: Path) -> None:
    in_groups = plan.group[(plan.run == run) & plan.in_train]
    train_index = np.flatnonzero(kept & groups.isin(set(in_groups)).to_numpy())
    result = trainer.fit_score(train_index, seed=run_seed(seed, run))
    run_dir = out / "runs" / f"{run:03d}"
    scores = pd.DataFrame(
        {"id": pairs.id.to_numpy(), "r_chosen": result.r_chosen, "r_rejected": result.r_rejected}
    )[kept]
    write_parquet(scores, run_dir / "scores.parquet")
    if hasattr(result.model, "save"):
        result.model.save(run_dir / "rm")
    manifest = {
        "run": run,
        "seed": run_seed(seed, run),
        "n_train": int(len(train_index)),
        "train_ids": pairs.id.to_numpy()[train_index].tolist(),
        "metrics": result.metrics,
    }
    write_json(manifest, run_dir / "manifest.json")


def load_runs(out: Path, runs: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Long score and membership tables from the finished runs' files."""
    scores, members = [], []
    for run in range(runs):
        run_dir = out / "runs" / f"{run:03d}"
        if not run_done(run_dir):
            continue
        s = pd.read_parquet(run_dir / "scores.parquet").assign(run=run)
        train = set(json.loads((run_dir / "manifest.json").read_text())["train_ids"])
        scores.append(s)
        members.append(pd.DataFrame({"run": run, "id": s.id, "in_train": s.id.isin(train)}))
    if not scores:
        raise InputError(f"{out}: no finished runs")
    return pd.concat(scores, ignore_index=True), pd.concat(members, ignore_index=True)


def finish(
    pairs: pd.DataFrame, groups: pd.Series, config: AuditConfig, out: Path, *, quiet: bool = False
) -> pd.DataFrame:
    """Estimators, memorization table, map and summary from the runs on disk."""
    scores, members = load_runs(out, config.runs)
    table = estimate(scores, members, n_boot=config.n_boot, seed=config.seed)
    meta = pairs.assign(group=groups.to_numpy())
    for col in ("prompt", "chosen", "rejected"):
        meta[col] = meta[col].map(to_text)
    table = table.merge(meta, on="id", how="left")
    table["category"] = categorize(table, cm_threshold=config.cm_threshold)
    write_parquet(table, out / "memorization.parquet")
    plot_memorization_map(table, out / "memorization_map.png")
    summary = summarize_audit(table, cm_threshold=config.cm_threshold)
    summary["n_runs_finished"] = int(scores.run.nunique())
    dropped = sorted(set(pairs.id) - set(table.id))
    summary["dropped_truncation"] = {"count": len(dropped), "ids": dropped[:100]}
    write_json(summary, out / "summary.json")
    return table
