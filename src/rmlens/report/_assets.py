"""Inline assets of the page: style sheet, page script, Plotly's bundle and the shell."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

# Blocks every request that would leave the page; the inline scripts and styles, data: images
# and (for Plotly's WebGL scatter, which compiles shaders with `new Function`) eval are allowed.
CSP = (
    "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; "
    "style-src 'unsafe-inline'; img-src data: blob:; font-src data:; connect-src 'none'; "
    "base-uri 'none'; form-action 'none'"
)

CSS = """
:root { --fg: #1d2330; --muted: #5b6473; --line: #dfe3ea; --accent: #3b4a6b; --bg: #f6f7f9; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--fg); background: var(--bg); }
header { background: var(--accent); color: #fff; padding: 18px 32px 10px; }
header h1 { margin: 0 0 4px; font-size: 24px; font-weight: 600; }
header .sub { opacity: .85; font-size: 14px; }
nav { margin-top: 10px; display: flex; flex-wrap: wrap; gap: 4px 18px; font-size: 14px; }
nav a { color: #fff; opacity: .9; text-decoration: none; border-bottom: 1px solid transparent; }
nav a:hover { border-bottom-color: #fff; }
main { max-width: 1480px; margin: 0 auto; padding: 8px 24px 40px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px;
  padding: 6px 24px 20px; margin: 18px 0; }
h2 { font-size: 20px; margin: 14px 0 10px; }
h3 { font-size: 16px; margin: 18px 0 8px; }
h4 { font-size: 14px; margin: 10px 0 6px; color: var(--muted); }
.note { color: var(--muted); font-size: 14px; margin: 4px 0 10px; }
.warning { background: #fff6e0; border-left: 4px solid #e0a100; padding: 8px 12px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; min-width: 150px;
  max-width: 320px; }
.card-label { color: var(--muted); font-size: 13px; }
.card-value { font-size: 22px; font-weight: 600; }
.card-note { color: var(--muted); font-size: 12px; overflow-wrap: anywhere; }
.table-wrap { overflow-x: auto; max-height: 640px; overflow-y: auto; margin: 6px 0 12px; }
table { border-collapse: collapse; font-size: 13px; width: 100%; }
th, td { border-bottom: 1px solid var(--line); padding: 5px 8px; text-align: left;
  vertical-align: top; }
th { background: #f0f2f6; position: sticky; top: 0; font-weight: 600; }
tbody tr:nth-child(even) { background: #fafbfc; }
table.pairs td { overflow-wrap: anywhere; }
table.pairs td.est { white-space: pre; }
table.pairs td.id { min-width: 100px; max-width: 240px; word-break: break-all;
  font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
table.pairs td.text { min-width: 120px; }
table.pairs td.category { min-width: 70px; overflow-wrap: normal; }
table.kv td:first-child { font-family: ui-monospace, Menlo, Consolas, monospace;
  white-space: nowrap; }
tr[data-point] { cursor: pointer; }
tr[data-point]:hover, tr.selected { background: #e8eefb !important; }
.map-wrap { display: flex; gap: 18px; align-items: flex-start; }
.map-main { flex: 3 1 0; min-width: 0; }
#details { flex: 2 1 0; min-width: 320px; border: 1px solid var(--line); border-radius: 6px;
  padding: 10px 14px; position: sticky; top: 10px; max-height: 92vh; overflow-y: auto; }
#details.empty .filled { display: none; }
#details:not(.empty) .hint { display: none; }
#details h3 { margin-top: 4px; }
.estimates { display: grid; grid-template-columns: auto 1fr; gap: 2px 12px; font-size: 14px; }
.estimates span:nth-child(odd) { color: var(--muted); }
.pair-text { white-space: pre-wrap; overflow-wrap: anywhere; font-size: 13px; background: #f7f8fa;
  border: 1px solid var(--line); border-radius: 4px; padding: 6px 8px; max-height: 260px;
  overflow-y: auto; margin: 2px 0 8px; }
.label { font-weight: 600; font-size: 13px; margin-top: 8px; }
.label.chosen { color: #1a7f37; } .label.rejected { color: #b42318; }
dl.meta { display: grid; grid-template-columns: auto 1fr; gap: 2px 12px; font-size: 13px; }
dl.meta dt { color: var(--muted); } dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.controls { display: flex; gap: 18px; align-items: center; flex-wrap: wrap; font-size: 14px;
  margin: 6px 0; }
select { font: inherit; padding: 2px 6px; max-width: 300px; }
.nowrap { white-space: nowrap; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(380px, 1fr)); gap: 0 24px; }
.plot { width: 100%; }
.two-col { display: grid; grid-template-columns: 1fr 1fr; gap: 18px; }
.images { display: flex; flex-wrap: wrap; gap: 18px; }
figure { margin: 0; max-width: 100%; }
figure img { max-width: 100%; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: 13px; }
pre { background: #f7f8fa; border: 1px solid var(--line); padding: 10px; overflow-x: auto;
  font-size: 12px; }
details { margin: 8px 0; } details > summary { cursor: pointer; color: var(--accent); }
table.settings { width: auto; } table.settings td { overflow-wrap: anywhere; }
td.option { color: var(--muted); font-family: ui-monospace, Menlo, Consolas, monospace;
  white-space: nowrap; }
q { font-style: italic; }
footer { text-align: center; color: var(--muted); font-size: 13px; padding: 0 0 30px; }
footer a, .downloads a { color: var(--accent); }
@media (max-width: 1000px) { .map-wrap, .two-col { display: block; } }
"""


@lru_cache(maxsize=1)
def page_script() -> str:
    """The page's own script (``report.js``), shipped inside the package."""
    return resources.files("rmlens.report").joinpath("report.js").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def plotly_script() -> str:
    """Plotly.js, inline (about 4.8 MB), so the page needs no network."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs().replace("</script", "<\\/script")
