"""Configuration of the candidate pools: light, so the command line builds its options fast."""

from __future__ import annotations

from dataclasses import dataclass, field

from rmlens._params import Config, non_negative_int, positive_int
from rmlens.data._synth_config import SynthConfig

POLICIES = ("independent", "anticorrelated")


def _chance(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 1


@dataclass
class CandidatesConfig(Config):
    """Size, seed and policy of a best-of-n candidate pool of the synthetic world.

    Every prompt gets ``n_responses`` candidates drawn from one "policy": a quality level
    (0 bad, 1 poor, 2 mediocre, 3 good, with chances 0.15, 0.25, 0.30, 0.30), then each
    shortcut on its own chance: padding sentences, the signature model's opening phrase,
    a closing taste sentence. ``policy="independent"`` draws the shortcuts whatever the
    quality; ``"anticorrelated"`` makes them likelier the worse the response (chance
    proportional to 3.5 - level, the same share over the pool), so that an RM that rewards
    them picks worse answers as n grows.
    """

    n_prompts: int = field(
        default=200, metadata={"help": "Prompts P of the pool.", "alias": "--prompts"}
    )
    n_responses: int = field(
        default=256,
        metadata={"help": "Candidate responses N per prompt (with --from: prompts with fewer "
                  "are left out; default there: the most common number of distinct responses "
                  "a prompt has).", "alias": "--responses"},
    )
    seed: int = field(default=0, metadata={"help": "Random seed; same seed, same pool."})
    policy: str = field(
        default="independent",
        metadata={"help": "How shortcuts go with quality: independent or anticorrelated "
                  "(verbose, signed and taste-ending answers more often poor)."},
    )  # fmt: skip
    padding: float = field(
        default=0.3, metadata={"help": "Share of candidates padded with filler sentences."}
    )
    signature: float = field(
        default=0.15,
        metadata={"help": "Share of candidates opening with the signature model's phrase."},
    )
    taste: float = field(
        default=0.3, metadata={"help": "Share of candidates ending with a taste sentence."}
    )
    n_users: int = field(
        default=SynthConfig.n_users,
        metadata={"help": "Annotators of the synthetic pairs the RMs saw: their taste "
                  "sentences are the ones candidates end with.", "alias": "--users"},
    )  # fmt: skip
    signature_model: str = field(
        default=SynthConfig.signature_model,
        metadata={"help": "The signature model of the synthetic pairs (the `model` field of "
                  "signed candidates)."},
    )  # fmt: skip
    signature_phrase: str = field(
        default=SynthConfig.signature_phrase,
        metadata={"help": "The signature model's opening phrase, as in the synthetic pairs."},
    )

    _constraints = {
        "n_prompts": (positive_int, "an int >= 1"),
        "n_responses": (lambda x: positive_int(x) and x >= 2, "an int >= 2"),
        "seed": (non_negative_int, "an int >= 0"),
        "policy": (lambda x: x in POLICIES, f"one of {', '.join(POLICIES)}"),
        "padding": (_chance, "a float in [0, 1]"),
        "signature": (_chance, "a float in [0, 1]"),
        "taste": (_chance, "a float in [0, 1]"),
        "n_users": (positive_int, "an int >= 1"),
        "signature_model": (lambda x: isinstance(x, str) and x.strip() != "", "non-empty text"),
        "signature_phrase": (lambda x: isinstance(x, str) and x.strip() != "", "non-empty text"),
    }
