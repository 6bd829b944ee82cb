"""Flags are field names (issue 20, item 7).

Every command's options are exactly its configs' fields as ``--field-name`` (a bool also as
``--no-field-name``), the aliases declared beside a field (``metadata={"alias": ...}``), and
the command's own input and output options. The expected options are read here from the
config dataclasses and their ``_nested`` declarations, not from the command line's code.
"""

from __future__ import annotations

import typing
from dataclasses import fields

import pytest
import typer

from conftest import run_cli
from rmlens.attribution._config import AttributeConfig
from rmlens.comparison._config import CompareConfig, MitigateConfig, OveroptimizeConfig
from rmlens.data._candidates_config import CandidatesConfig
from rmlens.data._synth_config import SynthConfig
from rmlens.data.converters._registry import converters
from rmlens.evaluation._config import EvaluateConfig
from rmlens.generalization._config import GeneralizeConfig
from rmlens.memorization._config import AuditConfig
from rmlens.report._config import ReportConfig
from rmlens.rewards._config import ExportConfig, ScoreConfig
from rmlens.rewards.finetune import TrainConfig
from rmlens.rewards.frozen import HeadConfig
from rmlens.sae._config import SAEConfig
from rmlens.sae._debias_config import DebiasConfig
from rmlens.tokens._config import SweepConfig

CONFIG = {"--config"}
# command: (its configs, each with the fields the command sets itself; its own options)
COMMANDS = {
    "memorize": (
        [(AuditConfig, ())],
        {"--data", "--out", "--map", "--sep", "--attribute", "--no-attribute", "--report",
         "--no-report", "--quiet", "--rm", "--checkpoint-damping", "--checkpoint-blocks",
         "--eval-data", "--drop-invalid", "--check-runs"},
    ),
    "demo": (
        [(AuditConfig, ()), (SynthConfig, ("seed",))],  # the data take the audit's seed
        {"--out", "--attribute", "--no-attribute", "--quiet"},
    ),
    "mitigate": (
        [(AuditConfig, MitigateConfig._owned["audit"]), (MitigateConfig, ()),
         (CompareConfig, MitigateConfig._owned["compare"]),
         (OveroptimizeConfig, MitigateConfig._owned["overoptimize"])],
        {"--data", "--out", "--map", "--sep", "--quiet", "--candidates", "--verbose",
         "--drop-invalid"},
    ),
    "attribute": ([(AttributeConfig, ())], {"--list-features", "--json", "--quiet"}),
    "sae": ([(SAEConfig, ()), (DebiasConfig, ())], {"--json", "--quiet", "--out"}),
    "compare": ([(CompareConfig, ())], {"--out", "--json", "--quiet", "--verbose"}),
    "overoptimize": ([(OveroptimizeConfig, ())], {"--candidates", "--out", "--json", "--quiet"}),
    "data candidates": (
        [(CandidatesConfig, ())],
        {"--out", "--from", "--gold-rm", "--holdout", "--pairs-out", "--map", "--sep", "--quiet",
         "--policy-model", "--max-new-tokens", "--temperature", "--top-p", "--precision"},
    ),
    "report": ([(ReportConfig, ())], {"--quiet"}),
    # --prompts names a file of prompts, which become the `prompts` field
    "sweep": ([(SweepConfig, ("prompts",))], {"--out", "--prompts", "--json", "--quiet"}),
    "evaluate": (
        [(EvaluateConfig, ())],
        {"--rm", "--data", "--out", "--map", "--sep", "--json", "--quiet", "--drop-invalid"},
    ),
    # the audit's per-run settings, which training one RM never reads
    "train": (
        [(TrainConfig, ("influence", "influence_blocks"))],
        {"--data", "--out", "--eval-data", "--map", "--sep", "--quiet", "--json", "--export",
         "--drop-invalid"},
    ),
    "export": ([(ExportConfig, ())], {"--out", "--quiet"}),
    "score": (
        [(ScoreConfig, ())],
        {"--rm", "--data", "--out", "--map", "--sep", "--json", "--drop-invalid"},
    ),
    "generalize": (
        [(GeneralizeConfig, ())],
        {"--data", "--out", "--shift-data", "--map", "--sep", "--quiet", "--json",
         "--drop-invalid"},
    ),
    "data synth": ([(SynthConfig, ())], {"--out", "--quiet"}),
    "data convert": (
        [(conv.options, ()) for conv in converters().values()],
        {"--out", "--from", "--split", "--json", "--quiet"},
    ),
}  # fmt: skip


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _field_options(cls: type, skip: tuple[str, ...]) -> dict[str, str]:
    """``{option: field name}`` of ``cls``'s fields and of its nested configs' (``_nested``)."""
    hints = typing.get_type_hints(cls)
    options: dict[str, str] = {}
    for f in fields(cls):
        if f.name in skip or f.name.startswith("_"):
            continue
        if f.name in cls._nested:
            spec = cls._nested[f.name]
            inner = tuple(s.split(".", 1)[1] for s in skip if s.startswith(f.name + "."))
            options |= _field_options(hints[f.name], spec.shared + spec.owned + inner)
            continue
        names = [_flag(f.name)] + (["--no-" + f.name.replace("_", "-")] if hints[f.name] is bool
                                   else [])  # fmt: skip
        alias = f.metadata.get("alias", ())
        names += [alias] if isinstance(alias, str) else list(alias)
        options |= dict.fromkeys(names, f.name)
        for decl, value in f.metadata.get("flag_alias", {}).items():  # --bf16: precision bf16
            options[decl] = f"{f.name}__{value}"
    return options


