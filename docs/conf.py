"""Sphinx configuration of the rmlens documentation.

Build (strict, offline): ``python -m sphinx -W --keep-going -b html docs docs/_build/html``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
# rmlens from the checkout (an editable install works too), and the local extensions
sys.path.insert(0, str(DOCS.parent / "src"))
sys.path.insert(0, str(DOCS / "_ext"))
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import rmlens  # noqa: E402

project = "rmlens"
author = "rmlens developers"
copyright = "rmlens developers"
version = release = rmlens.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    # local extensions (docs/_ext)
    "offline_mathjax",  # MathJax served from _static, never from a CDN
    "api_pages",  # docs/api/*.rst written from each package's __all__
    "config_fields",  # config reference + Parameters of config classes from field metadata
    "cli_reference",  # the CLI reference, walked from the Typer app
    "findings_page",  # the findings page from docs/findings/*.json (benchmarks/findings.py)
]
# No sphinx.ext.intersphinx: the build must not touch the network.

templates_path = ["_templates"]
smartquotes = False  # flags stay "--flag", never an en dash
exclude_patterns = ["_build", "_build_deps", "README.md", "auto_examples/*.ipynb"]
suppress_warnings: list[str] = []
if not [p for p in (DOCS / "method").glob("*.rst") if p.name != "index.rst"]:
    # The method pages are written apart from this site's frame; until the first one exists,
    # the placeholder docs/method/index.rst globs "*" over nothing. That one message (Sphinx
    # gives it no type that suppress_warnings could name) is dropped; any other stays.
    import logging

    logging.getLogger("sphinx.sphinx.directives.other").addFilter(
        lambda record: "didn't match any documents" not in record.getMessage()
    )

# --- math -------------------------------------------------------------------------------------
# MathJax 3 from the built site itself (docs/_ext/offline_mathjax.py copies it to _static):
# the files come from PyPI's django-static-mathjax (MathJax 3.2.2 as npm ships it; data only),
# so `pip install -e ".[docs]"` is all a fresh machine needs, and pages render math offline.
mathjax_path = "mathjax/tex-chtml.js"

# --- HTML -------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"rmlens {release}"
html_static_path = ["_static"]
html_css_files = ["rmlens.css"]
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    "navbar_align": "left",
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_show_sourcelink = False
html_sidebars = {"reference/*": []}  # the wide reference tables get the page's width
# an explicit mode: left empty, the theme's script logs an error on a first visit
html_context = {"default_mode": "light"}

# --- autodoc / autosummary ------------------------------------------------------------------
autosummary_generate = True
# An override without a docstring of its own is documented on its base class only
# (TokenScorer, RewardModel, Trainer), not once more on each subclass.
autodoc_inherit_docstrings = False
autodoc_typehints = "none"  # the numpydoc sections carry the types
autodoc_member_order = "bysource"
add_module_names = False

# --- numpydoc ---------------------------------------------------------------------------------
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# Every documented object must document each parameter it takes (PR01), none it does not take
# (PR02) and what it returns (RT01), and have a docstring (GL08).
numpydoc_validation_checks = {"GL08", "PR01", "PR02", "RT01"}
# Only the public API is documented; a private name (a ``_`` segment) is never validated, and
# neither is anything inherited from the standard library (dataclass and Exception plumbing).
numpydoc_validation_exclude = {
    r"(^|\.)_[A-Za-z0-9]\w*($|\.)",  # _private names and members
    r"\.__\w+__$",  # dunder methods
    r"^rmlens\.\w+Error\.\w+$",  # methods an exception inherits (with_traceback, add_note)
    r"^rmlens\.Rmlens(Note|Warning)\.\w+$",
}

# --- sphinx-gallery ---------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "remove_config_comments": True,
    "show_memory": False,
    "plot_gallery": "True",
}
