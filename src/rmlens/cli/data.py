"""``rmlens data inspect``, ``synth`` and ``candidates``: thin commands over :mod:`rmlens.data`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from rmlens import InputError
from rmlens.cli import convert
from rmlens.cli._common import DATA_HELP, SEP_HELP, map_option, parse_column_map, sep_option
from rmlens.cli._options import (
    config_beside,
    config_parameters,
    resolve,
    save_config,
    sections,
    typed_flags,
    with_parameters,
)
from rmlens.cli._talk import echo_json
from rmlens.data import CandidatesConfig, SynthConfig

MAX_SHOWN = 50


def _fmt(stats: dict[str, float] | None, keys=("mean", "min", "median", "max")) -> str:
    if not stats:
        return "-"
    return "  ".join(f"{k} {stats[k]:.4g}" for k in keys)


def _render(result: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    from rmlens.cli._talk import Console

    s = result["summary"]
    console = Console()
    table = Table(title=f"{escape(str(result['source']))}: {s['pairs']} pairs")
    table.add_column("field")
    table.add_column("value")
    table.add_row("layout", str(result["layout"]))
    table.add_row("format", f"{s['format']['text']} text, {s['format']['conversational']} chat")
    if s["users"] is not None:
        users = f"{s['users']} ({_fmt(s['pairs_per_user'], ('min', 'median', 'max'))} per user)"
        if s["missing_user_id"]:
            users += f", {s['missing_user_id']} pairs without user_id"
        table.add_row("users", users)
    else:
        table.add_row("users", "- (no user_id)")
    if s["models"]:
        models = s["models"].items()
        table.add_row(
            "models (win rate)",
            escape(", ".join(f"{m} {v['win_rate']:.2f} of {v['pairs']}" for m, v in models)),
        )
    table.add_row("margin", _fmt(s["margin"]) if s["margin"] else "- (no margin)")
    for part in ("prompt", "chosen", "rejected"):
        stats = s["length"][part]
        table.add_row(f"{part} words", _fmt(stats["words"]))
        table.add_row(f"{part} chars", _fmt(stats["chars"]))
    if s["chosen_longer"] is not None:
        table.add_row("chosen longer", f"{s['chosen_longer']:.1%} of pairs with unequal lengths")
    table.add_row(
        "duplicates",
        f"{s['duplicates']['ids']} ids, {s['duplicates']['pairs']} repeated pairs, "
        f"{s['identical_responses']} chosen == rejected, {s['empty_responses']} empty responses",
    )
    across = s.get("across_groups")
    if across:
        table.add_row(f"across groups ({escape(across['group_by'])}, {across['groups']})",
                      _across(across))  # fmt: skip
    if s["mechanisms"]:
        table.add_row("mechanisms", ", ".join(f"{k} {v}" for k, v in s["mechanisms"].items()))
    console.print(table)
    _verdict(console, result["problems"], result.get("warnings") or [], across)


def _across(across: dict[str, Any]) -> str:
    """The cross-group counts in one cell: texts, pairs, conflicts."""
    texts = across["texts"]
    return (
        f"{texts['unique']} unique of {texts['responses']} responses (with their prompt), "
        f"{texts['in_several_groups']} under several groups; "
        f"{across['pairs_repeated_across_groups']} pairs repeated across groups; "
        f"{across['conflicting_pairs']} judged the other way elsewhere "
        f"({across['conflicts_across_groups']} across groups)"
    )


def _verdict(console, problems: list[str], warnings: list[dict], across: dict | None) -> None:
    """The rows that could not be read, then what the readable pairs hold; "no problems
    found" only when both lists are empty."""
    from rich.markup import escape

    if problems:
        n = len(problems)
        console.print(f"[bold red]{n} error{'s' if n > 1 else ''} (rows not read; memorize, "
                      "train and score stop at the first, exit 2):[/]")
        for message in problems[:MAX_SHOWN]:
            console.print(f"  {escape(message)}", highlight=False, soft_wrap=True)
        if n > MAX_SHOWN:
            console.print(f"  ... and {n - MAX_SHOWN} more (all of them with --json)")
    if warnings:
        n = len(warnings)
        console.print(f"[bold yellow]{n} warning{'s' if n > 1 else ''} about the pairs read:[/]")
        for warning in warnings:
            console.print(f"  {escape(warning['message'])}", highlight=False, soft_wrap=True)
    shared = (across or {}).get("pairs_sharing_text_across_groups", 0)
    if shared:
        console.print(
            f"note: {shared} pairs share a response (same prompt) with a pair of another "
            f"group ('{escape(across['group_by'])}'): an audit's RMs may have seen it under "
            "another group's pair, which raises TG",
            highlight=False, soft_wrap=True,
        )  # fmt: skip
    if not problems and not warnings:
        console.print("no problems found")


