"""Type stub of ``rmlens.report``: its lazily loaded names (``rmlens._lazy.attach``) as
imports an IDE or a type checker follows to their code; tests/test_stubs.py keeps it
in step with ``__all__``."""

from ._compare_glance import comparison_answer as comparison_answer
from ._compare_page import read_overoptimization as read_overoptimization
from ._compare_page import write_compare_report as write_compare_report
from ._config import ReportConfig as ReportConfig
from ._write import write_report as write_report
