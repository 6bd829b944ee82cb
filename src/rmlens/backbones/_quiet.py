"""The libraries' own progress bars, kept off stderr while rmlens loads or saves a model.

rmlens says what it is doing with its own status lines (``rmlens.progress.status``), which
``--quiet`` silences; transformers' tqdm bars ("Loading weights", "Writing model shards",
"Converting and de-quantizing GGUF tensors") would print hundreds of lines whatever the
setting.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

# transformers' GGUF reader takes ``tqdm`` from ``tqdm.auto`` itself, past the switch that
# ``transformers.utils.logging.disable_progress_bar`` turns off
_GGUF_MODULE = "transformers.modeling_gguf_pytorch_utils"


@contextmanager
def quiet_bars() -> Iterator[None]:
    """Load or save with transformers without its progress bars.

    Turns off transformers' (and the hub client's) bars for the rest of the process, as
    rmlens always did once it loaded a model: the saves that follow a load (a tuned RM's
    ``save``, ``export_rm``) print no bar either. The GGUF reader's own ``tqdm`` is
    replaced by a silent one within the context only, and restored after it.
    """
    import importlib

    from tqdm.auto import tqdm
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    gguf = importlib.import_module(_GGUF_MODULE)
    loud = gguf.tqdm
    gguf.tqdm = functools.partial(tqdm, disable=True)
    try:
        yield
    finally:
        gguf.tqdm = loud
