"""Finishing an audit: estimators, memorization table, map and summary from the finished
runs on disk (memorization.parquet, memorization_map.png, summary.json). The map is TM (x)
against TG (y) density with marginal histograms (``plot_memorization_map``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rmlens._png import empty_note, plot_to
from rmlens.backbones import truncation_message
from rmlens.data import duplicates_across_groups, to_text
from rmlens.experiment import AuditDir
from rmlens.memorization._config import AuditConfig
from rmlens.memorization._damping import brute_agreement, damping_warning
from rmlens.memorization._estimate import memorization_scores
from rmlens.memorization._notes import PAIRED_SIGNIFICANCE, mode_note
from rmlens.memorization._paired import exactness_summary, exactness_warning
from rmlens.memorization._plans import runs_per_repeat
from rmlens.memorization._quality import (
    audit_warnings,
    budget_warning,
    coverage_warning,
    duplicates_warnings,
    interval_note,
    interval_warning,
    learning_warning,
    rm_quality,
    strongest_shortcut,
    validation_note,
)
from rmlens.memorization._regime import TRAINED_ELSEWHERE
from rmlens.memorization._reliability import (
    reliability_warnings,
    same_partition,
    split_half,
    target_status,
)
from rmlens.memorization._run_folders import RunMatrices, load_matrices
from rmlens.memorization._summary import (
    WITHHELD,
    categorize,
    cm_significant,
    objective_summary,
    objective_warning,
    summarize_audit,
    withheld_reason,
)

SAME_PARTITION = (
    "every repeat of the plan draws the same partition of groups, so the halves differ only "
    "in seeds: the figure measures seed noise, not the plan's"
)


def finish(
    pairs: pd.DataFrame,
    groups: pd.Series,
    config: AuditConfig,
    out: str | Path | AuditDir,
    *,
    quiet: bool = False,
) -> pd.DataFrame:
    """Estimators, memorization table, map and summary from the finished runs on disk.

    Runs that are not finished (failed, or not run yet) are left out and listed in
    ``summary.json`` (``complete``, ``failed_runs``, ``pairs_lacking_runs``). The run count is
    the plan's (plan.parquet), which a target reliability grows past ``config.runs``; with a
    target, ``summary.json``'s ``target_reliability`` says whether it was reached and why the
    audit stopped.
    """
    exp = AuditDir(out)
    plan = exp.read_plan()
    n_runs = exp.n_runs()
    config = config.replace(runs=n_runs)  # the real run count (coverage_warning reads it)
    record = exp.read_record() or {}
    folds = record.get("folds_used", config.folds)
    k = runs_per_repeat(config.plan, folds)
    m = load_matrices(exp, n_runs)
    table = _estimate(m, config)
    runs = [_run_record(exp, r) for r in m.runs]
    checks = [r.pop("exactness") for r in runs]  # the Newton step against refits
    quality = rm_quality(m.p, m.member, m.val, m.runs, runs)
    reliability = split_half(
        m.p, m.member, m.val, np.asarray(m.runs) // k, folds=k, p_cf=m.p_cf, seed=config.seed,
        deterministic=config.deterministic,
    )
    damping = m.damping
    if damping is not None:
        damping["influence"] = config.counterfactuals
        damping["brute_check"] = brute_agreement(
            table.cm.to_numpy(), m, reliability, np.asarray(m.runs) // k, k, config.seed
        )
    finished, estimator = m.runs, m.estimator
    del m
    distinct, used = reliability.get("distinct_training_sets"), reliability["n_runs"]
    if "reason" not in reliability and distinct is not None and distinct < used:
        reliability["note"] = (f"the {used} runs train on {distinct} distinct training sets: "
                               "runs that share one differ only in their seeds")  # fmt: skip
    if same_partition(plan, k) and "reason" not in reliability:
        reliability["note"] = SAME_PARTITION
    duplicates, conflict = duplicates_across_groups(
        pairs, groups, group_by=record.get("group_by") or "group"
    )
    checkpoint = exp.manifest(finished[0]).get("metrics", {}) if "checkpoint" in record else {}
    withheld = withheld_reason(quality, checkpoint.get("damping_edge"))
    table = _label(table, pairs.assign(conflict=conflict), groups, config, withheld)
    exp.write_table(table, "memorization.parquet")
    plot_memorization_map(table, exp / "memorization_map.png",
                          checkpoint="checkpoint" in record)  # fmt: skip
    summary = {
        "estimator": estimator,
        "estimator_note": record.get("estimator_note", "brute force: in-runs against out-runs"),
        "rm_quality": quality,
        "reliability": reliability,
        **_checks(exactness_summary(checks), damping),
        **summarize_audit(table, cm_threshold=config.cm_threshold, withheld=withheld),
        **_accounting(exp, table, pairs, finished, n_runs),
    }
    if not config.n_boot:  # no intervals asked for: no significance to speak of
        summary["cm_significant"] = None
    elif estimator == "paired":
        summary["cm_significant"]["note"] = PAIRED_SIGNIFICANCE
    summary["mode_note"] = mode_note(config)
    summary["validation"] = validation_note(config, quality)
    summary["intervals"] = interval_note(table)
    for key in ("format", "truncation"):  # how the runs tokenized the pairs (config.json)
        if record.get(key) is not None:
            summary[key] = record[key]
    summary["duplicates"] = duplicates  # of the audited pairs and groups (after `dedupe`)
    if pairs.attrs.get("dropped"):  # rows left out as it loaded (drop_invalid, same text)
        summary["dropped_rows"] = pairs.attrs["dropped"]
    summary["shortcut"] = strongest_shortcut(table, record.get("group_by"))
    if record.get("dedupe"):
        summary["dedupe"] = record["dedupe"]
    if config.target_reliability is not None:
        summary["target_reliability"] = target_status(
            reliability,
            config.target_reliability,
            runs=n_runs,
            max_runs=config.max_runs,
            folds=k,
            missing=len(summary["failed_runs"]),
        )
    summary["objective"] = objective_summary(exp, finished)
    foreign = str(record.get("regime", "")).startswith(TRAINED_ELSEWHERE)
    summary["warnings"] = _warnings(summary, table, plan, config, folds, foreign=foreign)
    exp.write_json(summary, "summary.json")
    return table


def _estimate(m: RunMatrices, config: AuditConfig) -> pd.DataFrame:
    """TM, TG and CM of every pair. A run's validation pairs count neither in nor out for
    it: it took no gradients on them, and its early stopping read them (as out-pairs they
    would bias TG upwards)."""
    p_cf = None if m.p_cf is None else np.where(m.val, np.nan, m.p_cf)
    table = memorization_scores(
        np.where(m.val, np.nan, m.p), m.member, p_cf=p_cf, n_boot=config.n_boot,
        seed=config.seed,
    )  # fmt: skip
    table.insert(0, "id", m.ids.to_numpy())
    return table


def _label(table: pd.DataFrame, pairs: pd.DataFrame, groups: pd.Series,
           config: AuditConfig, withheld: str | None = None) -> pd.DataFrame:  # fmt: skip
    """The table with every pair column, its group, category and CM's significance; the
    category ``withheld`` for every defined pair when ``withheld`` says why."""
    meta = pairs.assign(group=groups.to_numpy())
    for col in ("prompt", "chosen", "rejected"):
        meta[col] = meta[col].map(to_text)
    table = table.merge(meta, on="id", how="left")
    category = categorize(table, cm_threshold=config.cm_threshold)
    table["category"] = category.where(category == "undefined", WITHHELD) if withheld else category
    table["cm_significant"] = cm_significant(table)
    return table


def _checks(exactness: dict | None, damping: dict | None) -> dict:
    """How exact the paired counterfactuals were, and how their damping was calibrated."""
    found = {"exactness": exactness, "damping": damping}
    return {k: v for k, v in found.items() if v is not None}


def _run_record(exp: AuditDir, run: int) -> dict:
    """What a run's manifest says about its training: validation pairs, epochs, best epoch."""
    manifest = exp.manifest(run)
    metrics = manifest.get("metrics") or {}
    record = {"n_val": int(manifest.get("n_val", 0))}
    record.update({k: metrics[k] for k in ("epochs", "best_epoch", "l2") if k in metrics})
    record["exactness"] = metrics.get("exactness")
    return record


