"""The HTML report: self-contained, escaped, sized, and (with Chromium) really rendered.

The browser tests drive Debian's ``chromium`` through ``chromedriver`` with a small W3C
WebDriver client written on ``urllib`` (no new dependency): it loads the page from a
``file://`` URL in headless mode, waits for the page script's ready marker, reads the DOM
and ``window.__pwned`` with JavaScript, takes a screenshot and reads the browser log
(console errors, failed requests, CSP violations are ``SEVERE`` entries there).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import run_cli
from rmlens._errors import InputError
from rmlens._params import ParamError
from rmlens.report import ReportConfig, write_report

EVIL_PROMPT = (
    'Summarize: <script>window.__pwned=1</script> and <img src=x onerror="window.__pwned=2"> & more'
)
EVIL_CHOSEN = "<script>window.__pwned=4</script>"
EVIL_COLUMN = '<svg onload="window.__pwned=3">'
EVIL_FEATURE = "<img src=x onerror=window.__pwned=6>"
SECTIONS = {
    "summary": "Dataset summary",
    "map": "Memorization map",
    "memorized": "Most memorized pairs",
    "generalized": "Least generalized pairs",
    "attribution": "Attribution",
    "sweeps": "Optimal and pessimal tokens",
    "evaluation": "Evaluation",
    "generalization": "Explicit vs implicit generalization",
    "plots": "Plots",
    "config": "Configuration",
}
CORE_SECTIONS = ("summary", "map", "memorized", "generalized", "config")


def memorization_table(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    tm = rng.uniform(0.4, 1.0, n)
    tg = np.clip(tm - rng.uniform(-0.1, 0.6, n), 0.0, 1.0)
    users = [f"u{i % 5}" for i in range(n)]
    return pd.DataFrame(
        {
            "id": [f"p{i:06d}" for i in range(n)],
            "tm": tm,
            "tg": tg,
            "cm": tm - tg,
            "n_in": 20,
            "n_out": 5,
            "tm_lo": tm - 0.05,
            "tm_hi": np.minimum(tm + 0.05, 1.0),
            "tg_lo": np.maximum(tg - 0.05, 0.0),
            "tg_hi": tg + 0.05,
            "cm_lo": tm - tg - 0.1,
            "cm_hi": tm - tg + 0.1,
            "group": users,
            "prompt": [f"Question {i}: what is the greatest thing?" for i in range(n)],
            "chosen": [f"A careful answer, number {i}. " * (1 + i % 4) for i in range(n)],
            "rejected": [f"Short {i}." for i in range(n)],
            "user_id": users,
            "chosen_model": ["human" if i % 3 else "bart" for i in range(n)],
            "rejected_model": ["bart-dpr"] * n,
            "margin": rng.uniform(0, 50, n),
            "mechanism": [("quality", "user", "noise")[i % 3] for i in range(n)],
        }
    )


def make_experiment(root: Path, *, n: int = 30, full: bool = True) -> Path:
    """A tiny experiment directory; pair 7 carries script/img injections in its text."""
    root.mkdir(parents=True, exist_ok=True)
    mem = memorization_table(n)
    mem[EVIL_COLUMN] = ["<b>x</b>" if i % 2 else "y" for i in range(n)]
    mem.loc[7, "prompt"] = EVIL_PROMPT
    mem.loc[7, "chosen"] = EVIL_CHOSEN
    mem.loc[7, ["tm", "tg", "cm"]] = [0.99, 0.05, 0.94]
    mem.loc[3, ["tm", "tg", "cm"]] = np.nan
    mem.to_parquet(root / "memorization.parquet", index=False)
    config = {
        "version": "0.1.0",
        "n_pairs": n,
        "group_by": "user_id",
        "seed": 0,
        "note": "</script><script>window.__pwned=5</script>",
    }
    (root / "config.json").write_text(json.dumps(config))
    plan = pd.DataFrame(
        [(r, f"u{g}", (r % 5) != g) for r in range(25) for g in range(5)],
        columns=["run", "group", "in_train"],
    )
    plan.to_parquet(root / "plan.parquet", index=False)
    if not full:
        return root
    rng = np.random.default_rng(1)
    features = ["margin", "len_diff", EVIL_FEATURE, "politeness"]
    pd.DataFrame(
        [
            (t, r, f, rng.uniform())
            for t in ("tm", "tg", "cm")
            for r in ("gbm", "mlp")
            for f in features
        ],
        columns=["target", "regressor", "feature", "importance"],
    ).to_parquet(root / "attribution.parquet")
    pd.DataFrame(
        [(t, r, rng.uniform(0, 0.5), 0.05) for t in ("tm", "tg", "cm") for r in ("gbm", "mlp")],
        columns=["target", "regressor", "r2", "r2_std"],
    ).to_parquet(root / "attribution_fit.parquet")
    sweep = root / "sweep_greatest"
    sweep.mkdir(exist_ok=True)
    tokens = ["love", "hate", "<script>", " the"] + [f"tok{i}" for i in range(96)]
    scores = rng.normal(size=100)
    scores[2] = 5.0
    pd.DataFrame(
        {
            "token_id": range(100),
            "token": tokens,
            "decoded": tokens,
            "prompt": "What, in one word, is the greatest thing ever?",
            "score": scores,
            "rank": pd.Series(scores).rank(ascending=False).astype(int),
        }
    ).to_parquet(sweep / "sweep.parquet")
    (sweep / "stats.json").write_text(json.dumps({"skew": 0.31, "mean": 0.0}))
    metrics = {"train": {"accuracy": 0.9, "margin": 1.2}, "test": {"accuracy": 0.7}}
    (root / "metrics.json").write_text(json.dumps(metrics))
    pd.DataFrame(
        {
            "probe": ["length", "<i>caps</i>"],
            "side": ["chosen", "rejected"],
            "mean_shift": [0.3, -0.2],
            "flip_rate": [0.2, 0.1],
            "flip_rate_lo": [0.095, 0.035],
            "flip_rate_hi": [0.373, 0.256],
            "n": [30, 30],
        }
    ).to_parquet(root / "probes.parquet")
    pd.DataFrame(
        {"rm": ["EX-RM", "IM-RM"], "split": ["token-shift"] * 2, "accuracy": [0.85, 0.6]}
    ).to_parquet(root / "generalization.parquet")
    (root / "memorization_map.png").write_bytes(_tiny_png())
    return root


def _tiny_png() -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import io

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, 1])
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=40)
    plt.close(fig)
    return buf.getvalue()


class _Tags(HTMLParser):
    """Start tags with their attributes; script and style bodies kept apart."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.styles: list[str] = []
        self.in_style = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self.in_style = tag == "style"

    def handle_endtag(self, tag):
        self.in_style = False

    def handle_data(self, data):
        if self.in_style:
            self.styles.append(data)


