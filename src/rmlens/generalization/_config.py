"""Configuration of the explicit vs implicit comparison (DESIGN.md section 5)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rmlens._params import Config, Nested, positive_int
from rmlens.rewards import TrainConfig


def default_train() -> TrainConfig:
    """Both RMs: LoRA on SmolLM2-135M, sized for a CPU (a GPU affords more): 2 epochs at one
    rate on every training pair, the regime the EX vs IM findings were measured in."""
    return TrainConfig(
        model="smollm2-135m",
        epochs=2,
        batch_size=8,
        lr=5e-4,
        lr_grid=(),
        eval_fraction=0.0,
        patience=0,
        head_lr=2e-3,
        max_length=128,
        beta=0.1,
    )


@dataclass
class GeneralizeConfig(Config):
    """Train an EX-RM and an IM-RM on the same data and backbone; evaluate both under shifts.

    ``train`` holds everything about training, shared by both RMs (its ``rm`` is set to
    explicit and implicit in turn).
    """

    task: str | None = field(
        default=None,
        metadata={
            "help": "Built-in task instead of --data: persona (yes/no agreement "
            "statements, DESIGN.md section 5)."
        },
    )
    shifts: str = field(
        default="synonyms,casing,punctuation,whitespace",
        metadata={
            "help": "Built-in meaning-preserving rewrites of the held-out responses "
            "(comma-separated, or none)."
        },
    )
    domain_col: str | None = field(
        default=None, metadata={"help": "Column naming each pair's domain (domain shift)."}
    )
    train_domains: str | None = field(
        default=None,
        metadata={"help": "Comma-separated domains to train on; the others test the shift."},
    )
    test_fraction: float = field(
        default=0.2,
        metadata={"help": "Share of prompts (persona: statements) held out in distribution."},
    )
    n_statements: int = field(
        default=300, metadata={"help": "Persona task: statements built from templates."}
    )
    train: TrainConfig = field(default_factory=default_train)

    # generalize sets `rm_kind` (explicit, then implicit) and trains one RM on pairs each
    # time, at one rate (`lr_grid` empty); `influence` and `influence_blocks` are read by an
    # audit's runs only, never by `fit`
    _nested = {"train": Nested(owned=("rm_kind", "ensemble", "loss", "save_steps", "influence",
                                      "influence_blocks", "lr_grid"))}
    _constraints = {
        "task": (None, "persona"),
        "shifts": (lambda x: isinstance(x, str), "comma-separated shift names, or none"),
        "test_fraction": (
            lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x < 1,
            "a float in (0, 1)",
        ),
        "n_statements": (lambda x: positive_int(x) and x >= 10, "an int >= 10"),
    }
