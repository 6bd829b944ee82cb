"""Type stub of ``rmlens.backbones``: its lazily loaded names (``rmlens._lazy.attach``) as
imports an IDE or a type checker follows to their code; tests/test_stubs.py keeps it
in step with ``__all__``."""

from ._attention import FLAT_ENCODERS as FLAT_ENCODERS
from ._attention import PLAIN_ATTENTION as PLAIN_ATTENTION
from ._attention import attention_mode as attention_mode
from ._attention import flat_encoder as flat_encoder
from ._attention import plain_attention as plain_attention
from ._cache import EmbeddingCache as EmbeddingCache
from ._featurize import PairFeatures as PairFeatures
from ._featurize import collate as collate
from ._featurize import encode_ids as encode_ids
from ._featurize import encode_texts as encode_texts
from ._featurize import featurize as featurize
from ._featurize import pool as pool
from ._featurize import position_ids as position_ids
from ._formats import FORMAT_CONSTRAINT as FORMAT_CONSTRAINT
from ._formats import FORMATS as FORMATS
from ._formats import RESOLVED as RESOLVED
from ._formats import format_field as format_field
from ._formats import resolve_format as resolve_format
from ._formats import truncation_message as truncation_message
from ._formats import truncation_of as truncation_of
from ._formats import warn_truncation as warn_truncation
from ._load import Backbone as Backbone
from ._load import default_max_length as default_max_length
from ._load import is_causal as is_causal
from ._load import load_backbone as load_backbone
from ._load import model_identity as model_identity
from ._presets import PRESETS as PRESETS
from ._presets import check_base as check_base
from ._presets import check_hub_id as check_hub_id
from ._presets import portable_name as portable_name
from ._presets import resolve_model as resolve_model
from ._presets import unloadable as unloadable
from ._quiet import quiet_bars as quiet_bars
from ._tokenize import NO_LIMIT as NO_LIMIT
from ._tokenize import encode_pair as encode_pair
from ._tokenize import encode_pair_text as encode_pair_text
from ._tokenize import format_or_default as format_or_default
from ._tokenize import pair_encoding as pair_encoding
from ._tokenize import pair_kept as pair_kept
from ._tokenize import pairs_truncation as pairs_truncation
from ._tokenize import prepare_tokenizer as prepare_tokenizer
from ._tokenize import prompt_messages as prompt_messages
