"""One way to draw a PNG: a bare ``matplotlib.figure.Figure``, the shared style, an atomic save.

No pyplot: nothing switches the user's backend (a notebook keeps its own) and no figure is
left registered in pyplot's figure manager. The Agg canvas is attached to each figure
directly, which is all that writing a PNG needs.

    with plot_to(out / "rewards.png", size=(10, 3.8)) as fig:
        left, right = fig.subplots(1, 2)
        ...
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rmlens._io import write_atomic

# The look every rmlens PNG shares; applied while a figure is built and while it is saved.
STYLE = {
    "figure.dpi": 110,
    "savefig.dpi": 110,
    "savefig.bbox": "tight",
    "savefig.facecolor": "white",
    "figure.facecolor": "white",
    "font.size": 10,
    "legend.fontsize": 8,
    "axes.titlesize": 11,
}


@contextmanager
def plot_to(
    path: str | Path, *, size: tuple[float, float] = (7.0, 4.5), layout: str | None = "tight"
) -> Iterator:
    """Yield a new ``Figure`` of ``size`` inches; when the block ends, save it as PNG at ``path``.

    The file is written atomically (``rmlens._io.write_atomic``) and only if the block did not
    raise. ``layout`` is the figure's layout engine ("tight", "constrained" or None to place
    the axes yourself).
    """
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=size, layout=layout)
        FigureCanvasAgg(fig)
        yield fig
        write_atomic(path, lambda tmp: fig.savefig(tmp, format="png"))


def empty_note(ax, text: str = "no data") -> None:
    """Write ``text`` in the middle of an axes that has nothing to show."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="grey")
