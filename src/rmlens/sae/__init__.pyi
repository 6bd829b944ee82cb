"""Type stub of ``rmlens.sae``: its lazily loaded names (``rmlens._lazy.attach``) as
imports an IDE or a type checker follows to their code; tests/test_stubs.py keeps it
in step with ``__all__``."""

from ._cards import response_features as response_features
from ._config import SAEConfig as SAEConfig
from ._debias import Debiased as Debiased
from ._debias import check_debiasable as check_debiasable
from ._debias import debias as debias
from ._debias import project_head as project_head
from ._debias import shortcut_latents as shortcut_latents
from ._debias_config import DebiasConfig as DebiasConfig
from ._debias_dir import DEBIAS_OBJECTIVE as DEBIAS_OBJECTIVE
from ._files import load_sae as load_sae
from ._files import save_sae as save_sae
from ._lens import SAELens as SAELens
from ._lens import audit_sae as audit_sae
from ._lens import fit_sae as fit_sae
from ._lens import load_latents as load_latents
from ._lens import pair_latents as pair_latents
from ._topk import TopKSAE as TopKSAE
from ._topk import fit_topk as fit_topk
from ._topk import fvu as fvu
