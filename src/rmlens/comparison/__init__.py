"""rmlens.comparison: audits side by side (objectives, backbones, heads, modes, plans), with
bootstrap intervals over runs and the agreement of their TM, TG, CM rankings; best-of-n
overoptimization of their RMs against a gold reward. The metrics a comparison reports (their
names, families and labels, and how a figure is written) are in
``rmlens.comparison.metrics``."""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_config": ["CompareConfig", "MitigateConfig", "OveroptimizeConfig"],
        "_compare": ["compare"],
        "_result": ["Comparison"],
        "_audit": ["Audit", "load_audit"],
        "_mitigate": ["check_debias", "mitigate"],
        "_overoptimize": ["Overoptimization", "overoptimize"],
    },
)
