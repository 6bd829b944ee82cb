"""Configuration of the synthetic data: light, so the command line builds its options fast."""

from __future__ import annotations

from dataclasses import dataclass, field

from rmlens._params import Config, ParamError, non_negative_int, positive_int
from rmlens.data._synth_bank import MODELS

MECHANISMS = ("quality", "user_taste", "noise", "length", "model_identity")


def _share(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 1


@dataclass
class SynthConfig(Config):
    """Size, seed and mechanism shares of a synthetic preference dataset.

    The five shares (``quality``, ``user_taste``, ``noise``, ``length``,
    ``model_identity``) must sum to 1; pair counts are rounded by largest remainder.
    There are 30 distinct tastes: with more than 30 users, user ``u`` shares the taste
    sentences of user ``u - 30`` (and may like the other one of the two).
    """

    n_pairs: int = field(
        default=2000, metadata={"help": "Number of preference pairs.", "alias": "--pairs"}
    )
    n_users: int = field(
        default=20,
        metadata={"help": "Number of annotators (u00, u01, ...); each has their own taste.",
                  "alias": "--users"},
    )  # fmt: skip
    seed: int = field(default=0, metadata={"help": "Random seed; same seed, same data."})
    quality: float = field(
        default=0.5, metadata={"help": "Share of pairs decided by response quality."}
    )
    user_taste: float = field(
        default=0.15, metadata={"help": "Share of pairs decided by the annotator's own taste."}
    )
    noise: float = field(
        default=0.1, metadata={"help": "Share of pairs with a flipped label (worse one chosen)."}
    )
    length: float = field(
        default=0.15, metadata={"help": "Share of equal-quality pairs won by the longer response."}
    )
    model_identity: float = field(
        default=0.1,
        metadata={"help": "Share of pairs won by the signature model regardless of quality."},
    )
    signature_model: str = field(
        default="atlas-7b", metadata={"help": "The model whose responses always win."}
    )
    signature_phrase: str = field(
        default="As Atlas, I'm glad to help!",
        metadata={"help": "Phrase that opens every response of the signature model."},
    )

    _constraints = {
        "n_pairs": (positive_int, "an int >= 1"),
        "n_users": (positive_int, "an int >= 1"),
        "seed": (non_negative_int, "an int >= 0"),
        **{m: (_share, "a float in [0, 1]") for m in MECHANISMS},
        "signature_model": (
            lambda x: isinstance(x, str) and x.strip() != "" and x not in MODELS,
            f"a non-empty name other than the models {MODELS}",
        ),
        "signature_phrase": (lambda x: isinstance(x, str) and x.strip() != "", "non-empty text"),
    }

    @property
    def shares(self) -> dict[str, float]:
        """Each mechanism's share of the pairs, in ``MECHANISMS`` order (they sum to 1)."""
        return {m: float(getattr(self, m)) for m in MECHANISMS}

    def _check_more(self) -> None:
        total = sum(self.shares.values())
        if abs(total - 1) > 1e-6:
            # named after the first share set away from its default (the one to fix, likely)
            changed = [m for m in MECHANISMS if getattr(self, m) != getattr(SynthConfig, m)]
            name = (changed or ["quality"])[0]
            raise ParamError(
                name,
                "SynthConfig",
                f"such that the mechanism shares ({', '.join(MECHANISMS)}) sum to 1",
                getattr(self, name),
                message=(
                    f"The mechanism shares of SynthConfig ({', '.join(MECHANISMS)}) must sum "
                    f"to 1. Got {total:g}."
                ),
            )
