"""The findings page, written at build time from the JSON files of ``benchmarks/findings.py``.

Each ``docs/findings/NAME.json`` holds one finding as its command measured it: the claim, its
source, the data, the command, rmlens's figures with their 95% intervals, a verdict, and the
reading of the figures. This writes ``docs/findings/index.rst`` (a build output, gitignored):
one table of claims and verdicts at its top, then a section per finding with its figures as
a table (each over its ``n`` units: ``n_of``, pairs unless it says otherwise) and as a plot
(``docs/findings/_figures/NAME.png``, drawn here from the same file).
A figure enters the page only through a file that its command wrote. The verdicts follow the
written rules of ``benchmarks/findings/verdict_rules.py``, which the page prints ("How
verdicts are given"); each file's ``verdict_rule`` says which figures the claim rests on
and how each came out, shown in the figures' table.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from functools import cache
from pathlib import Path

FOLDER = Path(__file__).resolve().parents[1] / "findings"
RULES_FILE = Path(__file__).resolve().parents[2] / "benchmarks/findings/verdict_rules.py"
INTRO = """\
Findings
========

rmlens carries the instruments of several lines of work on reward models. Here each is set
to a finding of the work it comes from, measured on real preference data with a command
that a reader can run (``benchmarks/findings.py NAME``; it writes ``docs/findings/NAME.json``,
from which this page is built). Every figure comes with its 95% interval; the verdict says
whether the finding is reproduced at the sizes a CPU allows, by the rules of
`How verdicts are given`_.
"""
RULES_INTRO = """\
A claim is tested in one or more settings (an RM, a shift, a data set), each a figure with its
95% interval; the figures' table of each finding marks them, with the side of 0 (no effect)
that the claim takes and the size it claims, if any. The verdict follows from the intervals
alone:
"""
RULES_CLOSE = """\
Where a finding's file lacks an interval the rules need, its verdict stands only if no
outcome of the missing figure could change it; otherwise the verdict measured before these
rules stays, and the finding says which figure is missing. The rules are applied by
``benchmarks/findings/verdict_rules.py`` (``python benchmarks/verdicts.py`` applies them
again to the files written).
"""


def _figure_text(fig: dict) -> str:
    return f"{fig['value']:.2f} [{fig['lo']:.2f}, {fig['hi']:.2f}]"


def _headline(found: dict) -> str:
    """The finding's headline figures, then their units once."""
    figs = {f["key"]: f for f in found["figures"]}
    units = ", ".join(dict.fromkeys(figs[k]["unit"] for k in found["headline"]))
    text = "; ".join(f"{figs[k]['label']}: {_figure_text(figs[k])}" for k in found["headline"])
    return f"{text} ({units})" if text else "\u2013"


def _cell(text: str) -> str:
    return " ".join(str(text).split())


def _list_table(header: list[str], rows: list[list[str]], widths: str | None = None) -> list:
    lines = [".. list-table::", "   :header-rows: 1"]
    if widths:
        lines.append(f"   :widths: {widths}")
    lines.append("")
    for row in [header, *rows]:
        lines.append(f"   * - {_cell(row[0])}")
        lines += [f"     - {_cell(cell)}" for cell in row[1:]]
    return [*lines, ""]


def _plot(found: dict, path: Path) -> None:
    """The figures as points with their 95% intervals, one row each, beside what the source
    claimed where it gave a figure (``claimed``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs = found["figures"][::-1]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(figs) + 1.1), dpi=110)
    y = list(range(len(figs)))
    values = [f["value"] for f in figs]
    errors = [[f["value"] - f["lo"] for f in figs], [f["hi"] - f["value"] for f in figs]]
    ax.errorbar(values, y, xerr=errors, fmt="o", color="#1f5f99", capsize=3, label="rmlens")
    claimed = [(f["claimed"], i) for i, f in enumerate(figs) if f.get("claimed") is not None]
    if claimed:
        ax.plot(*zip(*claimed), "x", color="#c0392b", ms=8, label="claimed")
        ax.legend(loc="lower right", fontsize=8)
    ax.axvline(0, color="#888", lw=0.8)
    ax.set_yticks(y, [f["label"] for f in figs], fontsize=8)
    units = sorted({f["unit"] for f in figs})
    ax.set_xlabel(f"{' or '.join(units)} (95% interval)")
    fig.suptitle(found["title"], fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


@cache
def _rules() -> tuple[tuple[str, str], ...]:
    """The written rules, (verdict, when), from the module that applies them."""
    spec = importlib.util.spec_from_file_location("verdict_rules_for_page", RULES_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.RULES


def _rules_section() -> list[str]:
    title = "How verdicts are given"
    lines = [title, "-" * len(title), "", *RULES_INTRO.splitlines(), ""]
    lines += [f"- **{label}**: {when}" for label, when in _rules()]
    return [*lines, "", *RULES_CLOSE.splitlines(), ""]


def _claimed(part: dict) -> str:
    """What the claim says of one setting's figure, in words."""
    null, sign, size = part.get("null", 0), part["sign"], part.get("size")
    side = {1: f"above {null:g}", -1: f"below {null:g}", 0: f"either side of {null:g}"}[sign]
    if size is None:
        return side
    return side + (f", by {size:.3g} or more" if sign == 0 else
                   f", reaching {null + sign * size:.3g}")  # fmt: skip