def _accounting(exp: AuditDir, table: pd.DataFrame, pairs: pd.DataFrame,
                finished: list[int], n_runs: int) -> dict:  # fmt: skip
    """Which runs finished, which failed and why, and the pairs they leave without runs."""
    missing = sorted(set(range(n_runs)) - set(finished))
    lacking = (table.n_in == 0) | (table.n_out == 0)
    dropped = sorted(set(pairs.id) - set(table.id))
    return {
        "n_runs_finished": len(finished),
        "n_runs_planned": n_runs,
        "complete": not missing,
        "failed_runs": [{"run": r, "error": exp.read_error(r) or "not finished"} for r in missing],
        "pairs_lacking_runs": {
            "count": int(lacking.sum()),
            "no_in_run": int((table.n_in == 0).sum()),
            "no_out_run": int((table.n_out == 0).sum()),
            "ids": table.id[lacking].head(100).tolist(),
        },
        "dropped_truncation": {"count": len(dropped), "ids": dropped[:100]},
    }


def _warnings(summary: dict, table: pd.DataFrame, plan: pd.DataFrame, config: AuditConfig,
              folds: int, *, foreign: bool = False) -> list[dict]:  # fmt: skip
    """summary.json's warnings, from the rest of the summary (``foreign``: one RM trained
    outside rmlens)."""
    quality, reliability = summary["rm_quality"], summary["reliability"]
    found = [learning_warning(quality, config, foreign=foreign), *audit_warnings(table, quality)]
    if summary.get("categories_withheld"):
        found.insert(0, {"code": "categories_withheld",
                         "message": summary["categories_withheld"]})  # fmt: skip
    found += reliability_warnings(reliability)
    found.append(budget_warning(summary["validation"], summary["n_runs_finished"]))
    if summary["estimator"] == "brute":  # paired: every run gives every pair both sides
        found.append(coverage_warning(table, plan, config, folds))
    found.append(exactness_warning(summary.get("exactness")))
    found.append(damping_warning(summary.get("damping")))
    if config.n_boot:
        found.append(interval_warning(summary["intervals"], len(table)))
    found.append(objective_warning(summary["objective"]))
    found.append(truncation_warning(summary.get("truncation"), summary["n_pairs"]))
    found += duplicates_warnings(summary["duplicates"], summary.get("memorized_conflicts"),
                                 dedupe=(summary.get("dedupe") or {}).get("how", "none"))
    status = summary.get("target_reliability")
    if status is not None and status["stopped_because"] in ("max_runs", "failed_runs"):
        found.append(
            {"code": "target_not_reached", "message": status["message"],
             "runs_predicted": status["runs_predicted"]}
        )  # fmt: skip
    return [w for w in found if w is not None]