def parse(page: str) -> _Tags:
    parser = _Tags()
    parser.feed(page)
    return parser


def page_data(page: str) -> dict:
    match = re.search(
        r'<script type="application/json" id="rmlens-data">(.*?)</script>', page, re.S
    )
    assert match is not None, "no JSON data block"
    return json.loads(match.group(1))


@pytest.fixture(scope="module")
def full_report(tmp_path_factory) -> Path:
    root = make_experiment(tmp_path_factory.mktemp("exp") / "squality-audit")
    return write_report(root)


def test_report_is_self_contained(full_report: Path) -> None:
    page = full_report.read_text(encoding="utf-8")
    tags = parse(page)
    names = [t for t, _ in tags.tags]
    assert "link" not in names and "iframe" not in names and "object" not in names
    for tag, attrs in tags.tags:
        if tag == "script":
            assert "src" not in attrs, f"external script: {attrs}"
        for key in ("src", "href", "action", "data", "poster", "srcset"):
            value = (attrs.get(key) or "").strip().lower()
            assert not value.startswith(("http:", "https:", "//", "ftp:")), (tag, key, value)
        if tag == "img":
            assert attrs["src"].startswith("data:image/png;base64,")
    css = "".join(tags.styles)
    assert "url(" not in css and "@import" not in css
    csp = [a for t, a in tags.tags if t == "meta" and a.get("http-equiv")]
    assert csp and "default-src 'none'" in csp[0]["content"]
    assert "connect-src 'none'" in csp[0]["content"]
    assert names.count("script") == 3
    assert "Plotly" in page and len(page) > 4_000_000, "Plotly's bundle must be inline"
    links = {a.get("href") for t, a in tags.tags if t == "a"}
    assert "memorization.csv" in links
    assert (full_report.parent / "memorization.csv").is_file()


def test_dataset_text_is_escaped(full_report: Path) -> None:
    page = full_report.read_text(encoding="utf-8")
    lowered = page.lower()
    for raw in ("<script>window.__pwned", "<img src=x", "<svg onload", "<b>x</b>", "<i>caps"):
        assert raw not in lowered, f"unescaped data text in the page: {raw}"
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
    assert "\\u003cscript\\u003ewindow.__pwned=1" in page
    for tag, attrs in parse(page).tags:
        events = [k for k in attrs if k.startswith("on")]
        assert not events, f"<{tag}> has event handler attributes {events}"
    data = page_data(page)
    points = data["map"]["points"]
    k = points["id"].index("p000007")
    assert points["text"]["prompt"][k] == EVIL_PROMPT
    assert points["text"]["chosen"][k] == EVIL_CHOSEN
    assert EVIL_COLUMN in points["meta_columns"]


