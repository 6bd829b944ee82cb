"""rmlens.data: the canonical pair table, loaders, validation, synthetic data (DESIGN.md 1)."""

from rmlens.data._load import (
    find_problems,
    load_pairs,
    load_rankings,
    save_pairs,
    validate_pairs,
)
from rmlens.data._schema import CORE_COLUMNS, parse_column_map, to_text
from rmlens.data._summary import inspect_pairs, summarize
from rmlens.data._synth import MECHANISMS, SynthConfig, synthesize

__all__ = [
    "CORE_COLUMNS",
    "MECHANISMS",
    "SynthConfig",
    "find_problems",
    "inspect_pairs",
    "load_pairs",
    "load_rankings",
    "parse_column_map",
    "save_pairs",
    "summarize",
    "synthesize",
    "to_text",
    "validate_pairs",
]
