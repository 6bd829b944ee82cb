"""The one-checkpoint audit's standing measured on the user's own data (``check_runs``).

A one-checkpoint audit reads one RM; how far its CM follows a multi-run audit was measured
on benchmarks (``STANDING``), which cannot know the data at hand. K check runs settle it:
a paired fine-tuned audit of the same pairs (``AuditConfig(mode="finetune", runs=K)``,
folder ``check/`` inside the audit), each run trained from the base weights in the RM's own
regime (its training record, or the settings given for an RM from elsewhere), each on the
plan's (folds - 1) / folds share of the groups (4 of 5 by default). Over the pairs both
audits define:

    rho_s      = Spearman(s_checkpoint, s_check)                     s in TM, TG, CM
    share      = rho_cm / sqrt(rel_cm)                               (Spearman 1904)

rel_cm is the check runs' split-half reliability of CM (Spearman-Brown), so ``share`` is the
one-checkpoint CM's correlation with the check audit's noise-free CM: the figure the
benchmark's standing gives, on this data. Intervals are 95% bootstraps over groups, the
reliability held at its value. Cost: K fine-tuning runs in the RM's regime, each with its
per-pair gradient pass, so about K times the RM's own training plus K readings like this
audit's.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from rmlens._errors import InputError, RmlensWarning
from rmlens.memorization._config import AuditConfig
from rmlens.memorization._runner import audit
from rmlens.progress import status
from rmlens.rewards import TrainConfig
from rmlens.stats import group_draws, percentile_interval, spearman

CHECK_DIR = "check"  # the check runs' audit, inside the one-checkpoint audit's folder
SCORES = ("tm", "tg", "cm")


def check_config(config: AuditConfig, train: TrainConfig, runs: int) -> AuditConfig:
    """The check runs' audit: ``runs`` paired fine-tuned runs of ``config``'s plan (grouping,
    folds, seed) in the regime ``train``; its evaluation share becomes the runs' validation
    groups where it stopped early or chose a rate (``val_fraction``), else none."""
    if runs < 2:
        raise InputError(f"`check_runs`: {runs}; expected 2 or more (CM's reliability, which "
                         "the agreement is corrected by, needs two runs)")  # fmt: skip
    validates = bool(train.patience or len(train.lr_grid) > 1)
    val = train.eval_fraction if validates else 0.0
    if validates and not val:
        val = AuditConfig().val_fraction  # it validated on pairs given apart
    regime = train.replace(eval_fraction=0.0, ensemble=1, seed=config.seed,
                           influence="gauss-newton", influence_blocks=0)  # fmt: skip
    return config.replace(
        mode="finetune", runs=runs, estimator="paired", target_reliability=None,
        model=train.model, max_length=train.max_length, format=train.format,
        precision=train.precision, val_fraction=val, train=regime,
    ).check()  # fmt: skip


def runs_agreement(
    table: pd.DataFrame, check: pd.DataFrame, summary: dict, check_summary: dict, *,
    n_boot: int = 400, seed: int = 0,
) -> dict:
    """How one-checkpoint TM, TG and CM follow the check runs' over the pairs both define.

    Parameters
    ----------
    table, check : DataFrame
        The memorization tables (``id``, ``group``, ``tm``, ``tg``, ``cm``, ``category``) of
        the one-checkpoint audit and of the check runs.
    summary, check_summary : dict
        Their summary.json: the check runs' CM reliability, both audits' ``links``.
    n_boot : int, default=400
        Bootstrap draws over groups.
    seed : int, default=0

    Returns
    -------
    dict
        ``n_pairs``, ``n_groups``, ``runs``; per score ``spearman``, ``lo``, ``hi``;
        ``reliability`` (the check runs' CM, Spearman-Brown), ``share`` with ``share_lo``,
        ``share_hi`` (None where the reliability is not above 0); ``links``: per link
        (margin, group size) both audits' ``spearman``, ``lo``, ``hi``; ``memorized``: both
        audits' share of defined pairs categorized memorized; ``warnings``: the codes of the
        check runs' own warnings.
    """
    both = table.merge(check[["id", *SCORES, "category"]], on="id", suffixes=("", "_check"))
    ok = np.ones(len(both), bool)
    for s in SCORES:
        ok &= np.isfinite(both[s].to_numpy(float)) & np.isfinite(both[f"{s}_check"].to_numpy(float))
    both = both[ok].reset_index(drop=True)
    if len(both) < 3 or both.group.nunique() < 2:
        raise InputError(f"check runs: {len(both)} pairs in {both.group.nunique()} groups "
                         "defined in both audits; the agreement needs at least 3 pairs in 2 "
                         "groups")  # fmt: skip
    draws = group_draws(both.group.astype(str).to_numpy(), n_boot, seed)
    result: dict = {"n_pairs": int(len(both)), "n_groups": int(both.group.nunique()),
                    "runs": int(check_summary.get("n_runs_finished") or 0)}  # fmt: skip
    for s in SCORES:
        x, y = both[s].to_numpy(float), both[f"{s}_check"].to_numpy(float)
        lo, hi = percentile_interval([spearman(x[i], y[i]) for i in draws])
        result[s] = {"spearman": spearman(x, y), "lo": lo, "hi": hi}
    rel = ((check_summary.get("reliability") or {}).get("cm") or {}).get("spearman_brown")
    rel = float(rel) if isinstance(rel, (int, float)) and math.isfinite(rel) else math.nan
    root = math.sqrt(min(rel, 1.0)) if rel > 0 else None
    result["reliability"] = rel
    for key, of in (("share", "spearman"), ("share_lo", "lo"), ("share_hi", "hi")):
        result[key] = result["cm"][of] / root if root else None
    sides = (("checkpoint", summary.get("links") or {}),
             ("check", check_summary.get("links") or {}))  # fmt: skip
    result["links"] = {
        name: {who: {k: links[name].get(k) for k in ("spearman", "lo", "hi")}
               for who, links in sides if links.get(name)}
        for name in ("margin", "group_size") if any(links.get(name) for _, links in sides)
    }  # fmt: skip
    result["warnings"] = [w.get("code") for w in check_summary.get("warnings") or []
                          if isinstance(w, dict) and w.get("code")]  # fmt: skip
    result["memorized"] = {
        "checkpoint": float((both.category == "memorized").mean()),
        "check": float((both.category_check == "memorized").mean()),
    }
    return result


def check_regime(ckpt, config: AuditConfig) -> tuple[TrainConfig, str]:
    """The regime the check runs train in, and whose it is in words: the RM's training
    record where it has one; else the settings given (``config.train``) on the base model of
    its adapter (``adapter_config.json``) or ``config.model``."""
    if not ckpt.unchecked:
        t = ckpt.train
        return t, f"the RM's training record ({t.model}, {_rates(t)})"
    adapter = Path(ckpt.folder) / "adapter_config.json"
    base = json.loads(adapter.read_text()).get("base_model_name_or_path") if adapter.is_file() \
        else None  # fmt: skip
    t = config.train.replace(model=base or config.model, max_length=config.max_length,
                             format=config.format, precision=config.precision)  # fmt: skip
    where = "its adapter's base" if base else "the model given"
    return t, (f"the settings given, the RM's own not being recorded ({t.model}, {where}; "
               f"{t.finetune}, {_rates(t)})")  # fmt: skip


def _rates(t: TrainConfig) -> str:
    lr = (f"lr chosen from {', '.join(f'{x:g}' for x in t.lr_grid)}" if len(t.lr_grid) > 1
          else f"lr {(t.lr_grid or (t.lr,))[0]:g}")  # fmt: skip
    epochs = "1 epoch" if t.epochs == 1 else f"at most {t.epochs} epochs"
    return f"{lr}, {epochs}, patience {t.patience}"


def run_check(
    pairs: pd.DataFrame, table: pd.DataFrame, summary: dict, config: AuditConfig, ckpt,
    runs: int, out: Path, *, quiet: bool = False,
) -> dict:
    """Train the check runs in ``ckpt``'s regime (resumed if stopped) and measure the
    agreement; the audit's ``summary["check"]``."""
    train, regime_from = check_regime(ckpt, config)
    cfg = check_config(config, train, runs)
    folder = Path(out) / CHECK_DIR
    if not quiet:
        status(f"check runs: {runs} paired runs in the regime of {regime_from}, into {folder} "
               "(the lines below, up to the audit's summary, are theirs)")  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:  # theirs, said as theirs
        warnings.simplefilter("always", RmlensWarning)
        check = audit(pairs, cfg, out=folder, quiet=quiet)
    check_summary = json.loads((folder / "summary.json").read_text())
    result = runs_agreement(table, check, summary, check_summary, seed=config.seed)
    ours = [w for w in caught if issubclass(w.category, RmlensWarning)]
    if ours:
        codes = f": {', '.join(result['warnings'])}" if result["warnings"] else ""
        warnings.warn(f"the check runs' audit gave {len(ours)} warning(s), in "
                      f"{folder / 'summary.json'}{codes}", RmlensWarning, stacklevel=3)
    for other in caught:  # not the audit's own: let them through as they came
        if other not in ours:
            warnings.warn_explicit(other.message, other.category, other.filename, other.lineno)
    result.update(regime_from=regime_from, folder=CHECK_DIR)
    return result
