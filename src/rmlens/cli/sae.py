"""``rmlens sae DIR``: a thin command over :func:`rmlens.sae.fit_sae`."""

from __future__ import annotations

import math
from pathlib import Path

import typer

from rmlens.cli._options import resolve, save_config, sections, with_parameters
from rmlens.cli._talk import echo_json
from rmlens.sae import SAEConfig

SAE = sections(SAEConfig)
TOP = 10  # latents shown, by |head weight|
DRIVERS = 5  # latents shown per target, by SHAP share
SNIPPET = 70  # characters of a latent's top response


def _weight(card: dict) -> float:
    mean = card["head_weight"]["mean"]
    return abs(mean) if mean is not None and math.isfinite(mean) else -1.0


def _top(cards: list[dict]) -> list[dict]:
    return sorted(cards, key=_weight, reverse=True)[:TOP]


def _drivers(cards: list[dict], target: str) -> list[dict]:
    """The ``DRIVERS`` latents with the largest SHAP share of ``target`` (informative fits)."""
    def share(card: dict) -> float:
        entry = (card.get("shap") or {}).get(target)
        ok = entry and entry.get("informative", True) and math.isfinite(entry["share"])
        return entry["share"] if ok else -1.0

    return [c for c in sorted(cards, key=share, reverse=True)[:DRIVERS] if share(c) >= 0]


def _table(cards: list[dict], title: str, shap: str | None = None):
    """Latents as rows: head weight, strongest correlate, SHAP share (of ``shap``), top
    response."""
    from rich.markup import escape
    from rich.table import Table

    from rmlens.cli._talk import keep_whole

    table = Table(title=title, show_lines=True)
    share = f"{shap.upper()} SHAP" if shap else None
    for col in ("latent", "head weight", "correlate (ρ)", *((share,) if share else ()),
                "top response"):
        table.add_column(col, overflow="fold")
    for card in cards:
        hw = card["head_weight"]
        weight = "–" if _weight(card) < 0 else f"{hw['mean']:+.3f}\n± {hw['std']:.3f}"
        best = card["correlates"][:1]
        correlate = f"{best[0]['feature']}\n{best[0]['spearman']:+.2f}" if best else "–"
        text = card["top_responses"][0]["text"] if card["top_responses"] else ""
        if card["top_responses"] and not text.strip():
            text = "(empty response)"
        snippet = text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…"
        cells = [card["name"], weight, escape(correlate)]
        if shap:
            entry = card["shap"][shap]
            cells.append(f"{entry['share']:.4f}\n#{entry['rank']} of all")
        table.add_row(*cells, escape(snippet))
    keep_whole(table, "latent", "head weight", "correlate (ρ)", *((share,) if share else ()))
    return table


def _print(lens, directory: Path, as_json: bool) -> None:
    record, top = lens.record, _top(lens.cards)
    if as_json:
        drivers = {t: _drivers(lens.cards, t) for t in ("tg", "cm")}
        echo_json({"sae": record, "top_latents": top, "drivers": drivers})
        return
    from rmlens.cli._talk import Console

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
    console.print(_table(top, f"Top {len(top)} latents by |weight in the audited heads| (mean "
                             f"± std over {record['n_runs']} runs)"))
    for target, words in (("tg", "TG (generalization)"), ("cm", "CM (memorization)")):
        driving = _drivers(lens.cards, target)
        if driving:
            console.print(_table(driving, f"Latents that drive {words}: largest SHAP share",
                                 shap=target))
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
        return
    # debias, then print the lens and what the debiasing did (one JSON with --json)
    found = _debias.run(directory, asked, quiet=quiet)
    if as_json:
        echo_json({"sae": lens.record, "top_latents": _top(lens.cards),
                   "debias": _debias.result(found)})
        return
    _print(lens, directory, False)
    _debias.say(found, directory)


def register(app: typer.Typer) -> None:
    """Add ``rmlens sae`` to the command line."""
    from rmlens.cli._debias import parameters

    app.command("sae")(with_parameters(sae, parameters(SAE)))
