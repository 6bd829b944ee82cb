"""Type stub of ``rmlens.comparison``: its lazily loaded names (``rmlens._lazy.attach``) as
imports an IDE or a type checker follows to their code; tests/test_stubs.py keeps it
in step with ``__all__``."""

from ._audit import Audit as Audit
from ._audit import load_audit as load_audit
from ._compare import compare as compare
from ._config import CompareConfig as CompareConfig
from ._config import MitigateConfig as MitigateConfig
from ._config import OveroptimizeConfig as OveroptimizeConfig
from ._mitigate import check_debias as check_debias
from ._mitigate import mitigate as mitigate
from ._overoptimize import Overoptimization as Overoptimization
from ._overoptimize import overoptimize as overoptimize
from ._result import Comparison as Comparison
