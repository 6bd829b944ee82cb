"""Explicit vs implicit RMs under distribution shifts (Razin et al. 2025; DESIGN.md 5).

Both RMs train on the same pairs and backbone. Each is scored on every split, and a split
reports accuracy (ties count 1/2) and the normalized absolute margin

    norm_margin = mean_i |r+_i - r-_i| / std(r),

where std(r) is the standard deviation of that RM's rewards (chosen and rejected) on its
training split, so margins compare across splits and between the two RMs.

DIR/config.json (with each RM's ``format`` and, per split, ``truncation``),
generalization.parquet (rm, split, accuracy, norm_margin, n),
generalization.png, scores.parquet (rm, split, id, r_chosen, r_rejected),
rms/explicit/ and rms/implicit/ (saved RMs; a finished one is reused when the command runs
again on the same directory).
"""

from __future__ import annotations

import gc
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

import rmlens
from rmlens._base import resolve_config
from rmlens._errors import InputError
from rmlens._io import json_sha1, write_json, write_parquet
from rmlens.data import data_sha1, derive_id
from rmlens.experiment import ExperimentDir
from rmlens.generalization._config import GeneralizeConfig
from rmlens.generalization._persona import persona_splits
from rmlens.generalization._plots import plot_generalization
from rmlens.generalization._shifts import parse_shifts, rewrite_pairs
from rmlens.hub import load_rm
from rmlens.progress import status
from rmlens.rewards import make_trainer, pairwise_accuracy

RMS = ("explicit", "implicit")


def split_by_prompt(pairs: pd.DataFrame, fraction: float, seed: int):
    """(train, held-out): whole prompts go to one side, about ``fraction`` of them held out."""
    keys = pairs.prompt.map(lambda p: derive_id(p, length=None))
    unique = np.array(sorted(set(keys)))
    if len(unique) < 2:
        raise InputError("need at least 2 distinct prompts to hold some out")
    rng = np.random.default_rng(seed)
    n_out = min(len(unique) - 1, max(1, int(round(fraction * len(unique)))))
    held = set(rng.permutation(unique)[:n_out])
    out = keys.isin(held).to_numpy()
    return pairs[~out].reset_index(drop=True), pairs[out].reset_index(drop=True)


def build_splits(
    pairs: pd.DataFrame | None, config: GeneralizeConfig, *, shift_pairs: pd.DataFrame | None = None
) -> dict[str, pd.DataFrame]:
    """``train``, ``in_distribution`` and the shifted splits, by name."""
    seed = config.train.seed
    if config.task == "persona":
        splits = persona_splits(config.n_statements, test_fraction=config.test_fraction, seed=seed)
    else:
        if pairs is None:
            raise InputError("no pairs: give a pair table, or `task` \"persona\"")
        pool, outside = pairs, None
        if config.domain_col:
            pool, outside = _domains(pairs, config)
        train, held = split_by_prompt(pool, config.test_fraction, seed)
        splits = {"train": train, "in_distribution": held}
        if outside is not None:
            splits["domain_shift"] = outside.reset_index(drop=True)
            domains = outside[config.domain_col].astype(str)
            if domains.nunique() > 1:
                for d in sorted(domains.unique()):
                    splits[f"domain_shift:{d}"] = outside[domains == d].reset_index(drop=True)
    if shift_pairs is not None:
        splits["token_shift:file"] = shift_pairs.reset_index(drop=True)
    for name in parse_shifts(config.shifts):
        shifted = rewrite_pairs(splits["in_distribution"], name)
        if len(shifted):
            splits[f"token_shift:{name}"] = shifted
    return splits


def _domains(pairs: pd.DataFrame, config: GeneralizeConfig):
    col = config.domain_col
    if col not in pairs:
        raise InputError(
            f"`domain_col`: no column '{col}' in the data "
            f"(columns: {', '.join(map(str, pairs.columns))})"
        )
    if not config.train_domains:
        raise InputError("`domain_col` needs `train_domains` (the domains to train on)")
    domains = pairs[col].astype(str)
    wanted = [d.strip() for d in config.train_domains.split(",") if d.strip()]
    missing = sorted(set(wanted) - set(domains))
    if missing:
        raise InputError(
            f"`train_domains`: {missing[0]!r} is not a value of '{col}' "
            f"(found: {', '.join(sorted(domains.unique())[:20])})"
        )
    inside = domains.isin(wanted).to_numpy()
    if inside.all():
        raise InputError(f"`train_domains`: every pair is in {wanted}; no domain left to test")
    return pairs[inside], pairs[~inside]


def split_metrics(r_c: np.ndarray, r_r: np.ndarray, scale: float) -> dict[str, float]:
    """Accuracy (ties 1/2) and mean |r+ - r-| / scale of one split."""
    norm = float(np.mean(np.abs(r_c - r_r)) / scale) if scale > 0 and len(r_c) else np.nan
    return {"accuracy": pairwise_accuracy(r_c, r_r), "norm_margin": norm, "n": len(r_c)}


