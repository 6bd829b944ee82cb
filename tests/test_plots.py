"""Plots: one helper (rmlens._png), no pyplot state, no backend switch, degenerate input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

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
    from rmlens.memorization._map import plot_memorization_map
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
