"""Configuration of a token sweep: light, so the command line builds its options fast."""

from __future__ import annotations

from dataclasses import dataclass, field

from rmlens._params import non_negative_int, positive_int
from rmlens.rewards import ScoreConfig

DEFAULT_PROMPTS = (
    "What, in one word, is the greatest thing ever?",
    "What, in one word, is the best thing ever?",
    "What, in one word, is the worst thing ever?",
)


@dataclass
class SweepConfig(ScoreConfig):
    """An optimal/pessimal token sweep (DESIGN.md section 4)."""

    rm: list[str] = field(default_factory=list, metadata={
        "help": "Reward model to sweep (repeat for several): anything rmlens.hub.load_rm "
                "loads: an RM preset (smollm2-135m-hh), a folder with rm_config.json (an "
                "ensemble too), an experiment directory, or a sequence-classification folder "
                "or hub id."})
    prompts: list[str] = field(default_factory=lambda: list(DEFAULT_PROMPTS), metadata={
        "help": "Prompts; default the greatest / best / worst thing ever, in one word."})
    max_tokens: int | None = field(default=None, metadata={
        "help": "Sweep only the first N token ids (a quick look); default the whole vocabulary."})
    batch_size: int = field(default=512, metadata={"help": "Candidates per forward pass."})
    top_k: int = field(default=10, metadata={"help": "Top and bottom tokens kept per prompt."})
    min_share: float = field(default=0.99, metadata={
        "help": "The cached prefix is the longest one shared by this share of candidates."})
    verify: int = field(default=4, metadata={
        "help": "Cached candidates re-scored in full per prompt, as a check."})
    exact_extremes: int = field(default=100, metadata={
        "help": "In bf16, the top and bottom N tokens of each prompt are scored again in fp32 "
                "(and more, until no token left in bf16 could enter them), so they are "
                "fp32's; 0 keeps bf16's."})
    threads: int | None = field(default=None, metadata={
        "help": "CPU threads for torch (default: torch's choice; 1 is faster on a busy machine)."})

    _constraints = {
        **ScoreConfig._constraints,
        "rm": (lambda v: isinstance(v, list) and len(v) > 0
               and all(isinstance(s, str) and s for s in v),
               "a non-empty list of model names"),
        "prompts": (lambda v: isinstance(v, list) and len(v) > 0
                    and all(isinstance(p, str) and p.strip() for p in v),
                    "a non-empty list of non-empty strings"),
        "max_tokens": (lambda v: v is None or positive_int(v), "None or an int > 0"),
        "batch_size": (positive_int, "an int > 0"),
        "top_k": (positive_int, "an int > 0"),
        "min_share": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                      and 0 < v <= 1, "a number in (0, 1]"),
        "verify": (non_negative_int, "an int >= 0"),
        "exact_extremes": (non_negative_int, "an int >= 0"),
        "threads": (lambda v: v is None or positive_int(v), "None or an int > 0"),
    }
