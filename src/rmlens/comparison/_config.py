"""Options of ``rmlens compare``: light, so the command line builds its flags fast."""

from __future__ import annotations

from dataclasses import dataclass, field

from rmlens._params import Config, ParamError, non_negative_int, positive_int
from rmlens.rewards import OBJECTIVE_NAMES
from rmlens.rewards.objectives import BradleyTerry


def _level(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x < 1


@dataclass
class CompareConfig(Config):
    """Options of :func:`rmlens.comparison.compare`.

    Attributes
    ----------
    labels : tuple of str, default=()
        One name per audit, in the order given (default: each directory's name).
    groups : str or None, default=None
        Column of the memorization table whose values are the groups of the worst-group
        accuracy (default: each audit's own grouping, the ``group`` column).
    min_group_pairs : int, default=20
        A group counts for the worst-group accuracy when it holds at least this many
        held-out pairs; a slice or margin figure on fewer pairs is shown greyed, without
        interval, and never judged.
    n_boot : int, default=1000
        Bootstrap resamples of the runs (0: no intervals).
    level : float, default=0.95
        Coverage of the percentile intervals.
    seed : int, default=0
        Seed of the bootstrap, the probe sample and the SHAP regressors.
    shap : bool, default=True
        Fit the attribution regressors (LightGBM, TreeSHAP) to TG and CM and report the
        share of importance that shortcut features take.
    probes : bool, default=True
        Run the shortcut probes (loads each audit's backbone and scores edited responses).
    probe_pairs : int, default=200
        Pairs the probes edit: a seeded sample of the pairs all audits share (0: all).
    length_calibration : bool, default=True
        Add a reference row "<label> + length calibration" for each Bradley-Terry audit:
        its run scores with a LOWESS fit of reward on length subtracted
        (``rmlens.evaluation.calibrate_length``), when that function is installed.
    device : str, default="auto"
        Torch device of the probes' scoring.
    """

    labels: tuple[str, ...] = field(
        default=(),
        metadata={"help": "Names of the audits, in order.",
                  "unset": "the directories' names"},
    )  # fmt: skip
    groups: str | None = field(
        default=None,
        metadata={"help": "Column of the groups for the worst-group accuracy.",
                  "unset": "each audit's grouping column"},
    )  # fmt: skip
    min_group_pairs: int = field(
        default=20,
        metadata={"help": "Held-out pairs a group needs to count for the worst-group accuracy, "
                  "and a slice or margin figure needs to be judged (fewer: greyed)."},
    )
    n_boot: int = field(
        default=1000, metadata={"help": "Bootstrap resamples of the runs (0: no intervals)."}
    )
    level: float = field(default=0.95, metadata={"help": "Coverage of the intervals."})
    seed: int = field(
        default=0, metadata={"help": "Seed of the bootstrap, the probe sample and SHAP."}
    )
    shap: bool = field(
        default=True,
        metadata={"help": "Share of SHAP importance that shortcut features take in the TG and "
                  "CM regressions (LightGBM fits; a few seconds per audit)."},
    )  # fmt: skip
    probes: bool = field(
        default=True,
        metadata={"help": "Shortcut-probe flip rates (loads each audit's backbone)."},
    )
    probe_pairs: int = field(
        default=200,
        metadata={"help": "Pairs the probes edit: a seeded sample of the shared pairs (0: all)."},
    )
    length_calibration: bool = field(
        default=True,
        metadata={"help": "A reference row per Bradley-Terry audit with post-hoc length "
                  "calibration of its run scores."},
    )  # fmt: skip
    device: str = field(
        default="auto", metadata={"help": "Torch device of the probes (auto, cpu, cuda, ...)."}
    )

    _constraints = {
        "labels": (
            lambda t: isinstance(t, tuple) and all(isinstance(x, str) and x.strip() for x in t),
            "a tuple of non-empty names",
        ),
        "groups": (lambda x: x is None or (isinstance(x, str) and x != ""), "None or a column"),
        "min_group_pairs": (positive_int, "an int > 0"),
        "n_boot": (non_negative_int, "an int >= 0"),
        "level": (_level, "a float in (0, 1)"),
        "seed": (non_negative_int, "an int >= 0"),
        "shap": (True, False),
        "probes": (True, False),
        "probe_pairs": (non_negative_int, "an int >= 0"),
        "length_calibration": (True, False),
        "device": (lambda x: isinstance(x, str) and x != "", "a device name"),
    }

    def _check_more(self) -> None:
        if len(set(self.labels)) != len(self.labels):
            twice = sorted({x for x in self.labels if self.labels.count(x) > 1})
            raise ParamError("labels", type(self).__name__,
                             f"distinct names ({', '.join(twice)} given twice)", self.labels)


DEBIAS_METHODS = ("sae",)


@dataclass
class MitigateConfig(Config):
    """Which training objectives ``rmlens mitigate`` audits (one audit each), and which
    training-free debiasings of the Bradley-Terry audit it adds as reference rows.

    Attributes
    ----------
    objectives : tuple of str, default=all objectives
        The objectives to audit, one experiment directory each.
    debias : tuple of str, default=()
        Training-free debiasings of the ``bt`` audit, each an experiment directory compared
        beside the objectives: ``sae`` fits the SAE lens on OUT/bt (``rmlens sae``) and
        projects its shortcut latents out of every run's head into OUT/sae_debias. Needs
        ``bt`` among ``objectives``, and a frozen audit with a linear or logistic head.
    """

    objectives: tuple[str, ...] = field(
        default=OBJECTIVE_NAMES,
        metadata={"help": "Objectives to audit, one experiment directory each (group_dro is "
                  "left out, with a note, when the data has no group column)."},
    )  # fmt: skip
    debias: tuple[str, ...] = field(
        default=(),
        metadata={"help": "Training-free debiasings of the bt audit, compared beside the "
                  "objectives: sae (the SAE lens on OUT/bt, its shortcut latents projected "
                  "out of every run's head into OUT/sae_debias; frozen mode, a linear or "
                  "logistic head, bt among --objectives)."},
    )  # fmt: skip

    _constraints = {
        "objectives": (
            lambda t: isinstance(t, tuple) and len(t) > 0 and all(x in OBJECTIVE_NAMES for x in t),
            f"a non-empty tuple of objectives among {', '.join(OBJECTIVE_NAMES)}",
        ),
        "debias": (
            lambda t: isinstance(t, tuple) and all(x in DEBIAS_METHODS for x in t),
            f"a tuple of debiasings among {', '.join(DEBIAS_METHODS)} (or empty)",
        ),
    }

    def _check_more(self) -> None:
        if self.debias and BradleyTerry.name not in self.objectives:
            raise ParamError("objectives", type(self).__name__,
                             f"a tuple holding bt with `debias` {','.join(self.debias)}, which "
                             "debiases the Bradley-Terry audit OUT/bt (add bt, or leave out "
                             "`debias`)", self.objectives)  # fmt: skip

    # What mitigate sets in the configs it builds (so not options of `rmlens mitigate`): in
    # the audit, the trainer's objective (each of `objectives` in turn) and no target
    # reliability (one plan for every objective); in the comparison and the best-of-n
    # curves, the labels (the objectives), the audit's seed and n_boot (and the
    # comparison's level), and the default device (`device` is the fine-tuned audits').
    _owned = {
        "audit": ("target_reliability", "max_runs", "head.objective", "train.objective"),
        "compare": ("labels", "seed", "n_boot", "device"),
        "overoptimize": ("labels", "seed", "n_boot", "level", "device"),
    }


ENSEMBLES = ("mean", "min", "uwo")


@dataclass
class OveroptimizeConfig(Config):
    """Options of :func:`rmlens.comparison.overoptimize`: best-of-n against a gold reward.

    Attributes
    ----------
    labels : tuple of str, default=()
        One name per audit, in the order given (default: each directory's name).
    ns : tuple of int, default=()
        The n of best-of-n (default: 1, 2, 4, ... up to N, and N).
    ensembles : tuple of str, default=("mean", "min", "uwo")
        Ensembles of each audit's runs, on rewards standardized per run over the pool: the
        mean, the worst case (min) and the uncertainty-weighted mean - lambda * var (Coste
        et al. 2024); () for none.
    uwo_lambda : float, default=0.5
        The lambda of ``uwo``, in units of the standardized reward.
    n_boot : int, default=1000
        Bootstrap resamples of the runs and the prompts together (0: no intervals).
    level : float, default=0.95
        Coverage of the percentile intervals.
    seed : int, default=0
        Seed of the bootstrap.
    device : str, default="auto"
        Torch device that scores the candidates.
    """

    labels: tuple[str, ...] = field(
        default=(),
        metadata={"help": "Names of the audits, in order.",
                  "unset": "the directories' names"},
    )  # fmt: skip
    ns: tuple[int, ...] = field(
        default=(),
        metadata={"help": "The n of best-of-n.", "unset": "1, 2, 4, ... up to N, and N"},
    )
    ensembles: tuple[str, ...] = field(
        default=ENSEMBLES,
        metadata={"help": "Ensembles of each audit's runs (standardized rewards): mean, min, "
                  "uwo (mean - lambda var); none: an empty value."},
    )  # fmt: skip
    uwo_lambda: float = field(
        default=0.5, metadata={"help": "Lambda of the uncertainty-weighted ensemble."}
    )
    n_boot: int = field(
        default=1000,
        metadata={"help": "Bootstrap resamples of runs and prompts together (0: no intervals)."},
    )
    level: float = field(default=0.95, metadata={"help": "Coverage of the intervals."})
    seed: int = field(default=0, metadata={"help": "Seed of the bootstrap."})
    device: str = field(
        default="auto", metadata={"help": "Torch device that scores the candidates."}
    )

    _constraints = {
        "labels": CompareConfig._constraints["labels"],
        "ns": (
            lambda t: isinstance(t, tuple) and all(positive_int(x) for x in t),
            "a tuple of ints >= 1",
        ),
        "ensembles": (
            lambda t: isinstance(t, tuple) and all(x in ENSEMBLES for x in t),
            f"a tuple of ensembles among {', '.join(ENSEMBLES)}",
        ),
        "uwo_lambda": (
            lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0,
            "a float >= 0",
        ),
        "n_boot": (non_negative_int, "an int >= 0"),
        "level": (_level, "a float in (0, 1)"),
        "seed": (non_negative_int, "an int >= 0"),
        "device": (lambda x: isinstance(x, str) and x != "", "a device name"),
    }

    _check_more = CompareConfig._check_more