def _figure_rows(found: dict) -> tuple[list[str], list[list[str]], str]:
    """The figures' table: each figure, and where the verdict rests on it, what the claim
    says of it and how it came out."""
    header = ["figure", "unit", "value", "95% interval", "over"]
    rows = [[f["label"], f["unit"], f"{f['value']:.3f}", f"{f['lo']:.3f} to {f['hi']:.3f}",
             f"{f['n']:,} {f.get('n_of', 'pairs')}"] for f in found["figures"]]  # fmt: skip
    if "verdict_rule" not in found:
        return header, rows, "43 15 11 18 13"
    parts = {p["figure"]: p for p in found["verdict_rule"]["parts"]}
    for f, row in zip(found["figures"], rows):
        part = parts.get(f["key"])
        row += [_claimed(part), part["outcome"]] if part else ["\u2013", "\u2013"]
    return [*header, "claimed", "outcome"], rows, "31 12 8 14 11 14 10"


def _verdict_lines(found: dict) -> list[str]:
    lines = [f"**Verdict: {found['verdict']}.** {found['reading']}", ""]
    record = found.get("verdict_rule")
    if record is None:
        return lines
    rules = dict(_rules())
    said = (f"{record['rule']}: {rules[record['rule']]}" if record["rule"] in rules
            else record.get("note", record["rule"]))
    missing = [p["figure"] for p in record["parts"] if p["outcome"] == "missing"]
    if missing and record["rule"] in rules:
        said += (f" The interval of {', '.join(missing)} is missing here; no outcome of it "
                 "could change the verdict.")
    lines += [f"*By the rules:* {said}", ""]
    if record.get("by_data"):
        why = found.get("not_measured", {})
        kinds = "; ".join(f"{kind}: **{label}**" + (f" ({why[kind]})" if kind in why else "")
                          for kind, label in record["by_data"].items())  # fmt: skip
        lines += [f"*By kind of data:* {kinds}.", ""]
    if record.get("caveat"):
        lines += [f"*Caveat:* {record['caveat']}", ""]
    return lines


def _section(found: dict) -> list[str]:
    title = found["title"]
    lines = [title, "-" * len(title), ""]
    for part in ("claim", "source", "data"):
        lines += [f"**{part.capitalize()}.** {found[part]}", ""]
    lines += ["**Command.**", "", ".. code-block:: bash", "", f"   {found['command']}", ""]
    header, rows, widths = _figure_rows(found)
    lines += _list_table(header, rows, widths)
    lines += [f".. image:: _figures/{found['name']}.png", f"   :alt: {title}", ""]
    for table in found.get("tables", []):
        lines += [f"**{table['caption']}**", ""]
        lines += _list_table(table["columns"], table["rows"])
    lines += _verdict_lines(found)
    return [*lines, f"Measured {found['measured']}.", ""]


def write_page(app, config=None) -> None:
    """``docs/findings/index.rst`` and its plots, from every ``docs/findings/*.json``."""
    found = [json.loads(p.read_text()) for p in sorted(FOLDER.glob("*.json"))]
    lines = INTRO.splitlines() + [""]
    rows = [[f"`{f['title']}`_", f["claim"], f["source"], _headline(f), f["verdict"]]
            for f in found]  # fmt: skip
    lines += _list_table(["finding", "claim", "source", "rmlens's figure [95% interval]",
                          "verdict"], rows, "18 26 18 26 12")  # fmt: skip
    lines += _rules_section()
    for f in found:
        _plot(f, FOLDER / "_figures" / f"{f['name']}.png")
        lines += _section(f)
    text = "\n".join(lines) + "\n"
    page = FOLDER / "index.rst"
    if not page.exists() or page.read_text() != text:
        page.write_text(text)


def setup(app):
    app.connect("config-inited", write_page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
