"""Type stub of ``rmlens.tokens``: its lazily loaded names (``rmlens._lazy.attach``) as
imports an IDE or a type checker follows to their code; tests/test_stubs.py keeps it
in step with ``__all__``."""

from ._adapt import EnsembleScorer as EnsembleScorer
from ._adapt import token_scorer as token_scorer
from ._config import DEFAULT_PROMPTS as DEFAULT_PROMPTS
from ._config import SweepConfig as SweepConfig
from ._run import read_prompts as read_prompts
from ._run import sweep as sweep
from ._scorers import HeadScorer as HeadScorer
from ._scorers import ImplicitScorer as ImplicitScorer
from ._scorers import PooledScorer as PooledScorer
from ._scorers import SeqClsScorer as SeqClsScorer
from ._scorers import TokenScorer as TokenScorer
from ._stats import agreement as agreement
from ._stats import framing as framing
from ._stats import frequency_bias as frequency_bias
from ._stats import moments as moments
from ._stats import rank_biased_overlap as rank_biased_overlap
from ._stats import top_bottom as top_bottom
from ._stats import word_features as word_features
from ._sweep import sweep_prompt as sweep_prompt
