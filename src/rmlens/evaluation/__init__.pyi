"""Type stub of ``rmlens.evaluation``: its lazily loaded names (``rmlens._lazy.attach``) as
imports an IDE or a type checker follows to their code; tests/test_stubs.py keeps it
in step with ``__all__``."""

from ._calibration import brier_score as brier_score
from ._calibration import calibration_metrics as calibration_metrics
from ._calibration import expected_calibration_error as expected_calibration_error
from ._calibration import fit_temperature as fit_temperature
from ._calibration import reliability_bins as reliability_bins
from ._calibration import temperature_scaling as temperature_scaling
from ._config import EvaluateConfig as EvaluateConfig
from ._evaluate import evaluate as evaluate
from ._metrics import accuracy_by as accuracy_by
from ._metrics import auroc as auroc
from ._metrics import ensemble_disagreement as ensemble_disagreement
from ._metrics import margin_spearman as margin_spearman
from ._metrics import pair_metrics as pair_metrics
from ._metrics import reward_distribution as reward_distribution
from ._metrics import rewardbench_scores as rewardbench_scores
from ._posthoc import LengthCalibratedRM as LengthCalibratedRM
from ._posthoc import LengthCalibrator as LengthCalibrator
from ._posthoc import calibrate_length as calibrate_length
from ._posthoc import length_correlation as length_correlation
from ._posthoc import response_lengths as response_lengths
from ._probes import PROBES as PROBES
from ._probes import Probe as Probe
from ._probes import probe_effects as probe_effects
from ._probes import register_probe as register_probe
from ._probes import resolve_probes as resolve_probes
from ._probes import run_probes as run_probes
