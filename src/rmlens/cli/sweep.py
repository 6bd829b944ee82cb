"""``rmlens sweep``: optimal and pessimal tokens of reward models (DESIGN.md section 4)."""

from __future__ import annotations

from pathlib import Path

import typer

from rmlens import InputError
from rmlens.cli._options import config_parameters, resolve, save_config, sections, with_parameters
from rmlens.cli._talk import echo_json
from rmlens.tokens import SweepConfig


def _print_summary(summary: dict, out: Path, top_k: int) -> None:
    for slug, stats in summary["models"].items():
        typer.echo(f"== {stats['rm']}  ({out / slug}/sweep.parquet)")
        typer.echo(f"   {stats['n_tokens']} tokens swept, "
                   f"{stats['n_skipped_special']} special tokens skipped")
        bias = {row["prompt"]: row for row in stats["frequency_bias"]}
        for prompt, m in stats["moments"].items():
            typer.echo(f"-- {prompt}")
            typer.echo(f"   mean {m['mean']:.4g}  std {m['std']:.4g}  skew {m['skew']:.3f}  "
                       f"kurtosis {m['kurtosis']:.3f}")
            for side in ("top", "bottom"):
                words = ", ".join(repr(r["decoded"]) for r in stats[side][prompt][:top_k])
                typer.echo(f"   {side:6} {words}")
            b = bias.get(prompt, {})
            if "coef_log_freq" in b:
                typer.echo(f"   frequency bias {b['coef_log_freq']:+.4g} per 10x frequency "
                           f"[{b['coef_log_freq_lo']:+.4g}, {b['coef_log_freq_hi']:+.4g}] "
                           f"(n={b['n_words']} words, valence {b['coef_valence']:+.4g})")
        for row in stats["framing"]:
            typer.echo(f"   framing {row['prompt_a']!r} vs {row['prompt_b']!r}: "
                       f"spearman {row['spearman']:.3f}")
    from rmlens._io import number  # lazy: numpy and pandas load when the summary prints

    for row in summary["agreement"]:
        typer.echo(f"== agreement {row['model_a']} vs {row['model_b']} on {row['prompt']!r}: "
                   f"n={row['n_shared']} kendall {number(row.get('kendall_tau')):.3f} "
                   f"spearman {number(row.get('spearman')):.3f} "
                   f"rbo {number(row.get('rbo')):.3f}")


# `prompts` comes from the file that --prompts names
SWEEP = sections(SweepConfig, skip=("prompts",))


def sweep(
    ctx: typer.Context,
    out: Path = typer.Option(..., "--out", help="Output folder (resumed if it exists)."),
    prompts: Path = typer.Option(
        None, "--prompts", help="Prompt file, one per line (default: greatest / best / worst "
        "thing ever)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print summary.json to stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    **options,
) -> None:
    """Score every vocabulary token as a one-token answer: best and worst tokens per RM."""
    from rmlens.tokens import read_prompts
    from rmlens.tokens import sweep as run_sweep  # the command is `sweep` too

    config = resolve(ctx, SWEEP, options)
    if not config.rm:
        raise InputError("--rm: give at least one reward model (repeat --rm for several)")
    if prompts:
        config = config.replace(prompts=read_prompts(prompts))
    summary = run_sweep(config=config, out=out, quiet=quiet)
    save_config(config, out / "config.toml")
    if as_json:
        echo_json(summary)
    else:
        _print_summary(summary, out, config.top_k)


def register(app: typer.Typer) -> None:
    """Add ``rmlens sweep`` to ``app``."""
    app.command("sweep")(with_parameters(sweep, config_parameters(SWEEP)))
