"""``rmlens mitigate``: one audit per training objective, then ``rmlens compare``."""

from __future__ import annotations

from pathlib import Path

import typer

from rmlens.cli._common import DATA_HELP, drop_invalid_option, load_table, map_option, sep_option
from rmlens.cli._options import config_parameters, resolve, save_config, sections, with_parameters
from rmlens.cli.compare import VERBOSE_HELP
from rmlens.comparison import CompareConfig, MitigateConfig, OveroptimizeConfig
from rmlens.memorization import AuditConfig

AUDIT = sections(AuditConfig, skip=MitigateConfig._owned["audit"])
PLAN = sections(MitigateConfig)
COMPARE = sections(CompareConfig, skip=MitigateConfig._owned["compare"])
OVEROPTIMIZE = sections(OveroptimizeConfig, skip=MitigateConfig._owned["overoptimize"])


def mitigate(
    ctx: typer.Context,
    data: Path = typer.Option(..., "--data", help=DATA_HELP),
    out: Path = typer.Option(
        ..., "--out", help="Comparison directory: one audit per objective (resumed if it exists)."
    ),
    column_map: list[str] = map_option(),
    sep: str | None = sep_option(),
    drop_invalid: bool = drop_invalid_option(),
    candidates: Path | None = typer.Option(
        None, "--candidates",
        help="Candidate pool with a gold reward (`rmlens data candidates`): also best-of-n "
        "overoptimization curves of every objective (as `rmlens overoptimize`).",
    ),  # fmt: skip
    verbose: bool = typer.Option(False, "--verbose", help=VERBOSE_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    **options,
) -> None:
    """Audit the data once per training objective (same plan and seed), then compare them.

    Writes OUT/<objective>/ (an experiment directory each) and OUT/compare.parquet,
    compare.json, compare_*.png and compare.html. Audit options are those of `rmlens
    memorize`; comparison options those of `rmlens compare`. With --candidates, also
    OUT/overoptimization.* (options of `rmlens overoptimize`). With --debias sae (frozen
    mode, a linear or logistic head, bt among --objectives), also OUT/bt/sae/ (the SAE lens,
    as `rmlens sae OUT/bt`) and OUT/sae_debias/: the bt runs' heads with the shortcut
    latents projected out, no retraining (as `rmlens sae OUT/bt --out OUT/sae_debias`),
    compared (and scored on the candidates) as a row sae_debias. Started again on the same
    OUT, finished runs are kept (and the SAE reused). Prints the warnings (each once), then
    which objective is best at what cost (the answer that opens compare.html) and where the
    files are; --verbose prints the full tables (and the best-of-n ones) before them.
    """
    from rmlens.cli.compare import print_answer, print_comparison
    from rmlens.comparison import check_debias
    from rmlens.comparison import mitigate as run_mitigate
    from rmlens.report import write_compare_report

    config = resolve(ctx, AUDIT, options, ignore=("mitigate", "compare", "overoptimize"))
    plan = resolve(ctx, PLAN, options, table="mitigate")
    compare_config = resolve(ctx, COMPARE, options, table="compare").replace(
        seed=config.seed, n_boot=config.n_boot
    )
    oo_config = resolve(ctx, OVEROPTIMIZE, options, table="overoptimize")
    check_debias(config, plan.debias)  # before the data are read
    pairs = load_table(data, column_map, sep=sep, drop_invalid=drop_invalid)
    result = run_mitigate(pairs, config, out=out, objectives=plan.objectives,
                          debias=plan.debias, compare_config=compare_config,
                          candidates=candidates, overoptimize_config=oo_config,
                          quiet=quiet)  # fmt: skip
    tables = {"mitigate": plan, "compare": compare_config}
    if candidates is not None:
        tables["overoptimize"] = oo_config
    save_config(config, out / "config.toml", sections=AUDIT, **tables)
    page = write_compare_report(out)
    result.files += ["config.toml", page.name]
    if verbose:
        print_comparison(result, out)
        if result.overoptimization is not None:
            from rmlens.cli.overoptimize import print_overoptimization

            print_overoptimization(result.overoptimization, out)
    print_answer(result, out, verbose=verbose)  # last: the answer and where the files are


def register(app: typer.Typer) -> None:
    """Add the ``mitigate`` command to ``app``."""
    sections = config_parameters(AUDIT + PLAN + COMPARE + OVEROPTIMIZE)
    app.command("mitigate")(with_parameters(mitigate, sections))
