"""``mitigate``: one audit per training objective (same data, plan and seed), then ``compare``.

OUT/<objective>/ is an experiment directory of ``rmlens memorize`` for each objective, and
OUT/compare.* compares them. The backbone is loaded once and the pairs are encoded once (the
embedding cache serves every later audit), so k objectives cost about one encoding plus k
times the heads. Each audit resumes on its own; started again, finished runs are kept.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from rmlens._base import needed_out, resolve_config
from rmlens._errors import InputError, RmlensNote
from rmlens._io import write_json
from rmlens.attribution._bias import objective_bias
from rmlens.comparison._compare import Comparison, compare
from rmlens.comparison._config import CompareConfig, OveroptimizeConfig
from rmlens.comparison._overoptimize import overoptimize
from rmlens.memorization import AuditConfig, audit
from rmlens.memorization._runner import default_trainer
from rmlens.progress import status
from rmlens.rewards import OBJECTIVES
from rmlens.rewards._config import GUIDED_OBJECTIVES
from rmlens.rewards.losses import BIAS_OBJECTIVES


def usable_objectives(pairs: pd.DataFrame, config: AuditConfig, objectives) -> tuple[list, list]:
    """The objectives this data and mode support, and a note for each one left out:
    ``group_dro`` needs its group column (``dro_groups``, default ``user_id``); the weighted
    objectives ``low_margin``, ``complementary`` and ``curate`` train explicit RMs."""
    trainer = config.head if config.mode == "frozen" else config.train
    kept, notes = [], []
    for name in dict.fromkeys(objectives):
        if name not in OBJECTIVES:
            raise InputError(f"`objectives`: unknown objective {name!r}; one of "
                             f"{', '.join(OBJECTIVES)}")  # fmt: skip
        column = trainer.dro_groups or "user_id"
        if name in (*GUIDED_OBJECTIVES, "low_margin") and config.mode == "finetune" and (
            config.train.rm == "implicit"
        ):
            notes.append(f"{name} left out: its loss weights come from an explicit head on "
                         "frozen features, and `rm` is implicit")  # fmt: skip
            continue
        if name == "group_dro" and column not in pairs:
            notes.append(f"group_dro left out: no group column '{column}' (`dro_groups`)")
            continue
        kept.append(name)
    if not kept:
        raise InputError(f"`objectives`: none of {', '.join(objectives)} applies to this data")
    return kept, notes


def mitigate(
    pairs: pd.DataFrame,
    config: AuditConfig | None = None,
    *,
    out: str | Path | None = None,
    objectives: Sequence[str] = OBJECTIVES,
    compare_config: CompareConfig | None = None,
    candidates=None,
    overoptimize_config: OveroptimizeConfig | None = None,
    quiet: bool = False,
    **overrides,
) -> Comparison:
    """Audit ``pairs`` once per objective with one plan and seed, then compare the audits.

    Parameters
    ----------
    pairs : DataFrame
        The canonical pair table (``rmlens.data.load_pairs``).
    config : AuditConfig, optional
        The settings of the audit every objective shares (default ``AuditConfig()``); its
        head's (``train``'s in finetune mode) objective is replaced by each of
        ``objectives`` in turn, the rest is kept (bias features, group column, ...).
    out : str or Path
        The comparison directory: one experiment directory per objective, and
        ``compare.*``. Needed.
    objectives : sequence of str
        Default: all of ``bt, label_smoothing, poe, reweight, group_dro, low_margin,
        complementary, curate`` that the data supports (``group_dro`` needs a group
        column).
    compare_config : CompareConfig, optional
        Options of the comparison; its labels are the objectives.
    candidates : path or DataFrame, optional
        A candidate pool with a gold reward (``rmlens data candidates``): then best-of-n
        curves of every objective's runs and ensembles too (:func:`overoptimize`, into
        ``out``), found in the result's ``overoptimization``.
    overoptimize_config : OveroptimizeConfig, optional
        Options of the best-of-n curves; its labels are the objectives, its seed, n_boot and
        level the comparison's.
    quiet : bool, default=False
        No progress bars or status lines.
    **overrides
        Fields of ``AuditConfig``, applied to ``config`` (``mitigate(pairs, out="m",
        runs=8)``).

    Returns
    -------
    Comparison

    Examples
    --------
    >>> result = mitigate(pairs, out="mitigate", objectives=("bt", "poe"))  # doctest: +SKIP
    >>> result.wide()  # doctest: +SKIP
    """
    config = resolve_config("mitigate", AuditConfig, config, overrides).check()
    out = Path(needed_out("mitigate", out))
    kept, notes = usable_objectives(pairs, config, objectives)
    for note in notes:
        warnings.warn(note, RmlensNote, stacklevel=2)
    nested = "head" if config.mode == "frozen" else "train"
    trainer_config = getattr(config, nested)
    needs_bias = next((o for o in kept if o in BIAS_OBJECTIVES), "bt")
    bias = objective_bias(pairs, trainer_config.replace(objective=needs_bias))
    write_json({"objectives": kept, "left_out": notes, "audit": config.to_dict()},
               out / "mitigate.json")  # fmt: skip
    backbone = None
    for name in kept:
        run_config = config.replace(**{nested: trainer_config.replace(objective=name)})
        trainer = default_trainer(run_config, bias)
        if config.mode == "frozen":
            trainer.backbone = backbone  # loaded by the first audit, shared by the rest
        if not quiet:
            status(f"objective {name}: auditing into {out / name}")
        audit(pairs, run_config, out=out / name, trainer=trainer, bias=bias, quiet=quiet)
        backbone = getattr(trainer, "backbone_", None)
    compare_config = (compare_config or CompareConfig()).replace(labels=tuple(kept))
    dirs = [out / name for name in kept]
    result = compare(dirs, compare_config, out=out, quiet=quiet)
    if candidates is not None:
        oo_config = (overoptimize_config or OveroptimizeConfig()).replace(
            labels=tuple(kept), seed=compare_config.seed, n_boot=compare_config.n_boot,
            level=compare_config.level)  # fmt: skip
        result.overoptimization = overoptimize(dirs, candidates, oo_config, out=out, quiet=quiet)
        result.files += result.overoptimization.files
    return result
