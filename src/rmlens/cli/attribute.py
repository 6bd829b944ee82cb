"""``rmlens attribute DIR``: a thin command over :func:`rmlens.attribution.attribute`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from rmlens._errors import InputError
from rmlens.attribution._config import AttributeConfig
from rmlens.cli._options import config_parameters, resolve, save_config, sections, with_parameters

TOP = 5


def _print_features(as_json: bool) -> None:
    from rmlens.attribution import list_features

    table = list_features()
    if as_json:
        typer.echo(json.dumps(table.to_dict(orient="records"), indent=2))
        return
    from rich.table import Table

    from rmlens.cli._talk import Console

    out = Table(title=f"{len(table)} pair features (response features give _chosen, "
                      "_rejected, _diff columns)")
    for col in ("name", "kind", "description", "source"):
        out.add_column(col, overflow="fold")
    for row in table.itertuples():
        out.add_row(row.name, row.kind, row.description, row.source)
    Console().print(out)


def _stable(row) -> str:
    """The console's stability cell: rank correlation and top-10 overlap between the halves,
    the level of fits to pure noise in brackets."""
    import math

    if not math.isfinite(row.rank_spearman) and not math.isfinite(row.top10_overlap):
        return "–"
    return (f"ρ {row.rank_spearman:.2f} ({row.rank_spearman_noise:.2f}), "
            f"top-10 {row.top10_overlap:.1f} ({row.top10_overlap_noise:.2f})")


def _print_result(attributor, out_dir: Path, as_json: bool) -> None:
    from rmlens.attribution._attribute import stability_record

    fit = attributor.fit_
    imp = attributor.importance_
    top = {
        f"{t}/{r}": imp[(imp.target == t) & (imp.regressor == r)].nsmallest(TOP, "rank")
        [["feature", "importance"]].to_dict(orient="records")
        for t, r in fit[["target", "regressor"]].itertuples(index=False)
    }
    stability = stability_record(attributor)
    for warning in stability["warnings"]:  # stderr, as every warning (JSON or not)
        print(f"warning: {warning}", file=sys.stderr)
    if as_json:
        r2 = ["target", "regressor", "r2", "r2_std", "n_pairs", "n_dropped_nan", "n_folds"]
        typer.echo(json.dumps({"fit": fit[r2].to_dict(orient="records"), "top": top,
                               "stability": stability, "left_out": attributor.left_out_,
                               "notes": attributor.notes_}, indent=2, default=float))
        return
    from rich.table import Table

    from rmlens.cli._talk import Console

    table = Table(title=f"What explains TM, TG and CM ({fit.n_pairs.max()} pairs): held-out R^2 "
                        "(group K-fold), top features by mean |SHAP|, and how stable their "
                        "ranking is between two halves of the runs")
    for col in ("target", "regressor", "R^2", f"top {TOP} features", "stability"):
        table.add_column(col)
    for row in fit.itertuples():
        feats = ", ".join(f"{d['feature']} ({d['importance']:.3g})"
                          for d in top[f"{row.target}/{row.regressor}"])
        table.add_row(row.target.upper(), row.regressor, f"{row.r2:.3f} ± {row.r2_std:.3f}", feats,
                      _stable(row))
    console = Console()
    console.print(table)
    notes = list(dict.fromkeys(fit.stability_note))
    console.print("stability: ρ, the Spearman correlation of the features' importances fit to "
                  "the two halves of the runs; top-10, the share of their top 10 both hold; in "
                  "brackets, the same for fits to pure noise; " + "; ".join(notes))
    if stability["warnings"]:
        console.print(f"{len(stability['warnings'])} stability warning(s) on stderr and in "
                      "attribution.json")
    diff = attributor.diff_
    if len(diff):
        lead = diff[diff.regressor == diff.regressor.iloc[0]].head(TOP)
        console.print("used for memorization more than generalization (TM - TG importance, "
                      f"{lead.regressor.iloc[0]}): "
                      + ", ".join(f"{f} ({d:+.3g})" for f, d in zip(lead.feature, lead["diff"])))
    for note in attributor.notes_:
        console.print(f"note: {note}")
    console.print(f"results in {out_dir}/ (attribution.parquet, attribution_fit.parquet, "
                  "attribution_diff.parquet, attribution_*.png)")


ATTRIBUTE = sections(AttributeConfig)


def attribute(
    ctx: typer.Context,
    out_dir: Path = typer.Argument(
        None, metavar="DIR", help="Experiment directory written by `rmlens memorize`."
    ),
    list_features: bool = typer.Option(
        False, "--list-features", help="Print the feature table (name, description, source) "
        "and exit; needs no DIR."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    **options,
) -> None:
    """Explain TM, TG and CM with pair features: regressors, held-out R^2 and SHAP.

    Refreshes DIR/report.html when DIR holds one (else run `rmlens report DIR`).
    """
    if list_features:
        _print_features(as_json)
        return
    if out_dir is None:
        raise InputError("missing argument DIR (the experiment directory of `rmlens memorize`)")
    from rmlens.attribution import attribute as run_attribution

    config = resolve(ctx, ATTRIBUTE, options)
    attributor = run_attribution(out_dir, config, quiet=quiet)  # ParamError: main words it
    save_config(config, out_dir / "attribute.toml")
    _print_result(attributor, out_dir, as_json)
    refresh_report(out_dir, quiet=as_json)


def refresh_report(out_dir: Path, *, quiet: bool) -> None:
    """Rewrite DIR/report.html with the new results, or say how to make one."""
    if (out_dir / "report.html").exists():
        from rmlens.report import write_report

        path = write_report(out_dir, quiet=True)
        if not quiet:
            print(f"report updated: {path}", file=sys.stderr)
    elif not quiet:
        print(f"see it with the audit: rmlens report {out_dir}", file=sys.stderr)


def register(app: typer.Typer) -> None:
    """Add ``rmlens attribute`` to the command line."""
    app.command("attribute")(with_parameters(attribute, config_parameters(ATTRIBUTE)))
