"""rmlens.report: the self-contained HTML report of an experiment directory."""

from ._config import ReportConfig
from ._write import write_report

__all__ = ["ReportConfig", "write_report"]
