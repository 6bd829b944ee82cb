"""Experiment directories: the folder every command writes, and an audit's plan and runs.

:class:`ExperimentDir` is the general folder: its record (``config.json``), its tables, all
written atomically, and the one resume check. :class:`AuditDir` adds an audit's layout::

    DIR/config.json             the record: settings, data fingerprint, version
    DIR/plan.parquet            run, group, in_train, validation (an audit's run plan)
    DIR/runs/<run:03d>/         scores.parquet, rm/, and manifest.json written last
                                (or error.json for a run that failed for good)
    DIR/<table>.parquet|.json   the tables
"""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_changes": ["other_data", "shown", "with_defaults"],
        "_folder": ["RECORD", "ExperimentDir", "UnusableFile"],
        "_runs": ["ERROR", "MANIFEST", "PLAN", "SCORES", "AuditDir"],
    },
)
