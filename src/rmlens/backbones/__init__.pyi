"""Type stub of ``rmlens.backbones``: its lazily loaded names (``rmlens._lazy.attach``) as
imports an IDE or a type checker follows to their code; tests/test_stubs.py keeps it
in step with ``__all__``."""

from ._cache import EmbeddingCache as EmbeddingCache
from ._featurize import PairFeatures as PairFeatures
from ._featurize import featurize as featurize
from ._formats import FORMATS as FORMATS
from ._formats import warn_truncation as warn_truncation
from ._load import Backbone as Backbone
from ._load import load_backbone as load_backbone
from ._presets import PRESETS as PRESETS
from ._presets import resolve_model as resolve_model
