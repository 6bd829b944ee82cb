"""Type stub of ``rmlens``: its lazily loaded names (``rmlens._lazy.attach``) as
imports an IDE or a type checker follows to their code; tests/test_stubs.py keeps it
in step with ``__all__``."""

from ._errors import InputError as InputError
from ._errors import RmlensNote as RmlensNote
from ._errors import RmlensWarning as RmlensWarning
from .attribution import AttributeConfig as AttributeConfig
from .attribution import attribute as attribute
from .comparison import CompareConfig as CompareConfig
from .comparison import MitigateConfig as MitigateConfig
from .comparison import OveroptimizeConfig as OveroptimizeConfig
from .comparison import compare as compare
from .comparison import mitigate as mitigate
from .comparison import overoptimize as overoptimize
from .data import CandidatesConfig as CandidatesConfig
from .data import SynthConfig as SynthConfig
from .data import generate_candidates as generate_candidates
from .data import load_candidates as load_candidates
from .data import load_pairs as load_pairs
from .data import load_rankings as load_rankings
from .data import synthesize as synthesize
from .evaluation import EvaluateConfig as EvaluateConfig
from .evaluation import evaluate as evaluate
from .experiment import AuditDir as AuditDir
from .experiment import ExperimentDir as ExperimentDir
from .generalization import GeneralizeConfig as GeneralizeConfig
from .generalization import generalize as generalize
from .hub import load_rm as load_rm
from .hub import train as train
from .memorization import AuditConfig as AuditConfig
from .memorization import audit as audit
from .report import ReportConfig as ReportConfig
from .report import write_report as write_report
from .rewards import HeadConfig as HeadConfig
from .rewards import TrainConfig as TrainConfig
from .sae import SAEConfig as SAEConfig
from .sae import fit_sae as fit_sae
from .tokens import SweepConfig as SweepConfig
from .tokens import sweep as sweep

__version__: str
