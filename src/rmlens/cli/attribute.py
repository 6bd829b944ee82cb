"""``rmlens attribute DIR``: a thin command over :func:`rmlens.attribution.attribute`."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import typer

from rmlens.attribution import AttributeConfig
from rmlens.cli._common import fail, handle_errors, option

_DEFAULTS = AttributeConfig()
_HELP = {f.name: f.metadata["help"] for f in fields(AttributeConfig)}
TOP = 5


def _names(value: str, what: str) -> tuple[str, ...]:
    names = tuple(v.strip().lower() for v in value.split(",") if v.strip())
    if not names:
        raise fail(f"--{what}: give at least one name, got {value!r}")
    return names


def _print_features(as_json: bool) -> None:
    from rmlens.attribution import list_features

    table = list_features()
    if as_json:
        typer.echo(json.dumps(table.to_dict(orient="records"), indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    out = Table(title=f"{len(table)} pair features (response features give _chosen, "
                      "_rejected, _diff columns)")
    for col in ("name", "kind", "description", "source"):
        out.add_column(col, overflow="fold")
    for row in table.itertuples():
        out.add_row(row.name, row.kind, row.description, row.source)
    Console().print(out)


def _print_result(attributor, out_dir: Path, as_json: bool) -> None:
    fit = attributor.fit_
    imp = attributor.importance_
    top = {
        f"{t}/{r}": imp[(imp.target == t) & (imp.regressor == r)].nsmallest(TOP, "rank")
        [["feature", "importance"]].to_dict(orient="records")
        for t, r in fit[["target", "regressor"]].itertuples(index=False)
    }
    if as_json:
        typer.echo(json.dumps({"fit": fit.to_dict(orient="records"), "top": top,
                               "notes": attributor.notes_}, indent=2, default=float))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"What explains TM, TG and CM ({fit.n_pairs.max()} pairs): held-out R^2 "
                        "(group K-fold) and top features by mean |SHAP|")
    for col in ("target", "regressor", "R^2", f"top {TOP} features"):
        table.add_column(col)
    for row in fit.itertuples():
        feats = ", ".join(f"{d['feature']} ({d['importance']:.3g})"
                          for d in top[f"{row.target}/{row.regressor}"])
        table.add_row(row.target.upper(), row.regressor, f"{row.r2:.3f} ± {row.r2_std:.3f}", feats)
    console = Console()
    console.print(table)
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


def register(app: typer.Typer) -> None:
    """Add ``rmlens attribute`` to the command line."""

    @app.command("attribute")
    @handle_errors
    def attribute_command(
        out_dir: Path = typer.Argument(
            None, metavar="DIR", help="Experiment directory written by `rmlens memorize`."
        ),
        list_features: bool = typer.Option(
            False, "--list-features", help="Print the feature table (name, description, "
            "source) and exit; needs no DIR."
        ),
        targets: str = typer.Option(",".join(_DEFAULTS.targets), "--targets",
                                    help=_HELP["targets"] + " Comma-separated."),
        regressors: str = typer.Option(",".join(_DEFAULTS.regressors), "--regressors",
                                       help=_HELP["regressors"] + " Comma-separated."),
        folds: int = option(AttributeConfig, "folds", "--folds"),
        seed: int = option(AttributeConfig, "seed", "--seed"),
        tokenizer: str = option(AttributeConfig, "tokenizer", "--tokenizer"),
        shap_rows: int = option(AttributeConfig, "shap_rows", "--shap-rows"),
        mlp_shap_rows: int = option(AttributeConfig, "mlp_shap_rows", "--mlp-shap-rows"),
        shap_background: int = option(AttributeConfig, "shap_background", "--shap-background"),
        n_jobs: int = option(AttributeConfig, "n_jobs", "--n-jobs"),
        plots: bool = option(AttributeConfig, "plots", "--plots/--no-plots"),
        as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    ) -> None:
        """Explain TM, TG and CM with pair features: regressors, held-out R^2 and SHAP."""
        if list_features:
            _print_features(as_json)
            return
        if out_dir is None:
            raise fail("missing argument DIR (the experiment directory of `rmlens memorize`)")
        from rmlens.attribution import attribute

        config = AttributeConfig(
            targets=_names(targets, "targets"),
            regressors=_names(regressors, "regressors"),
            folds=folds,
            seed=seed,
            tokenizer=None if tokenizer.lower() == "none" else tokenizer,
            shap_rows=shap_rows,
            mlp_shap_rows=mlp_shap_rows,
            shap_background=shap_background,
            n_jobs=n_jobs,
            plots=plots,
        )
        attributor = attribute(out_dir, config=config, quiet=quiet)
        _print_result(attributor, out_dir, as_json)