SYNTH = sections(SynthConfig)


def synth(
    ctx: typer.Context,
    out: Path = typer.Option(
        ..., "--out", help="Output: .jsonl, .jsonl.gz, .json, .csv or .parquet."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No status line."),
    **options,
) -> None:
    """Write synthetic preference pairs with planted mechanisms (see the `mechanism` column)."""
    from rmlens.data import save_pairs, synthesize

    config = resolve(ctx, SYNTH, options)
    frame = synthesize(config)
    path = save_pairs(frame, out)
    save_config(config, config_beside(out))
    if not quiet:
        counts = frame["mechanism"].value_counts()
        mix = ", ".join(f"{k} {counts[k]}" for k in counts.index)
        print(f"wrote {len(frame)} pairs ({mix}) to {path}", file=sys.stderr)


CANDIDATES = sections(CandidatesConfig)
SYNTHETIC_ONLY = ("n_prompts", "policy", "padding", "signature", "taste", "n_users",
                  "signature_model", "signature_phrase")  # fmt: skip


def candidates(
    ctx: typer.Context,
    out: Path = typer.Option(
        ..., "--out", help="Output: .jsonl, .jsonl.gz, .json, .csv or .parquet."
    ),
    source: Path | None = typer.Option(
        None, "--from",
        help="Real pairs instead of the synthetic world: each prompt's distinct responses "
        "are its candidates, their gold reward a --gold-rm's score.",
    ),  # fmt: skip
    gold_rm: str | None = typer.Option(
        None, "--gold-rm", help="With --from: the gold RM (an RM preset, folder or hub id)."
    ),
    holdout: float = typer.Option(
        0.5, "--holdout", min=0.0, max=1.0,
        help="With --from: share of the prompts held out as the pool; the others' pairs, "
        "relabelled by the gold RM, go to --pairs-out.",
    ),  # fmt: skip
    pairs_out: Path | None = typer.Option(
        None, "--pairs-out",
        help="With --from: where to write the gold-labelled pairs the proxies train on.",
    ),  # fmt: skip
    policy_model: str | None = typer.Option(
        None, "--policy-model",
        help="With --from: a causal LM (a preset, folder or hub id) that writes the "
        "candidates to the prompts of the pairs: --responses samples to each pooled prompt, "
        "two to each other prompt, whose pair the gold RM labels.",
    ),  # fmt: skip
    max_new_tokens: int = typer.Option(
        48, "--max-new-tokens", min=1, help="With --policy-model: the longest response, in tokens."
    ),
    temperature: float = typer.Option(
        1.0, "--temperature", min=0.0, help="With --policy-model: the sampling temperature (> 0)."
    ),
    top_p: float | None = typer.Option(
        None, "--top-p", min=0.0, max=1.0,
        help="With --policy-model: nucleus sampling's mass (default: the whole distribution).",
    ),  # fmt: skip
    precision: str = typer.Option(
        "auto", "--precision",
        help="With --policy-model: the policy's precision, fp32, bf16 or auto (fp32: bf16 "
        "sampling is not yet shown to keep the responses' gold).",
    ),  # fmt: skip
    column_map: list[str] = map_option(),
    sep: str | None = sep_option(),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No status line."),
    **options,
) -> None:
    """Write a best-of-n candidate pool: prompts with N candidate responses each and their
    gold reward; `rmlens overoptimize --candidates` reads it.

    By default the synthetic world of `rmlens data synth`: the gold is the planted quality,
    and each candidate's shortcuts (padding, signature, taste) are recorded beside it. With
    --from, real pairs and a gold RM (Gao et al.'s synthetic-gold setup): audit the
    --pairs-out pairs, then overoptimize on the pool of held-out prompts."""
    from rmlens.data import save_pairs

    config = resolve(ctx, CANDIDATES, options)
    if source is None:
        from rmlens.data import generate_candidates

        if gold_rm or pairs_out:
            raise InputError("--gold-rm and --pairs-out apply to --from (real pairs) only")
        pool = generate_candidates(config)
        path = save_pairs(pool, out)
        save_config(config, config_beside(out))
        if not quiet:
            print(f"wrote {len(pool)} candidates ({config.n_prompts} prompts x "
                  f"{config.n_responses}, policy {config.policy}, mean gold "
                  f"{pool['gold'].mean():.3f}) to {path}", file=sys.stderr)  # fmt: skip
        return
    typed = typed_flags(ctx, dict.fromkeys((*SYNTHETIC_ONLY, "n_responses")))
    n = config.n_responses if "n_responses" in typed else None
    typed = [t for t in typed if t != "n_responses"]
    if policy_model is None and (top_p is not None or precision != "auto"):
        raise InputError("--top-p and --precision apply to --policy-model (sampled "
                         "candidates) only")  # fmt: skip
    if typed and not (policy_model is not None and typed == ["n_prompts"]):
        raise InputError(f"--{typed[0].replace('_', '-')} applies to the synthetic world only, "
                         "not to --from")  # fmt: skip
    if gold_rm is None:
        raise InputError("--from needs --gold-rm: the RM whose reward is the gold")
    if holdout <= 0:
        raise InputError("--holdout must be above 0 (the share of prompts in the pool)")
    if policy_model is not None:
        if temperature <= 0:
            raise InputError("--temperature must be above 0")
        if precision not in ("auto", "fp32", "bf16"):
            raise InputError(f"--precision must be auto, fp32 or bf16, got {precision!r}")
        sampling = {"max_new_tokens": max_new_tokens, "temperature": temperature,
                    "top_p": top_p}  # fmt: skip
        n_prompts = config.n_prompts if "n_prompts" in typed else None
        _policy_pool(source, policy_model, gold_rm, holdout, pairs_out, out, n or 64, n_prompts,
                     sampling, precision, config.seed, column_map, sep, quiet)  # fmt: skip
        return
    _real_pool(source, gold_rm, holdout, pairs_out, out, n, config.seed, column_map, sep, quiet)


def _policy_pool(source, policy, gold_rm, holdout, pairs_out, out, n, n_prompts, sampling,
                 precision, seed, column_map, sep, quiet) -> None:  # fmt: skip
    import numpy as np

    from rmlens.backbones import (
        load_policy,
        precision_note,
        resolve_precision,
        sample_responses,
    )
    from rmlens.cli._common import load_table
    from rmlens.data import candidates_from_policy, save_pairs, to_text
    from rmlens.hub import load_rm
    from rmlens.progress import progress_bar
    from rmlens.rewards import resolve_device

    pairs = load_table(source, column_map, sep=sep)
    distinct = list({to_text(p): p for p in pairs["prompt"]}.values())
    if n_prompts is not None:
        order = np.random.default_rng(seed).permutation(len(distinct))[:n_prompts]
        distinct = [distinct[i] for i in sorted(order)]
    rm = load_rm(gold_rm)  # before sampling: a wrong --gold-rm fails at once
    device = resolve_device("auto")
    resolved = resolve_precision(precision, device, task="generate")
    if not quiet:
        print(f"policy {policy}: {precision_note(precision, device, task='generate')}",
              file=sys.stderr)  # fmt: skip
    lm, tokenizer = load_policy(policy, device=device, precision=resolved)

    def write(prompts, k):
        with progress_bar(f"sampling {k} per prompt", total=len(prompts), quiet=quiet) as step:
            return sample_responses(lm, tokenizer, prompts, k, seed=seed, advance=step,
                                    **sampling)  # fmt: skip

    pool, gold_pairs = candidates_from_policy(distinct, write, rm.score, n_responses=n,
                                              holdout=holdout, seed=seed)  # fmt: skip
    path = save_pairs(pool, out)
    if pairs_out is not None and len(gold_pairs):
        save_pairs(gold_pairs, pairs_out)
    if not quiet:
        n_pool = pool["prompt_id"].nunique()
        print(f"wrote {len(pool)} samples of {policy} ({n_pool} prompts x {n}, gold: "
              f"{gold_rm}, mean gold {pool['gold'].mean():.3f}) to {path}", file=sys.stderr)
        if pairs_out is not None:
            print(f"wrote {len(gold_pairs)} pairs of its samples to the other prompts, "
                  f"labelled by the gold RM, to {pairs_out}", file=sys.stderr)  # fmt: skip


def _real_pool(source, gold_rm, holdout, pairs_out, out, n, seed, column_map, sep, quiet) -> None:
    from rmlens.cli._common import load_table
    from rmlens.data import candidates_from_pairs, save_pairs
    from rmlens.hub import load_rm

    pairs = load_table(source, column_map, sep=sep)
    rm = load_rm(gold_rm)
    pool, gold_pairs = candidates_from_pairs(pairs, rm.score, n_responses=n, holdout=holdout,
                                             seed=seed)  # fmt: skip
    path = save_pairs(pool, out)
    if pairs_out is not None and len(gold_pairs):
        save_pairs(gold_pairs, pairs_out)
    if not quiet:
        n_prompts = pool["prompt_id"].nunique()
        print(f"wrote {len(pool)} candidates ({n_prompts} prompts x {len(pool) // n_prompts}, "
              f"gold: {gold_rm}) to {path}", file=sys.stderr)  # fmt: skip
        if pairs_out is not None:
            print(f"wrote {len(gold_pairs)} pairs of the other prompts, labelled by the gold RM "
                  f"({int(gold_pairs['flipped'].sum()) if len(gold_pairs) else 0} flipped), to "
                  f"{pairs_out}", file=sys.stderr)  # fmt: skip


def register(app: typer.Typer) -> None:
    """Add the ``data`` command group (``inspect``, ``synth``, ``candidates``, ``convert``)
    to ``app``."""
    data_app = typer.Typer(
        help="Inspect preference data and make synthetic data with planted mechanisms.",
        no_args_is_help=True,
        rich_markup_mode=None,
    )
    app.add_typer(data_app, name="data")
    convert.register(data_app)

    @data_app.command("inspect")
    def inspect(
        file: Annotated[
            str, typer.Argument(help=DATA_HELP)
        ],
        column_map: Annotated[
            list[str] | None,
            typer.Option("--map", help="Rename a field before reading: NEW=OLD (repeatable)."),
        ] = None,
        split: Annotated[
            str | None, typer.Option("--split", help="Split of a DatasetDict (default train).")
        ] = None,
        as_json: Annotated[
            bool, typer.Option("--json", help="Print JSON instead of a table.")
        ] = False,
        group_by: Annotated[
            str | None,
            typer.Option(
                "--group-by",
                help="The column an audit would group by, for the counts across groups "
                "(default user_id when every pair has one, else the prompt).",
            ),
        ] = None,
        sep: Annotated[
            str | None, typer.Option("--sep", metavar="CHAR", help=SEP_HELP)
        ] = None,
        strict: Annotated[
            bool,
            typer.Option(
                "--strict",
                help="Exit with code 2 when any row cannot be read (warnings about the pairs "
                "read, such as repeated pairs, do not count).",
            ),
        ] = False,
    ) -> None:
        """Summarize a preference file and list every problem in it (file, line or row, field),
        then what the readable pairs hold that an audit should know: empty or identical
        responses, repeated pairs, pairs repeated or judged the other way across groups."""
        from rmlens.data import inspect_pairs

        result = inspect_pairs(
            file, column_map=parse_column_map(column_map), split=split, group_by=group_by,
            sep=sep,
        )  # fmt: skip
        if as_json:
            echo_json(result)
        else:
            _render(result)
        summary, n = result["summary"], len(result["problems"])
        if summary["pairs"] == summary["identical_responses"]:  # what memorize refuses too
            why = (f"{n} row{'s' if n > 1 else ''} not read" if n else "")
            same = summary["identical_responses"]
            if same:
                why += (", and " if why else "") + (
                    f"{same} pair{'s' if same > 1 else ''} with chosen == rejected")
            raise InputError(f"{file}: no valid pair ({why}): nothing to train or audit")
        if strict and n:
            raise InputError(f"{file}: {n} problem{'s' if n > 1 else ''} found")

    data_app.command("synth")(with_parameters(synth, config_parameters(SYNTH)))
    data_app.command("candidates")(with_parameters(candidates, config_parameters(CANDIDATES)))
