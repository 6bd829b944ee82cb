"""``mitigate``: one audit per training objective (same data, plan and seed), then ``compare``.

OUT/<objective>/ is an experiment directory of ``rmlens memorize`` for each objective, and
OUT/compare.* compares them. The backbone is loaded once and the pairs are encoded once (the
embedding cache serves every later audit), so k objectives cost about one encoding plus k
times the heads. Each audit resumes on its own; started again, finished runs are kept.

With ``debias`` ``sae``, the SAE lens is then fitted on OUT/bt and its shortcut latents are
projected out of every bt run's head into OUT/sae_debias (as ``rmlens sae OUT/bt --out
OUT/sae_debias``, no retraining), a reference row ``sae_debias`` beside the objectives;
started again, the saved SAE and the finished debiased runs are kept.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from rmlens._base import needed_out, resolve_config
from rmlens._errors import InputError, RmlensNote, RmlensWarning
from rmlens._io import write_json
from rmlens.attribution import objective_bias
from rmlens.comparison._compare import compare
from rmlens.comparison._config import CompareConfig, MitigateConfig, OveroptimizeConfig
from rmlens.comparison._overoptimize import overoptimize
from rmlens.comparison._result import Comparison
from rmlens.experiment import ExperimentDir
from rmlens.memorization import AuditConfig, audit, default_trainer
from rmlens.progress import status
from rmlens.rewards.objectives import OBJECTIVES, BradleyTerry, objective_of


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
        objective = objective_of(name)
        if objective.frozen_weights and config.mode == "finetune" and (
            config.train.rm_kind == "implicit"
        ):
            notes.append(f"{name} left out: its loss weights come from an explicit head on "
                         "frozen features, and `rm` is implicit")  # fmt: skip
            continue
        if objective.group_column == "required" and column not in pairs:
            notes.append(f"{name} left out: no group column '{column}' (`dro_groups`)")
            continue
        kept.append(name)
    if not kept:
        raise InputError(f"`objectives`: none of {', '.join(objectives)} applies to this data")
    return kept, notes


def check_debias(config: AuditConfig, debias: Sequence[str]) -> None:
    """Refuse, before any training, a debiasing the audits will not support: the SAE
    debiasing projects directions out of the linear heads of a frozen audit.

    Parameters
    ----------
    config : AuditConfig
        The settings every audit shares.
    debias : sequence of str
        The training-free debiasings asked for (:func:`mitigate`'s ``debias``); only
        ``"sae"`` is checked.

    Raises
    ------
    InputError
        ``"sae"`` in ``debias`` with ``config.mode`` other than frozen, or with
        ``config.head.head`` other than linear or logistic.
    """
    if "sae" not in debias:
        return
    if config.mode != "frozen":
        raise InputError(f"`debias` sae projects SAE latents out of a frozen audit's heads, and "
                         f"`mode` is {config.mode}; use `mode` frozen or leave out `debias`")
    if config.head.head not in ("linear", "logistic"):
        raise InputError(f"`debias` sae projects SAE latents out of a linear head's weights, "
                         f"and `head` is {config.head.head}; use `head` linear or logistic, or "
                         "leave out `debias`")


def mitigate(
    pairs: pd.DataFrame,
    config: AuditConfig | None = None,
    *,
    out: str | Path | None = None,
    objectives: Sequence[str] = OBJECTIVES,
    debias: Sequence[str] = (),
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
    debias : sequence of str, default=()
        Training-free debiasings of the ``bt`` audit, compared beside the objectives.
        ``"sae"``: after the audits, fit the SAE lens on ``out/bt`` (:func:`rmlens.sae.fit_sae`,
        default settings; a saved one is reused) and project its shortcut latents out of
        every run's head (:func:`rmlens.sae.debias`, default ``DebiasConfig``) into
        ``out/sae_debias``, labelled ``sae_debias`` in the comparison and the best-of-n
        curves. Needs ``bt`` among ``objectives``, ``mode`` frozen and a linear or logistic
        head; refused before any training otherwise. Started again, the SAE and the
        finished debiased runs are kept.
    compare_config : CompareConfig, optional
        Options of the comparison; its labels are the objectives (and ``sae_debias``).
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

    Raises
    ------
    InputError
        An unknown objective, none that applies to the data; ``debias`` without ``bt``
        among ``objectives`` (a ``ParamError``), in finetune mode or with an MLP head.

    Examples
    --------
    >>> result = mitigate(pairs, out="mitigate", objectives=("bt", "poe"))  # doctest: +SKIP
    >>> result.wide()  # doctest: +SKIP
    >>> mitigate(pairs, out="m", objectives=("bt", "poe"), debias=("sae",))  # doctest: +SKIP
    """
    config = resolve_config("mitigate", AuditConfig, config, overrides).check()
    out = Path(needed_out("mitigate", out))
    kept, notes = usable_objectives(pairs, config, objectives)
    debias = tuple(dict.fromkeys(debias))
    if debias:  # known values, bt among the objectives (each known: usable_objectives)
        MitigateConfig(objectives=tuple(objectives), debias=debias).check()
    check_debias(config, debias)
    for note in notes:
        warnings.warn(note, RmlensNote, stacklevel=2)
    nested = "head" if config.mode == "frozen" else "train"
    trainer_config = getattr(config, nested)
    needs_bias = next((o for o in kept if objective_of(o).reads_bias), BradleyTerry.name)
    bias = objective_bias(pairs, trainer_config.replace(objective=needs_bias))
    write_json({"objectives": kept, "left_out": notes, "debias": list(debias),
                "audit": config.to_dict()}, out / "mitigate.json")  # fmt: skip
    backbone, codes = None, {}
    for name in kept:
        run_config = config.replace(**{nested: trainer_config.replace(objective=name)})
        trainer = default_trainer(run_config, bias)
        if config.mode == "frozen":
            trainer.backbone = backbone  # loaded by the first audit, shared by the rest
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always", RmlensWarning)
            audit(pairs, run_config, out=out / name, trainer=trainer, bias=bias, quiet=quiet)
        codes[name] = _audit_codes(out / name, said)
        backbone = getattr(trainer, "backbone_", None)
    _say_codes(codes, out)
    labels, dirs = list(kept), [out / name for name in kept]
    if "sae" in debias:
        dirs.append(debias_sae(out, quiet=quiet))
        labels.append(dirs[-1].name)
    compare_config = (compare_config or CompareConfig()).replace(labels=tuple(labels))
    result = compare(dirs, compare_config, out=out, quiet=quiet)
    if candidates is not None:
        oo_config = (overoptimize_config or OveroptimizeConfig()).replace(
            labels=tuple(labels), seed=compare_config.seed, n_boot=compare_config.n_boot,
            level=compare_config.level)  # fmt: skip
        result.overoptimization = overoptimize(dirs, candidates, oo_config, out=out, quiet=quiet)
        result.files += result.overoptimization.files
    return result


def debias_sae(out: Path, *, quiet: bool = False) -> Path:
    """The SAE lens on ``out/bt`` (reused when saved with the same settings), then its
    shortcut latents projected out of every bt run's head into ``out/sae_debias`` (finished
    runs kept); returns that directory."""
    # lazy: torch loads only when this runs
    from rmlens.sae import DEBIAS_OBJECTIVE, debias, fit_sae

    source, target = out / "bt", out / DEBIAS_OBJECTIVE
    if not quiet:
        status(f"debias sae: fitting the SAE lens on {source}, then projecting its shortcut "
               f"latents out of every run's head into {target}")
    fit_sae(source, quiet=quiet)
    debias(source, out=target, quiet=quiet)
    return target


def _audit_codes(folder: Path, said: list) -> list[str]:
    """The codes of an audit's warnings (its ``summary.json``), which :func:`_say_codes`
    says for all the audits in one line; every other warning said while it ran (notes,
    the trainer's, the loader's) is said again as it came."""
    summary = ExperimentDir(folder).read_json("summary.json", required=False) or {}
    recorded = summary.get("warnings") or []
    words = {w.get("message") for w in recorded}
    for w in said:
        if not (issubclass(w.category, RmlensWarning) and str(w.message) in words):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return [w.get("code", "?") for w in recorded if w.get("message") in
            {str(x.message) for x in said}]  # fmt: skip


def _say_codes(codes: dict[str, list[str]], out: Path) -> None:
    """One warning naming every audit's warning codes (those of all audits first), so
    eight audits do not print eight screens; their words are in each audit's summary.json
    and report."""
    named = {name: c for name, c in codes.items() if c}
    if not named:
        return
    common = [c for c in next(iter(named.values())) if all(c in v for v in codes.values())]
    parts = [f"all {len(codes)}: {', '.join(common)}"] if common else []
    parts += [f"{name}: {', '.join(c for c in v if c not in common)}"
              for name, v in named.items() if any(c not in common for c in v)]  # fmt: skip
    warnings.warn(f"the audits' warnings (in words in {out}/<objective>/summary.json and "
                  f"report.html): {'; '.join(parts)}", RmlensWarning, stacklevel=3)
