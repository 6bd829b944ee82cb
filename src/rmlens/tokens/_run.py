"""``rmlens sweep``: sweep several RMs over several prompts, then write tables, stats, plots.

Layout of ``--out DIR``::

    config.json                 resolved SweepConfig, version, model folder names
    summary.json                per model: counts, speed, moments, top/bottom k, framing,
                                frequency bias; agreement between models
    agreement.parquet           model_a, model_b, prompt, n_shared, kendall_tau, spearman, rbo
    <model>/sweep.parquet       token_id, token, decoded, prompt, score, rank
    <model>/stats.json          that model's part of summary.json
    <model>/score_distribution.png, best_vs_worst.png, frequency_vs_score.png

A model whose ``sweep.parquet`` was written for the same settings (its ``sweep_meta.json``)
is not swept again; one swept with other settings is swept again, not refused: a model's
folder is a cache of its sweep. Prompts already finished by an interrupted run are kept
(``<model>/parts``).
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import asdict
from functools import partial
from pathlib import Path

import pandas as pd
import torch

from rmlens import __version__
from rmlens._base import needed_out, resolve_config
from rmlens._errors import InputError
from rmlens._io import json_sha1
from rmlens.backbones import portable_name, resolve_precision
from rmlens.experiment import ExperimentDir
from rmlens.hub import load_rm, use_format
from rmlens.progress import progress_bar
from rmlens.rewards import resolve_device
from rmlens.tokens._adapt import token_scorer
from rmlens.tokens._candidates import sweep_token_ids
from rmlens.tokens._config import SweepConfig
from rmlens.tokens._plots import pick_contrast, plot_contrast, plot_distributions, plot_frequency
from rmlens.tokens._stats import (
    agreement,
    framing,
    frequency_bias,
    moments,
    top_bottom,
    word_features,
)
from rmlens.tokens._sweep import SWEEP_COLUMNS, rescore_extremes, sweep_prompt

SWEEP = "sweep.parquet"  # a model's table, in its folder
META = "sweep_meta.json"  # the settings it was swept with: the model folder's record
# a bf16 sweep's cached route checked against full scoring to a third of the scores' spread
# (bf16 rounds the two routes differently, by up to 15% of it for SmolLM2); its extremes are
# then checked to float tolerance when scored again in fp32
BF16_CHECK = 1 / 3


def read_prompts(path: str | Path) -> list[str]:
    """Prompts from a text file, one per line; blank lines and ``#`` comments are skipped.

    Parameters
    ----------
    path : str or Path
        A UTF-8 text file, one prompt per line.

    Returns
    -------
    list of str
        The prompts in file order, stripped of surrounding whitespace.

    Raises
    ------
    InputError
        A file that cannot be read or is not UTF-8, or one without any prompt.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: expected a UTF-8 text file with one prompt per line "
                         f"({err})") from err
    prompts = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    if not prompts:
        raise InputError(f"{path}: expected at least one prompt (one per line), found none")
    return prompts


def model_slug(spec: str, taken: set[str]) -> str:
    """A folder name for a model: its last path parts, safe characters only, unique."""
    parts = [p for p in re.split(r"[/\\]+", spec.rstrip("/\\")) if p not in ("", ".", "..")]
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", "__".join(parts[-2:]) or "rm")[:80]
    slug, n = base, 2
    while slug in taken:
        slug, n = f"{base}-{n}", n + 1
    taken.add(slug)
    return slug


def _key(*items) -> str:
    return json_sha1(items, 12)


