"""The debiased experiment directory of :func:`rmlens.sae.debias`, and its figures.

A complete experiment directory (DESIGN.md section 6), so ``rmlens compare`` reads it beside
the audit it came from (same data fingerprint, plan and seed):

- ``config.json``: the audit's record with ``head.objective`` ``sae_debias``, estimator
  brute force, and ``debias`` (settings, the latents and why);
- ``plan.parquet``: the audit's plan;
- ``runs/<run>/``: ``scores.parquet`` (``id, r_chosen, r_rejected`` of the projected head on
  the audit's cached features), ``rm/`` (the audit's RM folder with the projected head:
  ``load_rm`` scores texts with it, for probes and best-of-n) and ``manifest.json`` (the
  run's training and validation ids, its quality recomputed, ``metrics.objective``
  ``sae_debias``);
- ``memorization.parquet``, ``memorization_map.png``, ``summary.json``: from the runs by the
  audit's own finishing step (``rmlens.memorization._finish.finish``) with the brute-force
  estimator: in-runs against out-runs of the plan. A paired audit's counterfactual scores
  are probabilities of heads that were never saved, so they cannot be projected; brute force
  is the estimator the debiased runs support, and ``summary.json`` says so.
  ``summary.json`` also holds ``debias``: the latents, and held-out accuracy and
  |corr(reward margin, length difference)| before and after.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from rmlens._io import jsonable
from rmlens.data import word_counts
from rmlens.experiment import AuditDir
from rmlens.memorization import AuditConfig

# private: the debiased runs form an audit folder, written by memorization's own code
from rmlens.memorization._directory import output_errors
from rmlens.stats import pairwise_correct

DEBIAS_OBJECTIVE = "sae_debias"
CAVEAT = ("a suppressed direction can carry real quality as well as the shortcut: read the "
          "held-out accuracy beside the shortcut figures")
ESTIMATOR_NOTE = ("brute force: in-runs against out-runs of the audit's plan (each run's head "
                  "with the suppressed SAE latents' decoder directions projected out, no "
                  "retraining; the audit's paired counterfactuals are probabilities of heads "
                  "never saved, so they are not projected)")
# memorization.parquet's columns that the finishing step adds to the pair columns
ADDED = ("tm", "tg", "cm", "n_in", "n_out", "tm_lo", "tm_hi", "tg_lo", "tg_hi", "cm_lo",
         "cm_hi", "group", "category", "cm_significant", "conflict")  # fmt: skip


def write_debiased(directory: Path, out: Path, record: dict, debias: dict, resp, heads: list,
                   runs: list[int], *, quiet: bool) -> tuple[pd.DataFrame, dict]:  # fmt: skip
    """Write the debiased directory ``out`` from the audit in ``directory``.

    ``heads``: each run's projected head, in the order of ``runs`` and of ``resp.heads``
    (the audit's own). Runs already finished in ``out`` (same debiasing) are kept. Returns
    the memorization table and the before/after figures.
    """
    # lazy: scipy loads only when this runs
    # private: the debiased audit is finished by memorization's own code
    from rmlens.memorization._finish import finish

    source = AuditDir(directory)
    exp = AuditDir(out).create()
    debias = {**debias, "source_objective": _objective(record)}
    debias["settings"] = {**debias["settings"], "runs": [int(r) for r in runs]}
    new = _record(record, debias)
    with output_errors(exp):
        saved = exp.resume(new, what="a debiased audit",
                           settings=lambda r: (r.get("debias") or {}).get("settings") or {})
        exp.write_record(jsonable(new))
        exp.write_plan(source.read_plan())
    memo = source.read_table("memorization.parquet")
    index = pd.Index(resp.ids)
    length = word_counts(memo.set_index("id").loc[resp.ids, "chosen"]) - word_counts(
        memo.set_index("id").loc[resp.ids, "rejected"])  # fmt: skip
    shape = (len(index), len(runs))
    before, after = np.full(shape, np.nan), np.full(shape, np.nan)
    held = np.zeros(shape, dtype=bool)
    drift = 0.0
    for j, (original, head, run) in enumerate(zip(resp.heads, heads, runs)):
        scores = source.read_scores(run, columns=["id", "r_chosen", "r_rejected"])
        rows = index.get_indexer(scores["id"].astype(str))
        assert (rows >= 0).all(), "the audit's runs score the pairs of its table"
        xc, xr = resp.x[resp.chosen[rows]], resp.x[resp.rejected[rows]]
        r_c, r_r = head.score_features(xc), head.score_features(xr)
        was = scores.r_chosen.to_numpy(float) - scores.r_rejected.to_numpy(float)
        drift = max(drift, float(np.abs(original.score_features(xc) - original.score_features(xr)
                                        - was).max(initial=0.0)))  # fmt: skip
        manifest = source.manifest(run)
        member = scores.id.isin(set(manifest["train_ids"])).to_numpy()
        val = scores.id.isin(set(manifest.get("val_ids", []))).to_numpy()
        before[rows, j], after[rows, j] = was, r_c - r_r
        held[rows, j] = ~member & ~val
        if saved is None or not exp.run_done(run):
            _write_run(exp, source, run, scores["id"].to_numpy(), r_c, r_r, manifest,
                       member, val, head, debias["latents"])  # fmt: skip
    figures = held_out_figures(before, after, held, length)
    figures["score_check_max_abs"] = drift
    config = AuditConfig.from_dict(record["audit"]).replace(estimator="brute", check_exact=None)
    pairs = memo.drop(columns=[c for c in ADDED if c in memo.columns])
    with output_errors(exp):
        table = finish(pairs, memo["group"].astype(str), config, exp, quiet=quiet)
        _add_to_summary(exp, source, debias, figures)
    return table, jsonable(figures)


def _objective(record: dict) -> str:
    return str(((record.get("audit") or {}).get("head") or {}).get("objective") or "bt")


def _record(record: dict, debias: dict) -> dict:
    """config.json of the debiased directory: the audit's, as a ``sae_debias`` audit."""
    new = copy.deepcopy(record)
    new["audit"]["head"]["objective"] = DEBIAS_OBJECTIVE
    new["audit"]["estimator"], new["audit"]["check_exact"] = "brute", None
    new["estimator"], new["estimator_note"] = "brute", ESTIMATOR_NOTE
    names = ", ".join(f"sae_{j}" for j in debias["latents"])
    regime = str(new.get("regime", "")).split("; estimator")[0]
    new["regime"] = (f"{regime}; then SAE latents {names} projected out of every head "
                     f"({DEBIAS_OBJECTIVE}); estimator {ESTIMATOR_NOTE}")
    new["debias"] = debias
    return new


def _write_run(exp: AuditDir, source: AuditDir, run: int, ids, r_c, r_r,
               manifest: dict, member, val, head, latents: list[int]) -> None:  # fmt: skip
    """Scores, RM and manifest of one debiased run (``write_run``: the manifest last)."""
    # lazy: scipy loads only when this runs
    # private: a debiased run is scored and written as memorization does its own runs
    from rmlens.memorization._quality import run_quality
    from rmlens.memorization._run_folders import RunOutput, write_run

    p = 1.0 / (1.0 + np.exp(-(np.asarray(r_c, float) - np.asarray(r_r, float))))
    was = manifest.get("metrics") or {}
    metrics = {k: was[k] for k in ("l2", "epochs", "best_epoch") if k in was}
    metrics |= {"objective": DEBIAS_OBJECTIVE, "objective_active": True,
                "source_objective": was.get("objective", "bt"), "suppressed": list(latents)}
    new = {k: v for k, v in manifest.items() if k not in ("estimator", "metrics", "quality")}
    new["quality"] = run_quality(p, member, val)
    new["metrics"] = metrics
    folder = source.run_dir(run) / "rm"
    output = RunOutput(np.asarray(r_c), np.asarray(r_r), metrics,
                       save_rm=lambda tmp: copy_rm(folder, head, tmp))  # fmt: skip
    write_run(exp, run, np.asarray(ids), np.ones(len(ids), dtype=bool), output, jsonable(new))


def copy_rm(source: Path, head, folder: Path) -> None:
    """The audit run's RM folder (``rm_config.json``: backbone, pooling, format) with
    ``head`` in place of its head."""
    shutil.copytree(source, folder)
    head.save(folder)


def _add_to_summary(exp: AuditDir, source: AuditDir, debias: dict,
                    figures: dict) -> None:  # fmt: skip
    summary = exp.read_json("summary.json")
    was = source.read_json("summary.json", required=False, mapping=True) or {}
    if "dropped_truncation" in was:  # the pairs the audit's runs never scored
        summary["dropped_truncation"] = was["dropped_truncation"]
    summary["debias"] = jsonable({
        "latents": debias["latents"], "why": debias["why"],
        "source": debias["settings"]["source"], "source_objective": debias["source_objective"],
        "figures": figures, "estimator": ESTIMATOR_NOTE, "caveat": CAVEAT,
    })  # fmt: skip
    exp.write_json(summary, "summary.json")


def held_out_figures(before: np.ndarray, after: np.ndarray, held: np.ndarray,
                     length: np.ndarray) -> dict:  # fmt: skip
    """Per run on its held-out pairs: accuracy (ties 1/2) and |corr(r+ - r-, words of chosen
    - words of rejected)| (Pearson, as ``benchmarks/guided.py``), before and after, as mean,
    std and runs over runs.

    ``before``, ``after``: margins (n_pairs, n_runs), NaN where unscored; ``held``: each
    run's held-out pairs, (n_pairs, n_runs); ``length``: (n_pairs,).
    """
    def per_run(margins: np.ndarray, figure) -> dict:
        values = []
        for r in range(held.shape[1]):
            rows = held[:, r] & np.isfinite(margins[:, r])
            values.append(figure(margins[rows, r], length[rows]) if rows.sum() > 2 else np.nan)
        return _mean_std(values)

    def accuracy(d, _):
        return float(pairwise_correct(d).mean())

    def length_corr(d, n):
        if np.std(d) == 0 or np.std(n) == 0:
            return np.nan
        return float(abs(np.corrcoef(d, n)[0, 1]))

    return {name: {"before": per_run(before, f), "after": per_run(after, f)}
            for name, f in (("heldout_accuracy", accuracy),
                            ("margin_length_corr_abs", length_corr))}  # fmt: skip


def _mean_std(values: list[float]) -> dict:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return {"mean": float(v.mean()) if len(v) else np.nan,
            "std": float(v.std(ddof=1)) if len(v) > 1 else np.nan, "runs": int(len(v))}
