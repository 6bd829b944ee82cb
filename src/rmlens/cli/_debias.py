"""``rmlens sae DIR --out DEBIASED_DIR``: training-free debiasing through the SAE lens, a thin
shell over :func:`rmlens.sae.debias`: its options (``DebiasConfig`` and ``--out``), their
checks before the SAE is fitted, and what it prints."""

from __future__ import annotations

import inspect
from dataclasses import fields
from pathlib import Path

import typer

from rmlens import InputError
from rmlens.cli._options import Section, config_parameters, flag, resolve, sections, typed_flags
from rmlens.sae import DebiasConfig

DEBIAS = sections(DebiasConfig)
TABLE = "debias"  # the --config file's table of these options


def parameters(sae: list[Section]) -> list[inspect.Parameter]:
    """``--out``, then the options of ``sae`` and of :class:`DebiasConfig`, then ``--config``."""
    out = inspect.Parameter(
        "out", inspect.Parameter.KEYWORD_ONLY, annotation=Path | None,
        default=typer.Option(
            None, "--out", metavar="DEBIASED_DIR",
            help="Also debias the audit without retraining: project the suppressed latents' "
                 "decoder directions out of each run's head and write the re-scored runs "
                 "here, an experiment directory (`rmlens compare DIR DEBIASED_DIR`).",
            show_default=False),
    )  # fmt: skip
    return [out, *config_parameters(sae + DEBIAS)]


def request(ctx: typer.Context, options: dict, directory: Path) -> tuple[Path, DebiasConfig] | None:
    """``(out, config)`` when ``--out`` asks for debiasing, else None. Checked before the SAE
    is fitted: its options without ``--out``, and an audit whose heads cannot be projected
    (MLP), are refused."""
    from rmlens.sae import check_debiasable

    names = {f.name for f in fields(DebiasConfig)}
    typed = typed_flags(ctx, {k: v for k, v in options.items() if k in names})
    out = options.get("out")
    if out is None:
        if typed:
            raise InputError(f"{flag(next(iter(typed)))} applies with --out DEBIASED_DIR only "
                             "(it says which latents to project out of the heads)")
        return None
    config = resolve(ctx, DEBIAS, options, table=TABLE)
    check_debiasable(directory)
    return Path(out), config


def run(directory: Path, asked: tuple[Path, DebiasConfig], *, quiet: bool):
    """Debias the audit in ``directory`` as ``asked`` (:func:`request`); what it did."""
    from rmlens.sae import debias

    out, config = asked
    return debias(directory, config, out=out, quiet=quiet)


def result(found) -> dict:
    """What the debiasing did, for ``--json``."""
    return {"out": str(found.out), "latents": found.latents, "why": found.record["why"],
            "figures": found.figures}  # fmt: skip


def say(found, directory: Path) -> None:
    """The debiasing in words: the latents and why, the figures before and after."""
    from rich.markup import escape

    from rmlens.cli._talk import Console

    console = Console()
    how = "by the rule" if found.record.get("rule") else "as named"
    console.print(f"debiased ({how}): {len(found.latents)} latent(s) projected out of every "
                  "run's head, no retraining")
    for latent in found.latents:
        reason = found.record["why"].get(str(latent), "named with --suppress")
        console.print(f"  sae_{latent}: {escape(reason)}")
    figures = found.figures
    for key, words in (("heldout_accuracy", "held-out accuracy"),
                       ("margin_length_corr_abs", "|corr(margin, length difference)|")):
        b, a = figures[key]["before"], figures[key]["after"]
        console.print(f"  {words}: {_ms(b)} before, {_ms(a)} after (mean ± std over "
                      f"{a['runs']} runs)")
    console.print("  caveat: a suppressed direction can carry real quality too; judge it "
                  "with the objectives' figures")
    console.print(f"results in {found.out}/ (an experiment directory, brute-force estimator); "
                  f"next: rmlens compare {directory} {found.out} --out COMPARISON")


def _ms(figure: dict) -> str:
    """``mean ± std`` of a figure (NaN, saved as null, shown as such)."""
    def num(v) -> str:
        return "nan" if v is None else f"{v:.3f}"

    return f"{num(figure['mean'])} ± {num(figure['std'])}"
