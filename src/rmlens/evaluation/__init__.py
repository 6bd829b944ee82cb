"""Evaluation of reward models: accuracy, calibration, reward distribution, ensemble
disagreement, shortcut probes and post-hoc length calibration (``rmlens evaluate``)."""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_config": ["EvaluateConfig"],
        "_calibration": [
            "brier_score",
            "calibration_metrics",
            "expected_calibration_error",
            "fit_temperature",
            "reliability_bins",
            "temperature_scaling",
        ],
        "_evaluate": ["evaluate"],
        "_metrics": [
            "accuracy_by",
            "auroc",
            "ensemble_disagreement",
            "margin_spearman",
            "pair_metrics",
            "reward_distribution",
            "rewardbench_scores",
        ],
        "_posthoc": [
            "LengthCalibratedRM",
            "LengthCalibrator",
            "calibrate_length",
            "length_correlation",
            "response_lengths",
        ],
        "_probes": ["PROBES", "Probe", "probe_effects", "register_probe", "resolve_probes",
                    "run_probes"],
    },
)