def _prepare_dir(out: Path, record: dict) -> None:
    exp = ExperimentDir(out).create()
    exp.resume(record, what="a comparison of explicit and implicit RMs",
               settings=lambda r: GeneralizeConfig.upgrade(r.get("generalize") or {}),
               defaults=GeneralizeConfig().to_dict())  # fmt: skip
    exp.write_record(record)


def _splits_sha1(splits: dict[str, pd.DataFrame]) -> str:
    """Every split by name, each by ``data_sha1`` (``data._fingerprint``: pairs, margins)."""
    parts = {name: data_sha1(frame) for name, frame in splits.items()}
    return json_sha1(parts, 16, sort_keys=False)  # unsorted: the splits in their order


def _trained_rm(kind: str, splits, config: GeneralizeConfig, out: Path, quiet: bool):
    folder = out / "rms" / kind
    if (folder / "rm_config.json").exists():
        if not quiet:
            status(f"{kind} RM: reusing {folder}")
        return load_rm(folder, device=config.train.device)
    if not quiet:
        status(f"training the {kind} RM on {len(splits['train'])} pairs")
    trainer = make_trainer(config.train.replace(rm_kind=kind))
    trainer.fit(splits["train"], checkpoint_dir=folder / "checkpoints", quiet=quiet)
    write_json(trainer.history_, folder / "history.json")
    trainer.rm_.save(folder)
    shutil.rmtree(folder / "checkpoints", ignore_errors=True)
    return trainer.rm_


def generalize(
    pairs: pd.DataFrame | None,
    config: GeneralizeConfig | None = None,
    *,
    out: str | Path | None = None,
    shift_pairs: pd.DataFrame | None = None,
    quiet: bool = False,
    **overrides,
) -> pd.DataFrame:
    """Train an EX-RM and an IM-RM on the same pairs and backbone; score them under shifts.

    Parameters
    ----------
    pairs : DataFrame or None
        The canonical pair table (``rmlens.data.load_pairs``); None with
        ``config.task="persona"``.
    config : GeneralizeConfig, optional
        The settings (default ``GeneralizeConfig()``).
    out : str or Path, optional
        The output directory (default ``rmlens-generalize``; see the module docstring).
    shift_pairs : DataFrame, optional
        User-rewritten pairs (same meaning, other tokens): the ``token_shift:file`` split.
    quiet : bool, default=False
        No progress bars or status lines.
    **overrides
        Fields of ``GeneralizeConfig``, applied to ``config`` (``generalize(None,
        task="persona")``).

    Returns
    -------
    DataFrame with ``rm`` (explicit, implicit), ``split``, ``accuracy``, ``norm_margin``, ``n``.

    Examples
    --------
    >>> table = generalize(None, task="persona", out="gen")  # doctest: +SKIP
    >>> table.pivot(index="split", columns="rm", values="accuracy")  # doctest: +SKIP
    """
    config = resolve_config("generalize", GeneralizeConfig, config, overrides).check()
    out = Path("rmlens-generalize" if out is None else out)
    splits = build_splits(pairs, config, shift_pairs=shift_pairs)
    record = {
        "version": rmlens.__version__,
        "generalize": config.to_dict(),
        "data_sha1": _splits_sha1(splits),
        "splits": {name: len(frame) for name, frame in splits.items()},
        "norm_margin": "mean |r+ - r-| / std of the RM's rewards on its training split",
    }
    _prepare_dir(out, record)
    rows, scores = [], []
    for kind in RMS:
        rm = _trained_rm(kind, splits, config, out, quiet)
        # how each RM tokenized (chat, raw or pair) and what max_length cut of each split
        record.setdefault("format", {})[kind] = rm.format
        record.setdefault("truncation", {})[kind] = {
            name: rm.truncation(frame) for name, frame in splits.items()}  # fmt: skip
        ExperimentDir(out).write_record(record)
        scored = {name: rm.score_pairs(frame) for name, frame in splits.items()}
        train_c, train_r = scored["train"]
        scale = float(np.std(np.concatenate([train_c, train_r])))
        for name, (r_c, r_r) in scored.items():
            rows.append({"rm": kind, "split": name, **split_metrics(r_c, r_r, scale)})
            ids = splits[name]["id"] if "id" in splits[name] else splits[name].index.astype(str)
            scores.append(
                pd.DataFrame(
                    {
                        "rm": kind,
                        "split": name,
                        "id": np.asarray(ids),
                        "r_chosen": r_c,
                        "r_rejected": r_r,
                    }
                )
            )
        del rm
        gc.collect()
    table = pd.DataFrame(rows, columns=["rm", "split", "accuracy", "norm_margin", "n"])
    write_parquet(pd.concat(scores, ignore_index=True), out / "scores.parquet")
    write_parquet(table, out / "generalization.parquet")
    plot_generalization(table, out / "generalization.png")
    return table
