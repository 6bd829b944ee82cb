"""rmlens.comparison: audits side by side (objectives, backbones, heads, modes, plans), with
bootstrap intervals over runs and the agreement of their TM, TG, CM rankings."""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_config": ["CompareConfig", "MitigateConfig"],
        "_compare": ["Comparison", "compare"],
        "_audit": ["Audit", "find_audits", "load_audit"],
        "_agreement": ["ceiling", "spearman"],
        "_heldout": ["counter_bias_slices", "heldout_accuracy", "minority_model", "worst_group"],
        "_margin": ["margin_terciles"],
        "_mitigate": ["mitigate", "usable_objectives"],
        "_shortcuts": ["is_shortcut", "shortcut_share"],
    },
)
