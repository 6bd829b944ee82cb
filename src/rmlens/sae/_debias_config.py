"""Settings of training-free debiasing through the SAE lens: light, so the command line builds
its options fast (``rmlens sae DIR --out DEBIASED_DIR``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields

from rmlens._params import Config, ParamError

AUTO = "auto"
RULE_FIELDS = ("min_correlation", "weight_quantile", "sign_agreement", "shortcut_features")
_LATENTS = re.compile(r"^\s*\d+\s*(,\s*\d+\s*)*$")


def _suppress(x) -> bool:
    return isinstance(x, str) and (x.strip() == AUTO or bool(_LATENTS.match(x)))


def _fraction(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x <= 1


def _quantile(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x < 1


@dataclass
class DebiasConfig(Config):
    """Training-free debiasing of a frozen audit's heads through its SAE (after SteerRM).

    The latents in ``suppress`` have their decoder directions projected out of the features
    before each run's head (``rmlens sae DIR --out DEBIASED_DIR``, :func:`rmlens.sae.debias`);
    ``auto`` picks them by the rule of :func:`rmlens.sae.shortcut_latents`, whose thresholds
    are the other fields (they apply to ``auto`` only).
    """

    suppress: str = field(
        default=AUTO,
        metadata={"help": "Latents to suppress with --out: `auto` (shortcut latents by the "
                          "rule: tied to a shortcut feature, weighted by the heads, stable "
                          "across split halves) or latent numbers, e.g. 12,40."},
    )
    min_correlation: float = field(
        default=0.5,
        metadata={"help": "auto: least |Spearman| of a latent with a shortcut feature over "
                          "the responses (its name card's correlates): 0.5, a strong tie "
                          "(a weaker one leaves more of the latent to other things, quality "
                          "among them)."},
    )
    weight_quantile: float = field(
        default=0.9,
        metadata={"help": "auto: a latent's |mean head weight| over the runs must reach this "
                          "quantile over the active latents (0.9: the top 10%), and so must "
                          "its mean in each split half of the runs."},
    )
    sign_agreement: float = field(
        default=0.8,
        metadata={"help": "auto: least share of runs whose head weight along the latent has "
                          "the sign of the mean."},
    )
    shortcut_features: tuple[str, ...] = field(
        default=("len_*", "model=*", "refusal"),
        metadata={"help": "auto: the shortcut features of the name cards (shell patterns): "
                          "length, model identity (model=<name>: a signature phrase shows "
                          "here), refusal."},
    )

    _constraints = {
        "suppress": (_suppress, "'auto' or latent numbers separated by commas (12,40)"),
        "min_correlation": (_fraction, "a float in (0, 1]"),
        "weight_quantile": (_quantile, "a float in [0, 1)"),
        "sign_agreement": (_fraction, "a float in (0, 1]"),
        "shortcut_features": (lambda x: isinstance(x, tuple) and len(x) > 0
                              and all(isinstance(p, str) and p.strip() for p in x),
                              "a non-empty tuple of feature names or patterns"),
    }

    def _check_more(self) -> None:
        if self.suppress.strip() == AUTO:
            return
        defaults = {f.name: f.default for f in fields(self)}
        for name in RULE_FIELDS:
            if getattr(self, name) != defaults[name]:
                raise ParamError(name, type(self).__name__, "left at its default with latent "
                                 "numbers in `suppress` (it sets the `auto` rule)",
                                 getattr(self, name))

    @property
    def latents(self) -> list[int] | None:
        """The latent numbers of ``suppress``, in order and once each; None for ``auto``."""
        if self.suppress.strip() == AUTO:
            return None
        return list(dict.fromkeys(int(v) for v in self.suppress.split(",")))