def test_report_shows_every_present_part(full_report: Path) -> None:
    page = full_report.read_text(encoding="utf-8")
    ids = {a.get("id") for t, a in parse(page).tags if t == "section"}
    assert ids == set(SECTIONS)
    assert "<title>rmlens report: squality-audit</title>" in page
    data = page_data(page)
    assert data["map"]["points"]["n"] == 29, "the pair with NaN estimates is not drawn"
    names = [c["name"] for c in data["map"]["colors"]]
    assert names[:3] == ["cm", "tm", "tg"]
    assert {"user_id", "chosen_model", "mechanism", "margin", EVIL_COLUMN} <= set(names)
    figure_ids = {f["id"] for f in data["figures"]}
    assert {"attribution-0", "attribution-1", "sweep-0-0", "probes-plot"} <= figure_ids
    probes = next(f["figure"]["data"] for f in data["figures"] if f["id"] == "probes-plot")
    whiskers = {bar["name"]: bar["error_y"] for bar in probes}  # each flip rate's interval
    assert whiskers["chosen"]["array"] == [0.173] and whiskers["chosen"]["arrayminus"] == [0.105]
    assert "&#x27;&lt;script&gt;&#x27;" in page, "sweep tokens are shown escaped"
    assert "1 pair has no estimate" in page


def test_most_memorized_rows_open_details(full_report: Path) -> None:
    page = full_report.read_text(encoding="utf-8")
    start, end = page.index('<section id="memorized">'), page.index('<section id="generalized">')
    section = page[start:end]
    first = re.search(r'<tr data-point="(\d+)"[^>]*><td[^>]*>1</td><td[^>]*>(\w+)</td>', section)
    assert first is not None
    point, pair_id = int(first.group(1)), first.group(2)
    assert pair_id == "p000007", "pair 7 has the highest CM"
    assert page_data(page)["map"]["points"]["id"][point] == pair_id


def test_optional_sections_are_skipped(tmp_path: Path) -> None:
    root = make_experiment(tmp_path / "bare", full=False)
    (root / "config.json").unlink()
    page = write_report(root).read_text(encoding="utf-8")
    ids = {a.get("id") for t, a in parse(page).tags if t == "section"}
    assert ids == set(CORE_SECTIONS)
    assert "config.json is missing" in page


def test_bad_optional_file_is_reported_not_fatal(tmp_path: Path) -> None:
    root = make_experiment(tmp_path / "exp", full=False)
    pd.DataFrame({"feature": ["a"]}).to_parquet(root / "attribution.parquet")
    (root / "metrics.json").write_text("{not json")
    page = write_report(root).read_text(encoding="utf-8")
    assert "attribution.parquet: missing column(s) target, regressor, importance" in page
    assert "metrics.json: not valid JSON" in page
    assert 'id="attribution"' not in page and 'id="evaluation"' not in page


def test_missing_memorization_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="memorization.parquet: not found"):
        write_report(tmp_path)
    pd.DataFrame({"id": ["a"], "tm": [0.5]}).to_parquet(tmp_path / "memorization.parquet")
    with pytest.raises(InputError, match="missing column.* tg, cm; expected id, tm, tg, cm"):
        write_report(tmp_path)
    with pytest.raises(ParamError, match="'max_points' parameter of ReportConfig") as err:
        write_report(tmp_path, ReportConfig(max_points=0))
    assert (err.value.param, err.value.value) == ("max_points", 0)
    with pytest.raises(ParamError, match="'max_points' parameter of ReportConfig"):
        write_report(tmp_path, max_points=0)  # an override is a ReportConfig field, checked
    with pytest.raises(ParamError, match="unknown setting `points`") as err:
        write_report(tmp_path, points=10)
    assert err.value.param == "points"


def test_cli_report(tmp_path: Path) -> None:
    root = make_experiment(tmp_path / "exp", full=False)
    result = run_cli(["report", root, "--quiet", "--top-k", 5])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(root / "report.html")
    assert (root / "report.html").is_file()
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_cli(["report", empty])  # through main, the one exit-code path
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "memorization.parquet" in result.stderr
    assert "Traceback" not in result.output


