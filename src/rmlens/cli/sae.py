"""``rmlens sae DIR``: a thin command over :func:`rmlens.sae.fit_sae`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer

from rmlens.cli._options import resolve, save_config, sections, with_parameters
from rmlens.sae._config import SAEConfig

SAE = sections(SAEConfig)
TOP = 10  # latents shown, by |head weight|
SNIPPET = 70  # characters of a latent's top response


def _weight(card: dict) -> float:
    mean = card["head_weight"]["mean"]
    return abs(mean) if mean is not None and math.isfinite(mean) else -1.0


def _top(cards: list[dict]) -> list[dict]:
    return sorted(cards, key=_weight, reverse=True)[:TOP]


def _print(lens, directory: Path, as_json: bool) -> None:
    record, top = lens.record, _top(lens.cards)
    if as_json:
        typer.echo(json.dumps({"sae": record, "top_latents": top}, indent=2, default=str))
        return
    from rich.markup import escape
    from rich.table import Table

    from rmlens.cli._talk import Console, keep_whole

    source = {"trained here": "trained here"}.get(record["source"], f"from {record['source']}")
    if record.get("reused"):
        source = "reused (same settings and features)"
    console = Console()
    console.print(f"SAE on {record['n_responses']} responses of {record['n_pairs']} pairs "
                  f"({record['backbone']}, {record['d']} features): {source}")
    held = ("held-out" if record["source"] == "trained here" else "all")
    console.print(f"FVU on {record['n_heldout']} {held} responses: {record['fvu']:.3f} "
                  f"({record['fvu_standardized']:.3f} on standardized features); dead "
                  f"latents: {record['dead_latents']} of {lens.sae.n_latents}")
    shap = any(c.get("shap") for c in top)
    table = Table(title=f"Top {len(top)} latents by |weight in the audited heads| (mean ± "
                        f"std over {record['n_runs']} runs)", show_lines=True)
    for col in ("latent", "head weight", "correlate (ρ)", *(("TG SHAP",) if shap else ()),
                "top response"):
        table.add_column(col, overflow="fold")
    for card in top:
        hw = card["head_weight"]
        weight = "–" if _weight(card) < 0 else f"{hw['mean']:+.3f}\n± {hw['std']:.3f}"
        best = card["correlates"][:1]
        correlate = f"{best[0]['feature']}\n{best[0]['spearman']:+.2f}" if best else "–"
        text = card["top_responses"][0]["text"] if card["top_responses"] else ""
        snippet = text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…"
        tg = (card.get("shap") or {}).get("tg")
        shap_cell = (f"rank {tg['rank_among_latents']}\n{tg['share']:.3f}",) if shap and tg \
            else (("–",) if shap else ())  # fmt: skip
        table.add_row(card["name"], weight, escape(correlate), *shap_cell, escape(snippet))
    keep_whole(table, "latent", "head weight", "correlate (ρ)", "TG SHAP")
    console.print(table)
    console.print(f"results in {lens.folder}/ (cards.json, latents.parquet, "
                  "correlations.parquet, config.json, the SAE in sae-lens's format)")
    if record.get("shap", "").startswith("SHAP"):
        console.print(f"SHAP shares on the cards: {record['shap']}")
    else:
        console.print(f"next: rmlens attribute {directory} --features sae (the latents as pair "
                      f"features), then rmlens sae {directory} again for their SHAP shares")


def sae(
    ctx: typer.Context,
    directory: Path = typer.Argument(
        ..., metavar="DIR", help="Directory of a frozen audit (`rmlens memorize`)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars or status."),
    **options,
) -> None:
    """Find what drives memorization in the data: a sparse autoencoder on the audit's features.

    Trains a TopK SAE on the response features the audit's heads read (its embedding cache:
    nothing is encoded again), or uses --sae, one trained elsewhere in sae-lens's format.
    Writes DIR/sae/: the SAE, each pair's latents (chosen minus rejected; `rmlens attribute
    DIR --features sae` adds them to the pair features) and a name card per latent (top
    responses, correlation with the hand-built features, weight in the audited heads, SHAP
    shares once attributed). The same settings on the same audit reuse the saved SAE.

    With --out DEBIASED_DIR it also debiases the audit without retraining: the latents of
    --suppress (auto: tied to a shortcut feature, weighted by the heads, stable across split
    halves) have their decoder directions projected out of every run's head, and the
    re-scored runs form an experiment directory that `rmlens compare` reads beside DIR.
    """
    from rmlens.cli import _debias
    from rmlens.sae import fit_sae

    config = resolve(ctx, SAE, options, ignore=(_debias.TABLE,))
    asked = _debias.request(ctx, options, directory)  # checked before the SAE is fitted
    lens = fit_sae(directory, config, quiet=quiet)  # ParamError: main words it
    save_config(config, directory / "sae" / "sae.toml")
    if asked is None:
        _print(lens, directory, as_json)
    else:
        _debias.run(lens, directory, asked, as_json=as_json, quiet=quiet)


def register(app: typer.Typer) -> None:
    """Add ``rmlens sae`` to the command line."""
    from rmlens.cli._debias import parameters

    app.command("sae")(with_parameters(sae, parameters(SAE)))
