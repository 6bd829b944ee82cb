"""Type stub of ``rmlens.attribution``: its lazily loaded names (``rmlens._lazy.attach``) as
imports an IDE or a type checker follows to their code; tests/test_stubs.py keeps it
in step with ``__all__``."""

from ._attribute import attribute as attribute
from ._attribute import attribution_warnings as attribution_warnings
from ._attribute import fit_record as fit_record
from ._attribute import stability_record as stability_record
from ._attributor import Attributor as Attributor
from ._attributor import tm_tg_difference as tm_tg_difference
from ._bias import bias_features as bias_features
from ._bias import objective_bias as objective_bias
from ._config import REGRESSORS as REGRESSORS
from ._config import TARGETS as TARGETS
from ._config import AttributeConfig as AttributeConfig
from ._features import Feature as Feature
from ._features import list_features as list_features
from ._features import pair_features as pair_features
from ._features import register_feature as register_feature
from ._features import unregister_feature as unregister_feature
from ._informative import MEANINGLESS as MEANINGLESS
from ._informative import R2_FLOOR as R2_FLOOR
from ._informative import fit_warnings as fit_warnings
from ._informative import informative as informative
from ._informative import informative_column as informative_column
from ._informative import not_informative as not_informative
from ._stability import ABOVE_CHANCE as ABOVE_CHANCE
from ._stability import WARN_BELOW as WARN_BELOW
from ._stability import stability_warnings as stability_warnings
