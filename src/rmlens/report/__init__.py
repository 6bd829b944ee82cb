"""rmlens.report: the self-contained HTML report of an experiment directory."""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_compare_glance": ["comparison_answer"],
        "_compare_page": ["read_overoptimization", "write_compare_report"],
        "_config": ["ReportConfig"],
        "_write": ["write_report"],
    },
)
