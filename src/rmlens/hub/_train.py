"""``rmlens train``: fine-tune an RM (or a seed ensemble) into a folder, resuming if stopped.

DIR/train.json          resolved TrainConfig, version, data fingerprint, pair counts, the
                        precision it ran in, the format the texts were tokenized in and what
                        ``max_length`` cut (``precision``, ``format``, ``truncation``)
DIR/rm_config.json      written last: the folder is a finished RM (``load_rm(DIR)``)
DIR/history.json        metrics per epoch (one list per member for an ensemble)
DIR/loss_weights.*      low_margin, complementary, curate: the training pairs' loss weights
DIR/checkpoints/        while training; removed once the RM is saved
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pandas as pd

import rmlens
from rmlens._base import needed_out, resolve_config
from rmlens._errors import RmlensWarning
from rmlens._io import write_atomic, write_json
from rmlens.backbones import precision_note, resolve_precision
from rmlens.data import data_sha1
from rmlens.experiment import ExperimentDir
from rmlens.progress import status
from rmlens.rewards import TrainConfig, make_trainer, resolve_device


def train(
    data: pd.DataFrame,
    config: TrainConfig | None = None,
    *,
    out: str | Path | None = None,
    eval_data: pd.DataFrame | None = None,
    bias=None,
    quiet: bool = False,
    **overrides,
):
    """Fine-tune a reward model and save it to ``out``.

    Parameters
    ----------
    data : DataFrame
        The canonical pair table (``rmlens.data.load_pairs``) or, with
        ``loss="plackett-luce"``, rankings (``load_rankings``).
    config : TrainConfig, optional
        The settings (default ``TrainConfig()``). ``ensemble > 1`` trains that many members
        with seeds ``seed, seed + 1, ...``.
    out : str or Path
        The RM folder. Started again on the same folder it resumes from the last checkpoint;
        a finished folder is loaded, not retrained. Needed.
    eval_data : DataFrame, optional
        Evaluated each epoch, in place of the ``eval_fraction`` split of ``data`` (recorded
        as 0: every pair of ``data`` is trained on).
    bias : DataFrame of shape (n_pairs, k), optional
        Shortcut feature differences of the pairs for the ``poe`` and ``reweight``
        objectives (``rmlens.attribution.bias_features``).
    quiet : bool, default=False
        No progress bars or status lines.
    **overrides
        Fields of ``TrainConfig``, applied to ``config`` (``train(pairs, out="rm",
        epochs=2)``).

    Returns
    -------
    TunedRM or EnsembleRM

    Examples
    --------
    >>> rm = train(pairs, out="rm", model="smollm2-135m", epochs=1)  # doctest: +SKIP
    >>> rm.score_pairs(pairs)  # doctest: +SKIP
    """
    # lazy: torch, transformers load only when this runs
    from rmlens.hub._load import load_rm

    config = resolve_config("train", TrainConfig, config, overrides)
    if eval_data is not None:  # pairs given apart replace the split: every pair trains
        config = config.replace(eval_fraction=0.0)
    config.check()  # ParamError (an InputError) names the field
    out = Path(needed_out("train", out))
    record = {
        "version": rmlens.__version__,
        "train_config": config.to_dict(),
        "precision": resolve_precision(config.precision, resolve_device(config.device)),
        "data_sha1": data_sha1(data),
        "eval_sha1": None if eval_data is None else data_sha1(eval_data),
        "n_train": len(data),
        "n_eval": None if eval_data is None else len(eval_data),
    }
    exp = ExperimentDir(out, record="train.json").create()
    saved = exp.resume(
        record, what="an RM", settings=resolved_settings,
        data_keys=("data_sha1", "eval_sha1", "n_eval"), size_key="n_train",
        defaults=TrainConfig().to_dict(),
    )  # fmt: skip
    if saved is not None and (out / "rm_config.json").exists():
        status(f"{out}: already trained; loading it")
        return load_rm(out, device=config.device)
    exp.write_record(record)
    if not quiet:
        status(precision_note(config.precision, resolve_device(config.device)))
    trainer = make_trainer(config, bias=bias)
    histories, members = [], []
    for i in range(config.ensemble):
        folder = out if config.ensemble == 1 else out / "members" / f"{i:03d}"
        if config.ensemble > 1 and (folder / "rm_config.json").exists():
            histories.append(exp.read_json(f"{folder.relative_to(out)}/history.json"))
            members.append(folder)
            continue
        trainer.config = config.replace(seed=config.seed + i)
        trainer.fit(data, eval_data=eval_data, checkpoint_dir=folder / "checkpoints", quiet=quiet)
        if "truncation" not in record:  # every member tokenizes the data alike
            record.update(format=trainer.format_, truncation=trainer.truncation_,
                          eval_truncation=getattr(trainer, "eval_truncation_", None))
        advice = trainer.learning_advice() if hasattr(trainer, "learning_advice") else None
        record.setdefault("not_learned", {})[folder.name if config.ensemble > 1 else "rm"] = (
            getattr(trainer, "not_learned_", None))
        exp.write_record(record)
        if advice:
            warnings.warn(advice, RmlensWarning, stacklevel=2)
        histories.append(trainer.history_)
        write_json(trainer.history_, folder / "history.json")
        if getattr(trainer, "loss_weights_", None) is not None:
            save_loss_weights(trainer.loss_weights_, folder)
        trainer.rm_.save(folder)
        shutil.rmtree(folder / "checkpoints", ignore_errors=True)
        members.append(folder)
    if config.ensemble == 1:
        return trainer.rm_
    write_json(histories, out / "history.json")
    write_json(
        {
            "kind": "ensemble",
            "version": rmlens.__version__,
            "members": [str(m.relative_to(out)) for m in members],
        },
        out / "rm_config.json",
    )
    return load_rm(out, device=config.device)


def resolved_settings(record: dict) -> dict:
    """The settings of a ``train.json`` as compared on resume: its precision as resolved
    (bf16 or fp32; fp32 for a record saved before there was bf16, or its ``bf16`` flag)."""
    settings = TrainConfig.upgrade(record.get("train_config") or {})
    typed = settings.get("precision", "fp32")
    return {**settings, "precision": record.get("precision", "fp32" if typed == "auto" else typed)}


def save_loss_weights(table: pd.DataFrame, folder: Path) -> None:
    """The audit-guided loss weights an RM trained with, beside it: ``loss_weights.parquet``
    (``id, weight, tm, tg, q`` per training pair) and ``loss_weights.json`` (their summary,
    how they were made, whether the mechanism acted)."""
    write_atomic(folder / "loss_weights.parquet", lambda tmp: table.to_parquet(tmp, index=False))
    write_json(table.attrs, folder / "loss_weights.json")