def test_large_experiment_stays_small_and_keeps_extremes(tmp_path: Path) -> None:
    n = 100_000
    root = tmp_path / "big"
    root.mkdir()
    mem = memorization_table(n, seed=3)
    mem.to_parquet(root / "memorization.parquet", index=False)
    path = write_report(root, ReportConfig(max_points=20_000))
    size = path.stat().st_size
    assert size < 20_000_000, f"report.html is {size / 1e6:.1f} MB"
    data = page_data(path.read_text(encoding="utf-8"))
    points = data["map"]["points"]
    assert points["n"] == 20_000
    trace = data["map"]["figure"]["data"][data["map"]["point_trace"]]
    assert trace["type"] == "scattergl"
    assert len(trace["x"]) == 20_000
    kept = mem[mem.id.isin(points["id"])]
    for column, lowest in (("cm", False), ("cm", True), ("tg", True), ("tm", False)):
        sign = 1 if lowest else -1
        bound = np.sort(sign * mem[column].to_numpy())[19]
        n_kept = int((sign * kept[column].to_numpy() <= bound).sum())
        assert n_kept >= 20, f"extremes of {column} were sampled away ({n_kept} of 20 kept)"
    density = data["map"]["figure"]["data"][0]
    total = sum(10**v - 1 for row in density["z"] for v in row if v is not None)
    assert abs(total - n) < n * 0.01, "the density layer counts every pair"
    csv = pd.read_csv(root / "memorization.csv", usecols=["id", "cm"])
    assert len(csv) == n


def test_long_texts_are_cut_to_fit_the_size_limit(tmp_path: Path) -> None:
    root = tmp_path / "long"
    root.mkdir()
    mem = memorization_table(3000, seed=4)
    mem["chosen"] = ["word " * 1200] * len(mem)
    for j in range(50):
        mem[f"note_{j}"] = [f"{i} " + "x" * 150 for i in range(len(mem))]
    mem.to_parquet(root / "memorization.parquet", index=False)
    path = write_report(root, ReportConfig(max_page_mb=7))
    assert path.stat().st_size <= 7_000_000
    points = page_data(path.read_text(encoding="utf-8"))["map"]["points"]
    assert 1000 <= points["n"] <= 3000, "fewer points only once texts are cut short"
    assert len(points["cut"]["chosen"]) == points["n"]
    assert max(len(t) for t in points["text"]["chosen"]) < 6000
    assert len(points["meta_columns"]) <= 40
    assert mem.sort_values("cm").id.iloc[-1] in points["id"], "the top CM pair is kept"


# --- headless Chromium ---------------------------------------------------------------------

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def _need_chromium() -> None:
    if CHROMIUM.exists() and Path(CHROMEDRIVER).exists():
        return
    reason = (
        "headless Chromium check needs /usr/bin/chromium and chromedriver (Debian packages "
        "`chromium` and `chromium-driver`, installed by .ci/chromium.sh)"
    )
    if os.environ.get("RMLENS_REQUIRE_CHROMIUM") == "1":
        pytest.fail(reason + "; RMLENS_REQUIRE_CHROMIUM=1 forbids skipping")
    pytest.skip(reason)


