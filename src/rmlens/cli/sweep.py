"""``rmlens sweep``: optimal and pessimal tokens of reward models (DESIGN.md section 4)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from rmlens.cli._common import handle_errors, option
from rmlens.tokens._run import SweepConfig


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
    for row in summary["agreement"]:
        typer.echo(f"== agreement {row['model_a']} vs {row['model_b']} on {row['prompt']!r}: "
                   f"n={row['n_shared']} kendall {row.get('kendall_tau', float('nan')):.3f} "
                   f"spearman {row.get('spearman', float('nan')):.3f} "
                   f"rbo {row.get('rbo', float('nan')):.3f}")


def register(app: typer.Typer) -> None:
    """Add ``rmlens sweep`` to ``app``."""

    @app.command()
    @handle_errors
    def sweep(
        rm: list[str] = typer.Option(..., "--rm", help=SweepConfig.__dataclass_fields__["rm"]
                                     .metadata["help"]),
        out: Path = typer.Option(..., "--out", help="Output folder (resumed if it exists)."),
        prompts: Path = typer.Option(None, "--prompts", help="Prompt file, one per line "
                                     "(default: greatest / best / worst thing ever)."),
        max_tokens: int = option(SweepConfig, "max_tokens", "--max-tokens"),
        batch_size: int = option(SweepConfig, "batch_size", "--batch-size"),
        top_k: int = option(SweepConfig, "top_k", "--top-k"),
        score_index: int = option(SweepConfig, "score_index", "--score-index"),
        device: str = option(SweepConfig, "device", "--device"),
        threads: int = option(SweepConfig, "threads", "--threads"),
        trust_remote_code: bool = option(SweepConfig, "trust_remote_code",
                                         "--trust-remote-code/--no-trust-remote-code"),
        as_json: bool = typer.Option(False, "--json", help="Print summary.json to stdout."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    ) -> None:
        """Score every vocabulary token as a one-token answer: best and worst tokens per RM."""
        from rmlens.tokens._run import DEFAULT_PROMPTS, read_prompts, run_sweep

        config = SweepConfig(
            rm=list(rm), prompts=read_prompts(prompts) if prompts else list(DEFAULT_PROMPTS),
            max_tokens=max_tokens, batch_size=batch_size, top_k=top_k,
            score_index=score_index, device=device, threads=threads,
            trust_remote_code=trust_remote_code,
        )
        summary = run_sweep(config, out, quiet=quiet)
        if as_json:
            typer.echo(json.dumps(summary, indent=2, default=str))
        else:
            _print_summary(summary, out, top_k)
