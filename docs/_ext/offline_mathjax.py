"""MathJax 3 served from the built site, never from a CDN: pages render math offline.

The files come from the PyPI package ``django-static-mathjax`` (in rmlens's ``docs`` extra):
a verbatim copy of the MathJax 3.2.2 npm distribution, installed as the data-only Python
package ``mathjax`` (nothing of Django is imported or needed). Its ``es5`` folder is copied to
``_static/mathjax`` and ``mathjax_path`` points at its ``tex-chtml.js``, which loads its fonts
and any TeX extension it needs from beside itself.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from sphinx.errors import ExtensionError

TARGET = "mathjax"  # under _static
ENTRY = "tex-chtml.js"


def mathjax_source() -> Path:
    """The ``es5`` folder of the installed MathJax files."""
    spec = importlib.util.find_spec("mathjax")
    for root in (spec.submodule_search_locations or []) if spec else []:
        es5 = Path(root) / "static" / "mathjax" / "es5"
        if (es5 / ENTRY).is_file():
            return es5
    raise ExtensionError(
        "MathJax files not found: pip install django-static-mathjax "
        '(or pip install -e ".[docs]")'
    )


def _config_inited(app, config) -> None:
    mathjax_source()  # fail early, before reading any page
    if config.mathjax_path != f"{TARGET}/{ENTRY}":
        raise ExtensionError(f"set mathjax_path = {TARGET + '/' + ENTRY!r} in conf.py")


def _copy(app, exc) -> None:
    if exc is not None or app.builder.format != "html":
        return
    dest = Path(app.outdir) / "_static" / TARGET
    if not (dest / ENTRY).is_file():
        shutil.copytree(mathjax_source(), dest, dirs_exist_ok=True)


def setup(app):
    app.connect("config-inited", _config_inited)
    app.connect("build-finished", _copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
