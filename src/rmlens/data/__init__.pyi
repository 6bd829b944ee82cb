"""Type stub of ``rmlens.data``: its lazily loaded names (``rmlens._lazy.attach``) as
imports an IDE or a type checker follows to their code; tests/test_stubs.py keeps it
in step with ``__all__``."""

from ._candidates import candidates_from_pairs as candidates_from_pairs
from ._candidates import generate_candidates as generate_candidates
from ._candidates import load_candidates as load_candidates
from ._candidates_config import CandidatesConfig as CandidatesConfig
from ._dedupe import DEDUPE as DEDUPE
from ._dedupe import dedupe_pairs as dedupe_pairs
from ._dedupe import first_copies as first_copies
from ._dedupe import join_groups as join_groups
from ._load import find_problems as find_problems
from ._load import load_pairs as load_pairs
from ._load import load_rankings as load_rankings
from ._load import save_pairs as save_pairs
from ._load import validate_pairs as validate_pairs
from ._schema import CORE_COLUMNS as CORE_COLUMNS
from ._summary import inspect_pairs as inspect_pairs
from ._summary import summarize as summarize
from ._synth import synthesize as synthesize
from ._synth_config import MECHANISMS as MECHANISMS
from ._synth_config import SynthConfig as SynthConfig
from .converters import convert as convert
from .converters import converter_names as converter_names
