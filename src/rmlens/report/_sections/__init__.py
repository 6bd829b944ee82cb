"""Report sections other than the map: each returns escaped HTML plus Plotly specs.

One module per group of sections, in page order: ``_quality`` (the reward models),
``_summary`` (the dataset), ``_pairs`` (most and least memorized pairs), ``_attribution``,
``_sae`` (the SAE lens), ``_results`` (token sweeps, generalization), ``_evaluation``,
``_overoptimization`` (best-of-n) and ``_appendix`` (plots, config; the settings tables
in ``_settings``).
"""

from ._appendix import config_section, plots_section
from ._attribution import attribution_section
from ._base import Section
from ._evaluation import evaluation_section
from ._overoptimization import overoptimization_section
from ._pairs import pair_table_section
from ._quality import quality_line, quality_section
from ._results import generalization_section, sweep_section
from ._sae import sae_section
from ._summary import summary_section

__all__ = [
    "Section",
    "attribution_section",
    "config_section",
    "evaluation_section",
    "generalization_section",
    "overoptimization_section",
    "pair_table_section",
    "plots_section",
    "quality_line",
    "quality_section",
    "sae_section",
    "summary_section",
    "sweep_section",
]