class Browser:
    """Headless Chromium through chromedriver's W3C WebDriver HTTP API (stdlib only)."""

    def __init__(self, width: int = 1400, height: int = 1000) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.profile = tempfile.mkdtemp(prefix="rmlens-chromium-")
        self.proc = subprocess.Popen(
            [CHROMEDRIVER, f"--port={self.port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.session = None
        deadline = time.monotonic() + 20
        while True:
            try:
                self._call("GET", "/status")
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.close()
                    raise
                time.sleep(0.05)
        args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={self.profile}",
            f"--window-size={width},{height}",
        ]
        caps = {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": str(CHROMIUM), "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
        }
        try:
            self.session = self._call("POST", "/session", {"capabilities": {"alwaysMatch": caps}})[
                "sessionId"
            ]
        except BaseException:
            self.close()
            raise

    def _call(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read())["value"]

    def cmd(self, method: str, path: str, body: dict | None = None):
        return self._call(method, f"/session/{self.session}{path}", body)

    def open(self, path: Path) -> None:
        self.cmd("POST", "/url", {"url": path.resolve().as_uri()})

    def js(self, script: str, *args):
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def wait_for(self, script: str, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.js(script)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for: {script}")

    def logs(self) -> list[dict]:
        return self.cmd("POST", "/se/log", {"type": "browser"})

    def screenshot(self) -> bytes:
        return base64.b64decode(self.cmd("GET", "/screenshot"))

    def close(self) -> None:
        try:
            if self.session is not None:
                self.cmd("DELETE", "")
        except OSError:
            pass
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture
def browser():
    _need_chromium()
    b = Browser()
    try:
        yield b
    finally:
        b.close()


def _severe(logs: list[dict]) -> list[str]:
    return [entry["message"] for entry in logs if entry.get("level") == "SEVERE"]


def _check_screenshot(png: bytes, path: Path) -> None:
    from PIL import Image

    path.write_bytes(png)
    keep = os.environ.get("RMLENS_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / path.name)
    image = Image.open(path).convert("RGB")
    assert image.size[0] >= 1000 and image.size[1] >= 600
    colours = image.getcolors(maxcolors=1_000_000) or []
    assert len(colours) > 100, "the screenshot looks blank"


def test_browser_check_catches_errors_and_injection(browser: Browser, tmp_path: Path) -> None:
    """The harness itself can fail: a console error, a blocked request and a run script."""
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><title>bad</title><img src=x onerror="window.__pwned=2">'
        "<script>console.error('boom')</script>"
    )
    browser.open(page)
    assert browser.wait_for("return window.__pwned", timeout=10) == 2
    severe = _severe(browser.logs())
    assert any("boom" in m for m in severe), severe


def test_report_renders_in_headless_chromium(
    browser: Browser, full_report: Path, tmp_path: Path
) -> None:
    browser.open(full_report)
    ready = browser.wait_for(
        "var s = document.getElementById('rmlens-status');"
        "return s && s.getAttribute('data-ready') !== '0' && s.getAttribute('data-ready');"
    )
    assert ready == "1", "a Plotly figure failed to draw"
    time.sleep(0.3)
    assert browser.js("return document.title") == "rmlens report: squality-audit"
    headings = browser.js(
        "return Array.from(document.querySelectorAll('section')).map(function (s) {"
        "  return [s.id, s.querySelector('h2').textContent]; });"
    )
    assert dict(headings) == SECTIONS
    assert browser.js("return document.getElementById('map-plot').data.length") == 6
    assert browser.js("return document.querySelectorAll('#map-plot .main-svg').length") > 0
    assert browser.js("return typeof window.__pwned") == "undefined"
    assert browser.js("return document.querySelectorAll('img[src=\"x\"], svg[onload]').length") == 0
    table_text = browser.js("return document.getElementById('memorized').textContent")
    assert "<script>window.__pwned=1</script>" in table_text

    data = page_data(full_report.read_text(encoding="utf-8"))
    k = data["map"]["points"]["id"].index("p000007")
    details = browser.js(
        "var map = document.getElementById('map-plot');"
        "var hit = {curveNumber: arguments[0], pointNumber: arguments[1]};"
        "map.emit('plotly_click', {points: [hit]});"
        "return ['id', 'prompt', 'chosen', 'cm', 'runs', 'meta'].map(function (name) {"
        "  return document.getElementById('details-' + name).textContent; });",
        data["map"]["point_trace"],
        k,
    )
    assert details[0] == "p000007"
    assert details[1] == EVIL_PROMPT and details[2] == EVIL_CHOSEN
    assert details[3].startswith("0.940 [")
    assert details[4] == "20 in / 5 out"
    assert EVIL_COLUMN in details[5]

    hover = browser.js(
        "Plotly.Fx.hover('map-plot', [{curveNumber: arguments[0], pointNumber: arguments[1]}]);"
        "return document.querySelector('#map-plot .hoverlayer').textContent;",
        data["map"]["point_trace"],
        k,
    )
    assert hover.startswith("p000007CM 0.940 \u00b7 TM 0.990")
    assert "<script>window.__pwned=1</script>" in hover

    browser.js("document.querySelector('#generalized tr[data-point]').click();")
    selected = browser.js(
        "return document.getElementById('rmlens-status').getAttribute('data-selected')"
    )
    row_point = browser.js(
        "return document.querySelector('#generalized tr[data-point]').getAttribute('data-point')"
    )
    assert selected == row_point

    titles = browser.js(
        "var sel = document.getElementById('map-color'), out = [];"
        "for (var i = 0; i < sel.options.length; i++) {"
        "  sel.value = String(i); sel.dispatchEvent(new Event('change'));"
        "  out.push(document.getElementById('map-plot').data[4].marker.colorbar.title.text); }"
        "sel.value = '0'; sel.dispatchEvent(new Event('change')); return out;"
    )
    assert len(titles) == len(data["map"]["colors"])
    assert '&lt;svg onload="window.__pwned=3"&gt;' in titles
    browser.js("document.getElementById('map').scrollIntoView();")
    time.sleep(0.5)
    assert browser.js("return typeof window.__pwned") == "undefined"
    _check_screenshot(browser.screenshot(), tmp_path / "report-map.png")
    logs = browser.logs()
    assert not _severe(logs), f"browser console errors: {_severe(logs)}"
