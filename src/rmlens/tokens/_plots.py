"""Plots of a sweep: score distributions, one prompt against another, frequency vs score."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rmlens._png import plot_to


def _short(prompt: str, n: int = 48) -> str:
    return prompt if len(prompt) <= n else prompt[: n - 1] + "…"


def plot_distributions(frame: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """Histogram of token scores, one per prompt, overlaid."""
    with plot_to(path) as fig:
        ax = fig.subplots()
        for prompt, part in frame.groupby("prompt", sort=False):
            ax.hist(part["score"], bins=80, histtype="step", density=True, label=_short(prompt))
        ax.set_xlabel("reward of the one-token answer")
        ax.set_ylabel("density")
        ax.set_title(title or "Token score distributions")
        ax.legend(fontsize=7)
    return Path(path)


def pick_contrast(prompts: list[str]) -> tuple[str, str] | None:
    """The prompts to plot against each other: one with "best" (else the first) and one with
    "worst" (else the last); None with fewer than two prompts."""
    if len(prompts) < 2:
        return None
    best = next((p for p in prompts if "best" in p.lower()), prompts[0])
    worst = next((p for p in prompts if "worst" in p.lower() and p != best), prompts[-1])
    return (best, worst) if best != worst else (prompts[0], prompts[-1])


def plot_contrast(frame: pd.DataFrame, path: str | Path, prompt_x: str, prompt_y: str,
                  label: int = 8, title: str = "") -> Path:
    """Each token's score under one prompt against another, extremes labelled."""
    wide = frame.pivot_table(index=["token_id", "decoded"], columns="prompt", values="score")
    wide = wide[[prompt_x, prompt_y]].dropna().reset_index()
    with plot_to(path, size=(6.0, 6.0)) as fig:
        ax = fig.subplots()
        ax.scatter(wide[prompt_x], wide[prompt_y], s=2, alpha=0.3, linewidths=0)
        lo = float(np.nanmin(wide[[prompt_x, prompt_y]].to_numpy()))
        hi = float(np.nanmax(wide[[prompt_x, prompt_y]].to_numpy()))
        ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8, ls="--")
        picks = pd.concat([wide.nlargest(label, prompt_x), wide.nsmallest(label, prompt_x),
                           wide.nlargest(label, prompt_y), wide.nsmallest(label, prompt_y)])
        picks = picks.drop_duplicates("token_id")[["decoded", prompt_x, prompt_y]]
        for decoded, x, y in picks.itertuples(index=False, name=None):
            ax.annotate(repr(decoded)[1:-1], (x, y), fontsize=6)
        ax.set_xlabel(_short(prompt_x))
        ax.set_ylabel(_short(prompt_y))
        ax.set_title(title or "Framing: token scores under two prompts")
    return Path(path)


def plot_frequency(frame: pd.DataFrame, features: pd.DataFrame, path: str | Path,
                   prompt: str, title: str = "") -> Path:
    """Score against Zipf word frequency for the word tokens of one prompt, with the OLS line."""
    part = frame[frame["prompt"] == prompt].reset_index(drop=True)
    keep = features["is_word"].to_numpy()
    x, y = features["zipf"].to_numpy()[keep], part["score"].to_numpy()[keep]
    valence = features["valence"].to_numpy()[keep]
    with plot_to(path) as fig:
        ax = fig.subplots()
        neutral = valence == 0
        ax.scatter(x[neutral], y[neutral], s=3, alpha=0.35, color="grey", linewidths=0,
                   label="neutral")
        points = ax.scatter(x[~neutral], y[~neutral], s=8, alpha=0.9, c=valence[~neutral],
                            cmap="bwr_r", vmin=-1, vmax=1, linewidths=0)
        fig.colorbar(points, ax=ax, label="VADER valence")
        if len(x) > 2:
            slope, intercept = np.polyfit(x, y, 1)
            grid = np.linspace(x.min(), x.max(), 50)
            ax.plot(grid, intercept + slope * grid, color="black", lw=1, label="least squares")
        ax.legend(fontsize=7)
        ax.set_xlabel("Zipf word frequency (log10 per billion words)")
        ax.set_ylabel("reward")
        ax.set_title(title or f"Frequency vs score: {_short(prompt)}")
    return Path(path)