def truncation_warning(truncation: dict | None, n_pairs: int) -> dict | None:
    """summary.json's warning of pairs that ``max_length`` cut, or None."""
    message = truncation_message(truncation, n_pairs)
    if message is None:
        return None
    return {"code": "truncation", "message": message, "pairs": truncation["pairs_cut"]}


# the TG axis of an audit's runs, and of a one-checkpoint audit (its one RM trained on every
# pair; TG from each group's removal by a Gauss-Newton step)
TG_AXIS = {False: "TG (held out from the pair)",
           True: "TG (its group removed by a Gauss-Newton step)"}


def plot_memorization_map(table: pd.DataFrame, path: str | Path, *, title: str = "",
                          checkpoint: bool = False) -> Path:  # fmt: skip
    """Density of pairs over (TM, TG) in [0, 1]^2; CM = 0 is the diagonal.

    Rows with a missing or infinite TM or TG are left out; with none left the axes say so.

    Parameters
    ----------
    table : DataFrame
        Pairs with ``tm`` and ``tg`` columns (the memorization table).
    path : str or Path
        Where the PNG is written.
    title : str, default=""
        The figure's title; empty: "Memorization map (N pairs)".
    checkpoint : bool, default=False
        A one-checkpoint audit's table: TG comes from removing each group from the one RM's
        training, not from runs that held the pair out.

    Returns
    -------
    Path
        ``path``.
    """
    from matplotlib.ticker import MaxNLocator

    tm = pd.to_numeric(table["tm"], errors="coerce").to_numpy(dtype=float)
    tg = pd.to_numeric(table["tg"], errors="coerce").to_numpy(dtype=float)
    keep = np.isfinite(tm) & np.isfinite(tg)
    tm, tg = tm[keep], tg[keep]  # (n_pairs,)
    with plot_to(path, size=(7, 7), layout=None) as fig:
        grid = fig.add_gridspec(
            2, 2, width_ratios=(4, 1), height_ratios=(1, 4), hspace=0.08, wspace=0.08
        )
        ax = fig.add_subplot(grid[1, 0])
        top = fig.add_subplot(grid[0, 0], sharex=ax)
        right = fig.add_subplot(grid[1, 1], sharey=ax)
        ax.plot([0, 1], [0, 1], color="crimson", lw=1, ls="--", label="CM = 0")
        ax.set(
            xlim=(0, 1),
            ylim=(0, 1),
            xlabel="TM (trained on the pair)",
            ylabel=TG_AXIS[checkpoint],
        )
        ax.legend(loc="lower right")
        top.tick_params(labelbottom=False)
        right.tick_params(labelleft=False)
        # the histograms' counts: few ticks, none at 0, where their labels would run into the
        # main axes' "1.0" at the shared corner
        top.yaxis.set_major_locator(MaxNLocator(nbins=3, integer=True, prune="lower"))
        right.xaxis.set_major_locator(MaxNLocator(nbins=2, integer=True, prune="lower"))
        top.set_title(title or f"Memorization map ({len(tm)} pairs)")
        if len(tm) == 0:  # hexbin's log colour scale has no range to show
            empty_note(ax, "no pair has both TM and TG")
        else:
            hb = ax.hexbin(
                tm, tg, gridsize=40, extent=(0, 1, 0, 1), bins="log", cmap="viridis", mincnt=1
            )
            bins = np.linspace(0, 1, 41)
            top.hist(tm, bins=bins, color="steelblue")
            right.hist(tg, bins=bins, color="steelblue", orientation="horizontal")
            fig.colorbar(hb, ax=right, label="pairs (log)")
    return Path(path)
