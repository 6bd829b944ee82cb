"""Docutils nodes for the generated references: tables, inline text with ``code`` spans."""

from __future__ import annotations

import re

from docutils import nodes

_CODE = re.compile(r"`+([^`]+)`+")


def inline(text: str) -> list[nodes.Node]:
    """Plain text in which backticked spans (``--flag``, `rmlens attribute`) become code."""
    out: list[nodes.Node] = []
    pos = 0
    for match in _CODE.finditer(text):
        if match.start() > pos:
            out.append(nodes.Text(text[pos : match.start()]))
        out.append(nodes.literal(match.group(1), match.group(1)))
        pos = match.end()
    if pos < len(text):
        out.append(nodes.Text(text[pos:]))
    return out


def paragraphs(text: str) -> list[nodes.Node]:
    """Blank-line separated paragraphs; click's ``\\b`` marks a paragraph kept as typed."""
    out: list[nodes.Node] = []
    for block in re.split(r"\n\s*\n", (text or "").strip()):
        if not block.strip():
            continue
        if block.lstrip().startswith("\b"):
            kept = block.lstrip()[1:].strip("\n")
            out.append(nodes.literal_block(kept, kept))
        else:
            out.append(nodes.paragraph("", "", *inline(" ".join(block.split()))))
    return out


def cell(value) -> nodes.entry:
    """A table cell: a node, a list of nodes, or text (``code`` spans kept)."""
    entry = nodes.entry()
    if isinstance(value, nodes.Node):
        value = [value]
    if isinstance(value, list):
        entry += nodes.paragraph("", "", *value)
    else:
        entry += nodes.paragraph("", "", *inline(str(value)))
    return entry


def code(text: str) -> nodes.literal:
    return nodes.literal(text, text)


def table(header: list[str], rows: list[list], widths: list[int]) -> nodes.table:
    """A table with a header row; ``widths`` are relative column widths."""
    tbl = nodes.table(classes=["rmlens-ref", "colwidths-given"])
    group = nodes.tgroup(cols=len(header))
    tbl += group
    for width in widths:
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    head += nodes.row("", *(cell(h) for h in header))
    group += head
    body = nodes.tbody()
    for row in rows:
        body += nodes.row("", *(cell(v) for v in row))
    group += body
    return tbl


def section(title: str, ids: str, *children: nodes.Node) -> nodes.section:
    sec = nodes.section(ids=[nodes.make_id(ids)], names=[nodes.fully_normalize_name(ids)])
    sec += nodes.title(title, title)
    for child in children:
        sec += child
    return sec
