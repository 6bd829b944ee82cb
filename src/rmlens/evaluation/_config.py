"""Configuration of ``evaluate``: light, so the command line builds its options fast."""

from __future__ import annotations

from dataclasses import dataclass, field

from rmlens._params import non_negative_int, positive, unit_interval
from rmlens.rewards import ScoreConfig

POSTHOC_METHODS = ("length",)
LOWESS_FRAC = 0.5  # Huang et al. 2024's setting; statsmodels' own default is 2/3
PROBE_PAIRS = 200  # as `compare`; the 8 probes encode up to 16 edited texts per pair


@dataclass
class EvaluateConfig(ScoreConfig):
    """How ``evaluate`` measures an RM on a pair set."""

    probes: str = field(
        default="all", metadata={"help": "Shortcut probes: all, none, or NAME,NAME,..."}
    )
    by: list[str] = field(
        default_factory=list,
        metadata={"help": "Columns to break accuracy down by (repeat); 'subset' is always used."},
    )
    n_bins: int = field(
        default=10, metadata={"help": "Equal-mass bins of the ECE.", "alias": "--bins"}
    )
    calibrate_frac: float = field(
        default=0.0,
        metadata={"help": "Share of pairs to fit a temperature on (0: none); ECE before/after "
                  "is measured on the rest."},
    )  # fmt: skip
    probe_pairs: int | str = field(
        default=PROBE_PAIRS,
        metadata={"help": "Pairs the probes edit: a seeded sample of this many, or all (0 "
                  "too); each probe encodes up to 2 edited texts per pair."},
    )  # fmt: skip
    seed: int = field(default=0, metadata={"help": "Seed of the probe sample and the split."})
    calibrate: str | None = field(
        default=None,
        metadata={"help": "Post-hoc reward calibration, applied before every metric and probe: "
                  "length (subtract a LOWESS fit of reward on response length in characters, "
                  "Huang et al. 2024).", "unset": "none"},
    )  # fmt: skip
    lowess_frac: float = field(
        default=LOWESS_FRAC,
        metadata={"help": "--calibrate length: share of all responses in each LOWESS local fit."},
    )

    _constraints = {
        **ScoreConfig._constraints,
        "by": (lambda x: isinstance(x, list) and all(isinstance(c, str) for c in x),
               "a list of column names"),
        "n_bins": (lambda x: non_negative_int(x) and x >= 1, "an int >= 1"),
        "calibrate_frac": (unit_interval, "a float in [0, 1)"),
        "probe_pairs": (lambda x: x == "all" or non_negative_int(x), "an int >= 0 or 'all'"),
        "seed": (non_negative_int, "an int >= 0"),
        "calibrate": (lambda x: x is None or x in POSTHOC_METHODS,
                      " or ".join(map(repr, POSTHOC_METHODS)) + " or left unset"),
        "lowess_frac": (lambda x: positive(x) and x <= 1, "a float in (0, 1]"),
    }
