"""Type stub of ``rmlens.influence``: its lazily loaded names (``rmlens._lazy.attach``) as
imports an IDE or a type checker follows to their code; tests/test_stubs.py keeps it in
step with ``__all__``."""

from ._gauss_newton import gauss_newton_counterfactuals as gauss_newton_counterfactuals
from ._last_layer import DAMPING as DAMPING
from ._last_layer import last_layer_counterfactuals as last_layer_counterfactuals
from ._newton import EXPERT_PENALTY as EXPERT_PENALTY
from ._newton import PATH_TOLERANCE as PATH_TOLERANCE
from ._newton import REFINE_SHARE as REFINE_SHARE
from ._newton import LogisticProblem as LogisticProblem
from ._newton import counterfactuals as counterfactuals
from ._newton import fit_logistic as fit_logistic
from ._newton import one_blas_thread as one_blas_thread
from ._newton import refit as refit
from ._pair_gradients import pair_gradients as pair_gradients
from ._pair_gradients import reading_last as reading_last
from ._pair_gradients import through_last as through_last
