"""The documentation site: built strictly, then really rendered in headless Chromium.

Slow (a full Sphinx build), so it runs only with ``RMLENS_BUILD_DOCS=1``, or on a build
already made when ``RMLENS_DOCS_HTML`` names its folder (what ``.ci/run`` does); it needs the
``docs`` extra (``pip install -e ".[docs]"``) and Chromium (``.ci/chromium.sh``). It builds
with ``-W --keep-going`` (any warning fails), then opens the home page (which has math), the
method index and the gallery index from ``file://`` URLs, as ``tests/test_report.py`` does,
and checks that MathJax typeset every formula from the site's own copy, that every image
loaded and that nothing was fetched from the network. Screenshots go to the test's tmp dir,
and also to ``$RMLENS_DOCS_SCREENSHOTS`` when that names a folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"home": "index.html", "method": "method/index.html", "gallery": "auto_examples/index.html"}

BUILT = os.environ.get("RMLENS_DOCS_HTML")  # a strict build already made (CI's): read it
pytestmark = pytest.mark.skipif(
    os.environ.get("RMLENS_BUILD_DOCS") != "1" and not BUILT,
    reason="builds the docs only with RMLENS_BUILD_DOCS=1 (or reads RMLENS_DOCS_HTML's build)",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    if BUILT:
        assert (Path(BUILT) / "index.html").is_file(), f"{BUILT}: no index.html (not a build)"
        return Path(BUILT).resolve()
    out = tmp_path_factory.mktemp("docs") / "html"
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
           str(ROOT / "docs"), str(out)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"sphinx failed:\n{done.stdout[-5000:]}\n{done.stderr[-5000:]}"
    return out


@pytest.fixture
def browser():
    from test_report import Browser, _need_chromium

    _need_chromium()
    b = Browser(width=1400, height=1000)
    try:
        yield b
    finally:
        b.close()


def _keep(png: bytes, path: Path) -> None:
    path.write_bytes(png)
    folder = os.environ.get("RMLENS_DOCS_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(folder) / path.name)


def _wait_math(browser, n_math: int, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        typeset = browser.js(
            "return (window.MathJax && MathJax.startup && MathJax.startup.promise) ? "
            "document.querySelectorAll('mjx-container').length : -1;"
        )
        if typeset >= n_math:
            return typeset
        time.sleep(0.2)
    return typeset


@pytest.mark.parametrize("page", sorted(PAGES))
def test_page_renders(site: Path, browser, tmp_path: Path, page: str) -> None:
    path = site / PAGES[page]
    assert path.is_file(), f"{PAGES[page]} was not built"
    browser.open(path)
    browser.wait_for("return document.readyState === 'complete'")
    n_math = browser.js("return document.querySelectorAll('.math').length")
    if page == "home":
        assert n_math > 0, "the home page has a formula"
    if n_math:
        script = browser.js(
            "var s = document.querySelector('script[src*=\"tex-chtml\"]');"
            "return s ? s.src : '';"
        )
        assert script.startswith("file://"), f"MathJax not served by the site: {script!r}"
        assert _wait_math(browser, n_math) >= n_math, "MathJax did not typeset every formula"
        text = browser.js("return document.body.innerText")
        for raw in ("$$", "\\(", "\\["):
            assert raw not in text, f"untypeset math ({raw}) in the page's text"
    images = browser.js(
        "return Array.from(document.images).map(function (i) {"
        "  return [i.getAttribute('src'), i.complete && i.naturalWidth > 0]; });"
    )
    broken = [src for src, ok in images if not ok]
    assert not broken, f"images that did not load: {broken}"
    fetched = browser.js(
        "return performance.getEntriesByType('resource').map(function (e) { return e.name; })"
    )
    remote = [url for url in fetched if not url.startswith(("file:", "data:", "blob:"))]
    assert not remote, f"the page fetched from the network: {remote}"
    severe = [e["message"] for e in browser.logs() if e.get("level") == "SEVERE"]
    assert not severe, f"browser console errors: {severe}"
    _keep(browser.screenshot(), tmp_path / f"docs-{page}.png")
