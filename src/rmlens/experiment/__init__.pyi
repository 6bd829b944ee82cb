"""Type stub of ``rmlens.experiment``: its lazily loaded names (``rmlens._lazy.attach``) as
imports an IDE or a type checker follows to their code; tests/test_stubs.py keeps it
in step with ``__all__``."""

from ._changes import other_data as other_data
from ._changes import shown as shown
from ._changes import with_defaults as with_defaults
from ._folder import RECORD as RECORD
from ._folder import ExperimentDir as ExperimentDir
from ._folder import UnusableFile as UnusableFile
from ._runs import ERROR as ERROR
from ._runs import MANIFEST as MANIFEST
from ._runs import PLAN as PLAN
from ._runs import SCORES as SCORES
from ._runs import AuditDir as AuditDir
