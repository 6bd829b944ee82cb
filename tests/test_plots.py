"""Plots: one helper (rmlens._png), no pyplot state, no backend switch, degenerate input."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rmlens.memorization import plot_memorization_map

# Imports every rmlens module, then draws every plot; prints what matplotlib looks like after.
DRAW_ALL = textwrap.dedent(
    """
    import importlib, json, pkgutil, sys
    from pathlib import Path

    import numpy as np
    import pandas as pd
    import rmlens

    out = Path(sys.argv[1])
    failed = {}
    for info in pkgutil.walk_packages(rmlens.__path__, "rmlens."):
        try:
            importlib.import_module(info.name)
        except ImportError as exc:  # only a third-party package may be absent, never rmlens
            if (exc.name or "").split(".")[0] == "rmlens":
                raise
            failed[info.name] = repr(exc)

    import shap

    from rmlens.attribution._plots import plot_beeswarm, plot_diff, plot_importance
    from rmlens.evaluation._plots import plot_probes, plot_reliability, plot_rewards
    from rmlens.generalization._plots import plot_generalization
    from rmlens.memorization import plot_memorization_map
    from rmlens.tokens._plots import plot_contrast, plot_distributions, plot_frequency

    rng = np.random.default_rng(0)
    plot_memorization_map(pd.DataFrame({"tm": rng.random(50), "tg": rng.random(50)}),
                          out / "memorization_map.png")
    bins = [{"n": 10, "confidence": 0.6, "accuracy": 0.55}, {"n": 12, "confidence": 0.8,
            "accuracy": 0.75}]
    plot_reliability(bins, out / "reliability.png", ece=0.05, after=bins, after_ece=0.03)
    plot_rewards(rng.normal(size=30), rng.normal(size=30), out / "rewards.png")
    plot_probes(pd.DataFrame({"probe": ["length", "length", "polite"], "side": ["chosen",
                "rejected", "chosen"], "flip_rate": [0.1, 0.2, 0.3]}), out / "probes.png")
    feats = ["len", "vader", "flesch"]
    importance = pd.DataFrame([{"regressor": r, "target": t, "feature": f, "importance": 1.0}
                               for r in ("ridge", "lgbm") for t in ("tm", "tg") for f in feats])
    plot_importance(importance, out / "attribution_importance.png")
    X = rng.normal(size=(40, 3))
    explanations = {(t, "ridge"): shap.Explanation(rng.normal(size=(40, 3)), base_values=
                    np.zeros(40), data=X, feature_names=feats) for t in ("tm", "tg")}
    plot_beeswarm(explanations, "ridge", out / "attribution_beeswarm_ridge.png")
    plot_diff(pd.DataFrame({"regressor": "ridge", "feature": feats, "diff": [0.1, -0.2, 0.0]}),
              out / "attribution_diff.png")
    plot_generalization(pd.DataFrame({"split": ["iid", "iid", "shift", "shift"], "rm":
                        ["explicit", "implicit"] * 2, "accuracy": [0.8, 0.7, 0.6, 0.65],
                        "norm_margin": [1.0, 0.5, 0.8, 0.4]}), out / "generalization.png")
    tokens = pd.DataFrame({"prompt": ["best"] * 20 + ["worst"] * 20, "token_id": list(range(20))
                           * 2, "decoded": [f"w{i}" for i in range(20)] * 2,
                           "score": rng.normal(size=40)})
    plot_distributions(tokens, out / "score_distribution.png")
    plot_contrast(tokens, out / "best_vs_worst.png", "best", "worst")
    words = pd.DataFrame({"is_word": [True] * 20, "zipf": rng.uniform(1, 7, 20),
                          "valence": rng.choice([-0.5, 0.0, 0.5], 20)})
    plot_frequency(tokens, words, out / "frequency.png", "best")

    import matplotlib
    import matplotlib.pyplot as plt

    print(json.dumps({"backend": matplotlib.get_backend(), "open": plt.get_fignums(),
                      "failed": failed, "pngs": sorted(p.name for p in out.glob("*.png"))}))
    """
)


def test_no_backend_switch_and_no_open_figures(tmp_path):
    # A notebook or GUI user's backend must survive importing rmlens and drawing every plot.
    env = {**os.environ, "MPLBACKEND": "svg"}
    proc = subprocess.run(
        [sys.executable, "-c", DRAW_ALL, str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["backend"] == "svg"
    assert result["open"] == []
    assert result["pngs"] == sorted([
        "memorization_map.png", "reliability.png", "rewards.png", "probes.png",
        "attribution_importance.png", "attribution_beeswarm_ridge.png", "attribution_diff.png",
        "generalization.png", "score_distribution.png", "best_vs_worst.png", "frequency.png",
    ])  # fmt: skip
    for name in result["pngs"]:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic save leaves no temporary file


@pytest.mark.parametrize(
    "tm, tg",
    [
        ([np.nan] * 4, [np.nan] * 4),  # all missing
        ([], []),  # no pairs at all
        ([0.5] * 30, list(np.linspace(0, 1, 30))),  # constant TM
        ([0.5] * 30, [0.5] * 30),  # constant TM and TG
        ([0.3], [0.7]),  # a single pair
        ([0.3, np.nan, np.inf], [np.nan, 0.4, 0.2]),  # no row with both finite
    ],
    ids=["all-nan", "empty", "constant-tm", "constant-both", "single-pair", "no-complete-row"],
)
def test_memorization_map_degenerate_input(tmp_path, tm, tg):
    path = plot_memorization_map(pd.DataFrame({"tm": tm, "tg": tg}), tmp_path / "map.png")
    assert path == tmp_path / "map.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_to_writes_nothing_when_drawing_fails(tmp_path):
    from rmlens._png import plot_to

    with pytest.raises(RuntimeError, match="boom"), plot_to(tmp_path / "x.png") as fig:
        fig.subplots()
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_beeswarm_is_reproducible_and_leaves_numpy_alone(tmp_path):
    # shap jitters the dots with numpy's global generator: the same explanations must draw the
    # same file (a re-run audit's report is byte-identical), and the caller's stream survives.
    import shap

    from rmlens.attribution._plots import plot_beeswarm

    rng = np.random.default_rng(1)
    explanations = {("tm", "ridge"): shap.Explanation(
        rng.normal(size=(300, 3)), base_values=np.zeros(300), data=rng.normal(size=(300, 3)),
        feature_names=["a", "b", "c"])}  # fmt: skip
    np.random.seed(123)
    expected_next = np.random.get_state()[1].copy()
    first = plot_beeswarm(explanations, "ridge", tmp_path / "one.png").read_bytes()
    assert np.array_equal(np.random.get_state()[1], expected_next)
    np.random.seed(7)  # another global state: the figure must not follow it
    second = plot_beeswarm(explanations, "ridge", tmp_path / "two.png").read_bytes()
    assert first == second


# --- tick labels never overlap ----------------------------------------------------------------


def _drawn_tick_labels(fig, renderer) -> list[tuple[str, str, object]]:
    """(axes title + axis, text, window bbox) of every tick label the figure draws: visible,
    not empty, its tick inside the axis's view interval (the locator's ticks beyond the limits
    are never drawn)."""
    found = []
    for k, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            slack = (hi - lo) * 1e-9
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not tick.get_visible() or not lo - slack <= tick.get_loc() <= hi + slack:
                    continue
                for label in (tick.label1, tick.label2):
                    if label.get_visible() and label.get_text().strip():
                        where = f"axes {k} ({ax.get_title() or ax.get_label()}) {axis.axis_name}"
                        found.append((where, label.get_text(), label.get_window_extent(renderer)))
    return found


def tick_label_overlaps(fig) -> list[str]:
    """Pairs of drawn tick labels whose boxes overlap: on one axis, and across axes (the main
    axes against a marginal histogram or a colorbar that shares an edge with it)."""
    fig.canvas.draw()
    labels = _drawn_tick_labels(fig, fig.canvas.get_renderer())
    return [f"{wa} {ta!r} overlaps {wb} {tb!r}"
            for (wa, ta, a), (wb, tb, b) in itertools.combinations(labels, 2)
            if a.overlaps(b)]  # fmt: skip


@pytest.fixture
def drawn(monkeypatch):
    """Every figure an rmlens plot saves, checked for overlapping tick labels as it is saved
    (inside the plot's style): file name -> overlaps."""
    from matplotlib.figure import Figure

    found: dict[str, list[str]] = {}
    save = Figure.savefig

    def savefig(fig, fname, *args, **kwargs):
        save(fig, fname, *args, **kwargs)
        name = Path(str(fname)).name  # the atomic save's temporary name: .NAME.png.XYZ.tmp
        found[name.split(".png")[0].lstrip(".") + ".png"] = tick_label_overlaps(fig)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return found


def _memorization_map(path):
    # an audit's spread of pairs: TM near 1 with TG a little below, as the demo's (1500 pairs)
    rng = np.random.default_rng(0)
    tm = np.clip(rng.beta(5, 2, 1500), 0, 1)
    plot_memorization_map(pd.DataFrame({"tm": tm, "tg": np.clip(tm - rng.gamma(1, 0.06, 1500),
                                                                0, 1)}), path)  # fmt: skip


def _attribution_diff(path):
    # mean |SHAP| differences of an audit: thousandths, so long tick labels (-0.0125)
    from rmlens.attribution._plots import plot_diff

    rng = np.random.default_rng(1)
    rows = [{"regressor": reg, "feature": f"feature_name_{i}_{reg}", "diff": d}
            for reg, scale in (("lightgbm", 0.002), ("mlp", 0.0025))
            for i, d in enumerate(rng.normal(-0.0006, scale, 92))]  # fmt: skip
    plot_diff(pd.DataFrame(rows), path)


def _attribution_importance(path):
    from rmlens.attribution._plots import plot_importance

    rng = np.random.default_rng(2)
    plot_importance(pd.DataFrame([{"regressor": r, "target": t, "feature": f"feature_{i}",
                                   "importance": rng.uniform(0, 0.02)}
                                  for r in ("lightgbm", "mlp") for t in ("tm", "tg", "cm")
                                  for i in range(40)]), path)  # fmt: skip


def _attribution_beeswarm(path):
    shap = pytest.importorskip("shap")
    from rmlens.attribution._plots import plot_beeswarm

    rng = np.random.default_rng(3)
    feats = [f"feature_{i}" for i in range(20)]
    plot_beeswarm({(t, "mlp"): shap.Explanation(rng.normal(0, 0.01, (200, 20)),
                                                base_values=np.zeros(200),
                                                data=rng.normal(size=(200, 20)),
                                                feature_names=feats)
                   for t in ("tm", "tg", "cm")}, "mlp", path)  # fmt: skip


def _evaluation(path):
    from rmlens.evaluation._plots import plot_probes, plot_reliability, plot_rewards

    rng = np.random.default_rng(4)
    bins = [{"n": 10 + i, "confidence": 0.05 + i / 10, "accuracy": 0.1 + i / 11} for i in range(10)]
    plot_reliability(bins, path.with_name("reliability.png"), ece=0.05, after=bins, after_ece=0.03)
    plot_rewards(rng.normal(size=3000), rng.normal(size=3000), path.with_name("rewards.png"))
    plot_probes(pd.DataFrame({"probe": ["length", "length", "polite", "polite"],
                              "side": ["chosen", "rejected"] * 2,
                              "flip_rate": [0.1, 0.2, 0.3, 0.05]}), path)  # fmt: skip


def _generalization(path):
    from rmlens.generalization._plots import plot_generalization

    plot_generalization(pd.DataFrame({"split": ["iid", "iid", "token", "token", "domain", "domain"],
                                      "rm": ["explicit", "implicit"] * 3,
                                      "accuracy": [0.8, 0.7, 0.6, 0.65, 0.55, 0.5],
                                      "norm_margin": [1.0, 0.5, 0.8, 0.4, 0.3, 0.2]}),
                        path)  # fmt: skip


def _tokens(path):
    from rmlens.tokens._plots import plot_contrast, plot_distributions, plot_frequency

    rng = np.random.default_rng(5)
    n = 2000
    tokens = pd.DataFrame({"prompt": ["What is the best thing?"] * n + ["What is the worst?"] * n,
                           "token_id": list(range(n)) * 2,
                           "decoded": [f"w{i}" for i in range(n)] * 2,
                           "score": rng.normal(size=2 * n)})  # fmt: skip
    plot_distributions(tokens, path)
    plot_contrast(tokens, path.with_name("best_vs_worst.png"), "What is the best thing?",
                  "What is the worst?")  # fmt: skip
    words = pd.DataFrame({"is_word": [True] * n, "zipf": rng.uniform(1, 7, n),
                          "valence": rng.choice([-0.5, 0.0, 0.5], n)})  # fmt: skip
    plot_frequency(tokens, words, path.with_name("frequency.png"), "What is the best thing?")


@pytest.mark.parametrize(
    "draw",
    [_memorization_map, _attribution_diff, _attribution_importance, _attribution_beeswarm,
     _evaluation, _generalization, _tokens],
    ids=["memorization_map", "attribution_diff", "attribution_importance",
         "attribution_beeswarm", "evaluation", "generalization", "tokens"],
)  # fmt: skip
def test_tick_labels_do_not_overlap(tmp_path, drawn, draw):
    # every PNG the report embeds: no two tick labels of a figure may cover each other
    draw(tmp_path / "figure.png")
    assert drawn, "no figure was saved"
    overlaps = {name: found for name, found in drawn.items() if found}
    assert not overlaps, overlaps


def test_the_overlap_check_sees_crowded_ticks():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 2))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.set_xlim(-0.0125, 0.0075)
    ax.set_xticks(np.linspace(-0.0125, 0.0075, 9))
    assert tick_label_overlaps(fig)
    ax.set_xticks([-0.01, 0.0])
    assert not tick_label_overlaps(fig)