def _command(path: str):
    from rmlens.cli._app import app

    node = typer.main.get_command(app)
    for word in path.split():
        node = node.commands[word]
    return node


def _options(command) -> dict[str, str]:
    """``{long option: parameter name}`` of a click command, ``--help`` left out."""
    out = {}
    for param in command.params:
        for opt in [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])]:
            if opt.startswith("--") and opt != "--help":
                out[opt] = param.name
    return out


@pytest.mark.parametrize("path", list(COMMANDS))
def test_options_are_exactly_the_config_fields_and_the_commands_own(path):
    configs, own = COMMANDS[path]
    expected: dict[str, str] = {}
    for cls, skip in configs:
        expected |= _field_options(cls, skip)
    options = _options(_command(path))
    assert not own & set(expected), f"{path}: an own option is also a field"
    assert set(options) == set(expected) | own | CONFIG
    for opt, name in expected.items():  # each flag sets the field it is named after
        assert options[opt] == name, (path, opt)


@pytest.mark.parametrize("path", list(COMMANDS))
def test_the_only_short_option_is_q(path):
    opts = [o for p in _command(path).params for o in getattr(p, "opts", [])]
    shorts = {o for o in opts if o.startswith("-") and not o.startswith("--")}
    assert shorts <= {"-q"}


def test_aliases_are_declared_beside_their_fields():
    declared = {
        (cls.__name__, f.name): f.metadata["alias"]
        for cls in (SynthConfig, EvaluateConfig, TrainConfig, HeadConfig)
        for f in fields(cls)
        if "alias" in f.metadata
    }
    assert declared == {
        ("SynthConfig", "n_pairs"): "--pairs",
        ("SynthConfig", "n_users"): "--users",
        ("EvaluateConfig", "n_bins"): "--bins",
        ("TrainConfig", "use_margin"): "--no-margin",
        ("HeadConfig", "use_margin"): "--no-margin",
    }


def _parsed(path: str, args: list[str]) -> dict:
    command = _command(path)
    with command.make_context(path, args) as ctx:
        return ctx.params


@pytest.mark.parametrize(
    ("path", "required", "old", "new", "name", "value"),
    [
        ("data synth", ["--out", "x.jsonl"], ["--pairs", "7"], ["--n-pairs", "7"], "n_pairs", 7),
        ("data synth", ["--out", "x.jsonl"], ["--users", "3"], ["--n-users", "3"], "n_users", 3),
        ("demo", [], ["--pairs", "9"], ["--n-pairs", "9"], "n_pairs", 9),
        ("evaluate", ["--rm", "r", "--data", "d", "--out", "o"], ["--bins", "4"],
         ["--n-bins", "4"], "n_bins", 4),
        ("memorize", ["--data", "d", "--out", "o"], ["--use-margin", "--no-margin"],
         ["--use-margin", "--no-use-margin"], "use_margin", False),
        ("train", ["--data", "d", "--out", "o"], ["--no-margin"], ["--no-use-margin"],
         "use_margin", False),
    ],
)  # fmt: skip
def test_old_spellings_still_work(path, required, old, new, name, value):
    assert _parsed(path, required + old)[name] == value
    assert _parsed(path, required + new)[name] == value


def test_errors_name_the_spelling_typed_and_toml_keys_are_field_names(tmp_path):
    out = tmp_path / "s.jsonl"
    old = run_cli(["data", "synth", "--out", out, "--pairs", 0])
    new = run_cli(["data", "synth", "--out", out, "--n-pairs", 0])
    assert old.exit_code == new.exit_code == 2
    assert old.stderr.startswith("error: --pairs must be an int >= 1")
    assert new.stderr.startswith("error: --n-pairs must be an int >= 1")
    toml = tmp_path / "synth.toml"
    toml.write_text("n_pairs = 40\nn_users = 4\n")
    result = run_cli(["data", "synth", "--out", out, "--config", toml, "-q"])
    assert result.exit_code == 0, result.stderr
    from rmlens.data import load_pairs

    pairs = load_pairs(out)
    assert len(pairs) == 40 and pairs["user_id"].nunique() == 4
    saved = (tmp_path / "s.config.toml").read_text()
    assert "n_pairs = 40" in saved and "n_users = 4" in saved


def test_the_audits_nested_configs_are_declared_once():
    """memorize, demo and mitigate build their sections from ``AuditConfig._nested``; the
    audit's conflict check and ``resolved`` read the same declaration."""
    from rmlens._params import ParamConflict
    from rmlens.cli import memorize, mitigate

    spec = AuditConfig._nested
    assert set(spec) == {"head", "train"}
    for sections in (memorize.AUDIT, memorize.DEMO, mitigate.AUDIT):
        nested = {s.key: s for s in sections[1:]}
        assert set(nested) == set(spec)
        for key, s in nested.items():
            assert s.when == spec[key].when and set(spec[key].shared) <= set(s.skip)
            assert s.defaults == getattr(AuditConfig(), key)
    config = AuditConfig(mode="finetune", model="m", max_length=64, seed=3).resolved()
    assert (config.train.model, config.train.max_length, config.train.seed) == ("m", 64, 3)
    assert config.head.seed == 3
    with pytest.raises(ParamConflict):
        AuditConfig(mode="finetune", train=TrainConfig(max_length=9)).check()
