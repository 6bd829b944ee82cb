"""``rmlens attribute DIR``: a thin command over :func:`rmlens.attribution.attribute`."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from rmlens import InputError
from rmlens.attribution import AttributeConfig
from rmlens.cli._options import config_parameters, resolve, save_config, sections, with_parameters
from rmlens.cli._talk import echo_json

TOP = 5


def _print_features(as_json: bool) -> None:
    from rmlens.attribution import list_features

    table = list_features()
    if as_json:
        echo_json(table.to_dict(orient="records"))
        return
    from rich.table import Table

    from rmlens.cli._talk import Console, keep_whole

    out = Table(title=f"{len(table)} pair features (response features give _chosen, "
                      "_rejected, _diff columns)")
    for col in ("name", "kind", "description", "source"):
        out.add_column(col, overflow="fold")
    for row in table.itertuples():
        out.add_row(row.name, row.kind, row.description, row.source)
    keep_whole(out, "name", "kind")  # the description and source wrap
    Console().print(out)


def _stable(row) -> str:
    """The console's stability cell: rank correlation and top-10 overlap between the halves,
    a line each, the level of fits to pure noise in brackets (a fit that explains nothing:
    why not)."""
    import math

    from rmlens.attribution import MEANINGLESS

    if not math.isfinite(row.rank_spearman) and not math.isfinite(row.top10_overlap):
        return "–"
    if not row.informative:  # held-out R^2 below the floor (Attributor.fit_)
        return MEANINGLESS
    return (f"ρ {row.rank_spearman:.2f} ({row.rank_spearman_noise:.2f})\n"
            f"top-10 {row.top10_overlap:.1f} ({row.top10_overlap_noise:.2f})")


def _top(imp, fit) -> dict:
    """``"target/regressor"`` -> its ``TOP`` features and importances; empty for a fit
    that explains nothing (held-out R^2 below the floor): its features are not ranked."""
    return {
        f"{t}/{r}": imp[(imp.target == t) & (imp.regressor == r)].nsmallest(TOP, "rank")
        [["feature", "importance"]].to_dict(orient="records") if ok else []
        for t, r, ok in fit[["target", "regressor", "informative"]].itertuples(index=False)
    }


def _print_result(attributor, out_dir: Path, as_json: bool) -> None:
    from rmlens.attribution import R2_FLOOR, attribution_warnings, fit_record, stability_record

    fit = attributor.fit_
    top = _top(attributor.importance_, fit)
    stability = stability_record(attributor)
    warnings = attribution_warnings(fit)
    for warning in warnings:  # stderr, as every warning (JSON or not)
        print(f"warning: {warning}", file=sys.stderr)
    if as_json:
        echo_json({"fit": fit_record(fit), "r2_floor": R2_FLOOR, "top": top,
                   "warnings": warnings, "stability": stability,
                   "left_out": attributor.left_out_, "notes": attributor.notes_})
        return
    from rmlens.cli._talk import Console

    console = Console()
    console.print(_fit_table(fit, top, console.width))
    notes = list(dict.fromkeys(fit.stability_note))
    console.print("stability: ρ, the Spearman correlation of the features' importances fit to "
                  "the two halves of the runs; top-10, the share of their top 10 both hold; in "
                  "brackets, the same for fits to pure noise; " + "; ".join(notes))
    if warnings:
        console.print(f"{len(warnings)} warning(s) on stderr and in attribution.json")
    _print_diff(console, attributor.diff_, fit)
    for note in attributor.notes_:
        console.print(f"note: {note}")
    console.print(f"results in {out_dir}/ (attribution.parquet, attribution_fit.parquet, "
                  "attribution_diff.parquet, attribution_*.png)")


_PROSE = 24  # the narrowest a features cell that says why there are none wraps to


def _fit_table(fit, top: dict, width: int):
    """The console's table of the fits: held-out R^2, the top features with their mean |SHAP|
    (a line each, names whole), the ranking's stability. Target, regressor, R^2, features and
    stability side by side where ``width`` allows them (R^2's ± std on a line of its own if
    need be); else the target, regressor and R^2 stacked in a first column. Every width is
    fixed at the widest line it must keep whole; only prose (why a fit is not informative)
    wraps, and on a console too narrow for the names they fold, never cut with an ellipsis."""
    from rich.markup import escape
    from rich.table import Table

    from rmlens.attribution import MEANINGLESS, not_informative
    from rmlens.cli._talk import table_width

    ranked = [d for t, r in zip(fit.target, fit.regressor) for d in top[f"{t}/{r}"]]
    name_w = max((len(str(d["feature"])) for d in ranked), default=0)
    imp_w = max((len(f"{d['importance']:.3g}") for d in ranked), default=0)

    def features(row, padded: bool = True) -> str:  # names padded, importances aligned
        if not row.informative:
            return not_informative(row.r2)
        n, i = (name_w, imp_w) if padded else (0, 0)
        return "\n".join(escape(f"{d['feature']!s:<{n}} {d['importance']:>{i}.3g}")
                         for d in top[f"{row.target}/{row.regressor}"])

    fits = list(fit.itertuples())
    r2s = [(f"{row.r2:.3f}", f"± {row.r2_std:.3f}") for row in fits]
    stable = [_stable(row) for row in fits]
    feat_w = max(_PROSE, name_w + 1 + imp_w)
    stab_w = max([len("stability")] + [len(w) for w in MEANINGLESS.split()]
                 + [len(line) for s in stable if s != MEANINGLESS for line in s.splitlines()])
    reg_w = max([len("regressor")] + [len(row.regressor) for row in fits])
    title = (f"What explains TM, TG and CM ({fit.n_pairs.max()} pairs): held-out R^2 (group "
             "K-fold), top features by mean |SHAP|, and how stable their ranking is between two "
             "halves of the runs")
    head = f"top {TOP} features, mean |SHAP|"
    table = Table(title=title, show_lines=True)  # a rule between fits
    for sep in (" ", "\n"):  # one column each: R^2 ± std on a line, else on two
        r2_w = max([3] + [len(line) for r2 in r2s for line in sep.join(r2).splitlines()])
        if table_width([6, reg_w, r2_w, feat_w, stab_w]) <= width:
            for col, w in (("target", 6), ("regressor", reg_w), ("R^2", r2_w), (head, feat_w),
                           ("stability", stab_w)):
                table.add_column(col, width=w, overflow="fold")
            for row, r2, s in zip(fits, r2s, stable):
                table.add_row(row.target.upper(), row.regressor, sep.join(r2), features(row), s)
            return table
    firsts = [f"{row.target.upper()} {row.regressor}\n{' '.join(r2)}" for row, r2 in zip(fits, r2s)]
    fit_w = max(len(line) for cell in firsts for line in cell.splitlines())
    roomy = table_width([fit_w, feat_w, stab_w]) <= width  # else features and stability narrow
    table.add_column("fit\nR^2", width=fit_w, overflow="fold")
    table.add_column(head, width=feat_w if roomy else None, overflow="fold")
    table.add_column("stability", width=stab_w if roomy else None, overflow="fold")
    for row, cell, s in zip(fits, firsts, stable):
        table.add_row(cell, features(row, padded=roomy), s)  # unpadded, a name wraps alone
    return table


def _print_diff(console, diff, fit) -> None:
    """The TM - TG importance line, for the first regressor whose TM and TG fits are both
    informative (else why there is none)."""
    if not len(diff):
        return
    ok = fit[fit.informative]
    useful = set(ok.regressor[ok.target == "tm"]) & set(ok.regressor[ok.target == "tg"])
    regs = [r for r in dict.fromkeys(diff.regressor) if r in useful]
    if not regs:
        console.print("used for memorization more than generalization (TM - TG importance): "
                      "not informative (no regressor's TM and TG fits both reach the R^2 floor)")
        return
    lead = diff[diff.regressor == regs[0]].head(TOP)
    console.print("used for memorization more than generalization (TM - TG importance, "
                  f"{regs[0]}): "
                  + ", ".join(f"{f} ({d:+.3g})" for f, d in zip(lead.feature, lead["diff"])))


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