def _sweep_model(load, spec: str, folder: Path, config: SweepConfig, precision: str,
                 quiet: bool) -> dict:
    """Sweep one model over all prompts (resuming finished prompts); return timing info.

    ``load(precision)`` gives the model's scorer. In bf16 each prompt's extremes are then
    scored again in fp32 (:func:`rescore_extremes`), from a second load.
    """
    scorer = load(precision)
    ids, skipped = sweep_token_ids(scorer.tokenizer, config.max_tokens)
    exp = ExperimentDir(folder)
    parts_dir = folder / "parts"
    frames, infos = [], []
    todo = len(ids) * len(config.prompts)
    with progress_bar(f"sweep {folder.name}", total=todo, quiet=quiet) as advance:
        for prompt in config.prompts:
            key = _key(spec, prompt, config.max_tokens, config.score_index, precision)
            part = f"parts/{key}.parquet"
            if (exp / part).is_file():
                frames.append(exp.read_table(part))
                advance(len(ids))
                continue
            start = time.perf_counter()
            frame, info = sweep_prompt(
                scorer, prompt, token_ids=ids, batch_size=config.batch_size,
                min_share=config.min_share, verify=config.verify, advance=advance,
                loose=BF16_CHECK if precision == "bf16" else None,
            )
            seconds = time.perf_counter() - start
            exp.write_table(frame, part)
            frames.append(frame)
            infos.append({**asdict(info), "prompt": prompt, "seconds": round(seconds, 2),
                          "tokens_per_second": round(len(frame) / max(seconds, 1e-9), 1)})
    del scorer
    if precision == "bf16" and config.exact_extremes:
        frames = _rescore(load, spec, frames, exp, config, infos, quiet)
    table = pd.concat(frames, ignore_index=True)[list(SWEEP_COLUMNS)]
    exp.write_table(table, SWEEP)
    shutil.rmtree(parts_dir, ignore_errors=True)
    return {"n_tokens": int(len(ids)), "n_skipped_special": int(skipped), "prompts": infos}


def _scorer(spec: str, config: SweepConfig, formats: list, precision: str):
    """The token scorer of RM ``spec`` in ``precision``; its format appended to ``formats``."""
    rm = use_format(load_rm(spec, score_index=config.score_index, device=config.device,
                            trust_remote_code=config.trust_remote_code, precision=precision),
                    config.format, config.max_length)  # fmt: skip
    formats.append(getattr(rm, "format", None))
    if formats[-1] == "mixed":
        raise InputError(f"{spec}: its members tokenize in different formats; sweep them one "
                         "by one, or set `format`")  # fmt: skip
    return token_scorer(rm, name=spec, consume=True)  # tokenizes as the RM does


def _rescore(load, spec: str, frames: list[pd.DataFrame], exp: ExperimentDir,
             config: SweepConfig, infos: list[dict], quiet: bool) -> list[pd.DataFrame]:
    """Each prompt's bf16 sweep with its extremes scored again in fp32 (resumable)."""
    k, exact, out = config.exact_extremes, None, []
    timing = {info["prompt"]: info for info in infos}
    with progress_bar("extremes in fp32", total=len(frames), quiet=quiet) as advance:
        for frame in frames:
            prompt = str(frame["prompt"].iloc[0])
            part = (f"parts/{_key(spec, prompt, config.max_tokens, config.score_index, k)}"
                    "-fp32.parquet")  # fmt: skip
            if not (exp / part).is_file():
                exact = exact or load("fp32")
                start = time.perf_counter()
                frame, info = rescore_extremes(exact, frame, k, batch_size=config.batch_size,
                                               verify=config.verify)  # fmt: skip
                exp.write_table(frame, part)
                if prompt in timing:
                    timing[prompt].update(fp32_rescored=info["n_rescored"],
                                          fp32_max_abs_diff=info["max_abs_diff"],
                                          fp32_seconds=round(time.perf_counter() - start, 2))
            out.append(exp.read_table(part))
            advance(1)
    return out


def model_stats(table: pd.DataFrame, folder: Path, top_k: int = 10, plots: bool = True) -> dict:
    """Moments, top/bottom, framing and frequency bias of one model's sweep (+ its plots)."""
    prompts = list(table["prompt"].unique())
    extremes = top_bottom(table, top_k)
    stats = {
        "moments": {p: moments(table.loc[table.prompt == p, "score"]) for p in prompts},
        "top": {p: extremes[(extremes.prompt == p) & (extremes.side == "top")]
                .drop(columns=["prompt", "side"]).to_dict("records") for p in prompts},
        "bottom": {p: extremes[(extremes.prompt == p) & (extremes.side == "bottom")]
                   .drop(columns=["prompt", "side"]).to_dict("records") for p in prompts},
        "framing": framing(table).to_dict("records"),
        "frequency_bias": frequency_bias(table).to_dict("records"),
    }
    if plots:
        plot_distributions(table, folder / "score_distribution.png", title=folder.name)
        contrast = pick_contrast(prompts)
        if contrast:
            plot_contrast(table, folder / "best_vs_worst.png", *contrast, title=folder.name)
        first = table[table.prompt == prompts[0]]
        plot_frequency(table, word_features(first["decoded"].tolist()),
                       folder / "frequency_vs_score.png", prompts[0], title=folder.name)
    return stats


