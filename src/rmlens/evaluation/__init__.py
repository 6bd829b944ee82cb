"""Evaluation of reward models: accuracy, calibration, reward distribution, ensemble
disagreement and shortcut probes (``rmlens evaluate``)."""

from rmlens.evaluation._calibration import (
    brier_score,
    calibration_metrics,
    expected_calibration_error,
    fit_temperature,
    log_loss,
    reliability_bins,
    temperature_scaling,
    top_label,
)
from rmlens.evaluation._ensemble import (
    EnsembleRM,
    load_evaluation_rm,
    load_experiment,
    score_pairs,
    score_texts,
)
from rmlens.evaluation._evaluate import EvaluateConfig, evaluate, membership_metrics
from rmlens.evaluation._metrics import (
    REWARDBENCH_COUNTS,
    REWARDBENCH_SECTIONS,
    accuracy_by,
    auroc,
    ensemble_disagreement,
    margin_spearman,
    pair_metrics,
    reward_distribution,
    rewardbench_scores,
)
from rmlens.evaluation._probes import (
    PROBES,
    Probe,
    prefix_probe,
    probe_effects,
    register_probe,
    resolve_probes,
    run_probes,
    summarize_effects,
)

__all__ = [
    "PROBES",
    "REWARDBENCH_COUNTS",
    "REWARDBENCH_SECTIONS",
    "EnsembleRM",
    "EvaluateConfig",
    "Probe",
    "accuracy_by",
    "auroc",
    "brier_score",
    "calibration_metrics",
    "ensemble_disagreement",
    "evaluate",
    "expected_calibration_error",
    "fit_temperature",
    "load_evaluation_rm",
    "load_experiment",
    "log_loss",
    "margin_spearman",
    "membership_metrics",
    "pair_metrics",
    "prefix_probe",
    "probe_effects",
    "register_probe",
    "reliability_bins",
    "resolve_probes",
    "reward_distribution",
    "rewardbench_scores",
    "run_probes",
    "score_pairs",
    "score_texts",
    "summarize_effects",
    "temperature_scaling",
    "top_label",
]
