"""Type stub of ``rmlens.data``: its lazily loaded names (``rmlens._lazy.attach``) as
imports an IDE or a type checker follows to their code; tests/test_stubs.py keeps it
in step with ``__all__``."""

from ._candidates import candidates_from_pairs as candidates_from_pairs
from ._candidates import candidates_from_policy as candidates_from_policy
from ._candidates import generate_candidates as generate_candidates
from ._candidates import load_candidates as load_candidates
from ._candidates_config import CandidatesConfig as CandidatesConfig
from ._dedupe import DEDUPE as DEDUPE
from ._dedupe import dedupe_pairs as dedupe_pairs
from ._dedupe import first_copies as first_copies
from ._dedupe import join_groups as join_groups
from ._fingerprint import FINGERPRINT_COLUMNS as FINGERPRINT_COLUMNS
from ._fingerprint import data_sha1 as data_sha1
from ._load import find_problems as find_problems
from ._load import load_pairs as load_pairs
from ._load import load_rankings as load_rankings
from ._load import save_pairs as save_pairs
from ._load import validate_pairs as validate_pairs
from ._schema import CORE_COLUMNS as CORE_COLUMNS
from ._schema import derive_id as derive_id
from ._schema import to_text as to_text
from ._schema import word_counts as word_counts
from ._summary import duplicates_across_groups as duplicates_across_groups
from ._summary import inspect_pairs as inspect_pairs
from ._summary import summarize as summarize
from ._synth import synthesize as synthesize
from ._synth_config import MECHANISMS as MECHANISMS
from ._synth_config import SynthConfig as SynthConfig
from ._text_features import BUILTIN_PAIR as BUILTIN_PAIR
from ._text_features import BUILTIN_RESPONSE as BUILTIN_RESPONSE
from ._text_features import Pairs as Pairs
from ._text_features import Texts as Texts
from .converters import convert as convert
from .converters import converter_names as converter_names