def sweep(
    rm: str | list[str] | None = None,
    config: SweepConfig | None = None,
    *,
    out: str | Path | None = None,
    quiet: bool = False,
    **overrides,
) -> dict:
    """Sweep every RM over the prompts of ``config`` and write the results to ``out``.

    Parameters
    ----------
    rm : str or list of str, optional
        The reward model(s) to sweep: anything ``rmlens.hub.load_rm`` loads (default
        ``config.rm``).
    config : SweepConfig, optional
        The settings (default ``SweepConfig()``).
    out : str or Path
        The output folder (see the module docstring for its layout); resumed if it exists.
        Needed.
    quiet : bool, default=False
        No progress bars or status lines.
    **overrides
        Fields of ``SweepConfig``, applied to ``config`` (``sweep(rm, out="s",
        max_tokens=500)``).

    Returns
    -------
    dict
        The content of ``summary.json``.

    Examples
    --------
    >>> summary = sweep("smollm2-135m-hh", out="sweep", max_tokens=500)  # doctest: +SKIP
    >>> summary["models"]  # doctest: +SKIP
    """
    if rm is not None:
        overrides["rm"] = [rm] if isinstance(rm, (str, Path)) else list(rm)
    config = resolve_config("sweep", SweepConfig, config, overrides)
    config.check()  # ParamError (an InputError) names the field
    out = needed_out("sweep", out)

    before = torch.get_num_threads()
    torch.set_num_threads(config.threads or before)
    try:
        return _run(config, Path(out), quiet)
    finally:
        torch.set_num_threads(before)


def _run(config: SweepConfig, out: Path, quiet: bool) -> dict:
    exp = ExperimentDir(out).create()
    taken: set[str] = set()
    # each RM by its resolved path (the same folder typed two ways is one RM and resumes), a
    # preset or hub id as typed
    specs = dict.fromkeys(portable_name(spec) for spec in config.rm)
    slugs = {spec: model_slug(spec, taken) for spec in specs}
    exp.write_record({**config.to_dict(), "version": __version__, "model_dirs": slugs})
    summary: dict = {"version": __version__, "models": {}}
    tables: dict[str, pd.DataFrame] = {}
    # resolved once: a sweep saved in bf16 is not reused for one asked in fp32
    precision = resolve_precision(config.precision, resolve_device(config.device), task="sweep")
    for spec, slug in slugs.items():
        folder = out / slug
        model = ExperimentDir(folder, record=META)
        settings = {"rm": spec, "prompts": config.prompts, "max_tokens": config.max_tokens,
                    "score_index": config.score_index, "format": config.format,
                    "precision": precision,
                    **({"exact_extremes": config.exact_extremes} if precision == "bf16" else {}),
                    **({"max_length": config.max_length} if config.max_length else {})}
        saved = model.reusable({"settings": settings}, [SWEEP])  # else swept again
        if saved is not None:
            meta = saved
        else:
            formats: list = []
            load = partial(_scorer, spec, config, formats)
            swept = _sweep_model(load, spec, folder, config, precision, quiet)
            meta = {"settings": settings, "format": formats[0], **swept}
            model.write_record(meta)
        table = model.read_table(SWEEP)
        tables[slug] = table
        stats = {"rm": spec, "folder": slug, "format": meta.get("format"),
                 "n_tokens": meta["n_tokens"],
                 "n_skipped_special": meta["n_skipped_special"], "timing": meta["prompts"],
                 **model_stats(table, folder, config.top_k)}
        model.write_json(stats, "stats.json")
        summary["models"][slug] = stats
    agree = agreement(tables)
    if len(tables) > 1:
        exp.write_table(agree, "agreement.parquet")
    summary["agreement"] = agree.to_dict("records")
    exp.write_json(summary, "summary.json")
    return summary
