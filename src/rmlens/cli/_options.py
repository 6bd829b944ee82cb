"""Command-line options generated from config dataclasses: the one source of every option.

A command's options are its configs' fields (:func:`sections`): each field becomes a flag
named after it (``lora_r`` -> ``--lora-r``) with the field's type, default and help, and an
older spelling kept working is declared once beside the field (``metadata={"alias":
"--pairs"}``). A config that holds others declares them on itself (``_nested``: when each
applies, which of its fields the holder sets); a field shared by two sections (``epochs`` of
the frozen head and of the fine-tuned RM) is one flag that goes to whichever section applies.
Values are resolved in this order: the config's defaults, then ``--config FILE.toml``, then
the flags the user typed. A flag or TOML table for a section that does not apply
(``--lora-r`` with ``--mode frozen``) is refused, and every error names the flag as
the user typed it.
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
import typing
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

import typer

from rmlens import InputError

CONFIG_FILE = "config_file"


@dataclass(frozen=True)
class Section:
    """One config of a command.

    ``key`` is ``None`` for the command's top config, else the name of the top config's
    field that holds this one (``"head"``). ``when=("mode", "finetune")`` makes the section
    apply only when that top-level field has that value. ``defaults`` is an instance whose
    values are the command's defaults (``rmlens demo`` makes 1500 pairs). Build them with
    :func:`sections`, which reads all of this from the config.
    """

    cls: type
    key: str | None = None
    skip: tuple[str, ...] = ()
    when: tuple[str, Any] | None = None
    defaults: Any = None

    def default_of(self, name: str) -> Any:
        if self.defaults is not None:
            return getattr(self.defaults, name)
        return _field_default(self.cls, name)

    def names(self) -> list[str]:
        """The section's options: the config's own fields, then those of the config it
        extends (``TrainConfig``'s model first, ``ObjectiveConfig``'s loss after)."""
        nested = {s for s, h in _hints(self.cls).items() if _is_config(h)}
        own = inspect.get_annotations(self.cls)
        return [
            f.name
            for f in sorted(fields(self.cls), key=lambda f: f.name not in own)
            if f.name not in self.skip and not f.name.startswith("_") and f.name not in nested
        ]

    def applies(self, top: dict[str, Any]) -> bool:
        return self.when is None or top.get(self.when[0]) == self.when[1]


def sections(cls: type, *, defaults: Any = None, skip: tuple[str, ...] = ()) -> list[Section]:
    """The sections of a command that builds ``cls``: its fields, then each nested config.

    The nested configs, when each applies and which of their fields are not options come from
    ``cls._nested``; their defaults are ``cls``'s (``AuditConfig().head``). ``defaults`` is an
    instance of ``cls`` holding the command's own defaults; ``skip`` names fields the command
    sets itself, dotted for a nested one (``"head.objective"``).
    """
    top = Section(cls, skip=tuple(s for s in skip if "." not in s), defaults=defaults)
    hints = _hints(cls)
    nested = []
    for key, spec in cls._nested.items():
        inner = tuple(s.split(".", 1)[1] for s in skip if s.startswith(key + "."))
        default = _field_default(cls, key) if defaults is None else getattr(defaults, key)
        nested.append(
            Section(hints[key], key=key, skip=spec.not_options + inner, when=spec.when,
                    defaults=default)
        )  # fmt: skip
    return [top, *nested]


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """``typing.get_type_hints(cls)``, evaluated once per class: the annotations are strings
    (``from __future__ import annotations``), and evaluating them per field made building
    every command's options the bulk of ``rmlens --help``. Read it, never change it."""
    return typing.get_type_hints(cls)


def _field_default(cls: type, name: str) -> Any:
    f = {f.name: f for f in fields(cls)}[name]
    return f.default if f.default is not MISSING else f.default_factory()


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _is_config(hint: Any) -> bool:
    from rmlens._params import Config

    return isinstance(hint, type) and issubclass(hint, Config)


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "none" if value is None else str(value)


def config_parameters(sections: list[Section]) -> list[inspect.Parameter]:
    """Typer parameters for every field of ``sections``, then ``--config FILE.toml``."""
    owners: dict[str, list[Section]] = {}
    for section in sections:
        for name in section.names():
            owners.setdefault(name, []).append(section)
    params = []
    for name, where in owners.items():
        first = where[0]
        hint = _hints(first.cls)[name]
        meta = {f.name: f for f in fields(first.cls)}[name].metadata
        help_ = meta.get("help", "")
        decls = _declarations(name, hint, meta)
        listed = typing.get_origin(hint) in (list, tuple)
        if listed:
            hint = list[str]
            help_ += " Repeat the option or separate values with commas."
        metavar = None
        if not listed and _choice_of_types(hint):  # read back by _parsed: <int|str>
            metavar = "<" + "|".join(t.__name__ for t in _choice_of_types(hint)) + ">"
            hint = str
        defaults = {s.when[1] if s.when else "": s.default_of(name) for s in where}
        if listed:
            defaults = {k: ",".join(map(str, v)) for k, v in defaults.items()}
        if len(set(map(repr, defaults.values()))) == 1:
            default, shown = first.default_of(name), True
            if hint is not bool and default is None:
                shown = meta.get("unset", False)
        else:
            key = where[-1].when[0] if where[-1].when else ""
            default = None
            shown = "; ".join(f"{flag(key)} {k}: {_shown(v)}" for k, v in defaults.items())
        if listed:
            first_default = next(iter(defaults.values()))
            text = shown if isinstance(shown, str) else first_default
            help_ += f"  [default: {text or meta.get('unset') or 'none'}]"
            default, shown = None, False
        applies = [s.when for s in where if s.when]
        if len(applies) == len(where):
            help_ += " (" + ", ".join(f"{flag(k)} {v}" for k, v in applies) + ")"
        option = typer.Option(default, *decls, help=help_, show_default=shown, metavar=metavar)
        annotation = hint if default is not None or hint is bool else hint | None
        params.append(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation
            )
        )
        for decl, value in meta.get("flag_alias", {}).items():
            alias = typer.Option(False, decl, help=f"The same as {flag(name)} {value}.")
            params.append(inspect.Parameter(
                _alias_key(name, value), inspect.Parameter.KEYWORD_ONLY, default=alias,
                annotation=bool,
            ))  # fmt: skip
    params.append(
        inspect.Parameter(
            CONFIG_FILE,
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(
                None,
                "--config",
                metavar="FILE.toml",
                help="Settings from a TOML file (flags typed on the command line override it).",
            ),
            annotation=Path | None,
        )
    )
    return params


def _alias_key(name: str, value: str) -> str:
    """The parameter of a flag that sets ``name`` to ``value`` (``--bf16``: precision bf16)."""
    return f"{name}__{value}"


def _flag_aliases(ctx: typer.Context, owner: dict[str, Section], options: dict[str, Any],
                  given: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """``given`` with the value of each typed flag alias (``--bf16`` -> precision bf16); an
    alias and its option typed with other values are refused."""
    out = dict(given)
    for name, section in owner.items():
        meta = {f.name: f for f in fields(section.cls)}[name].metadata
        for decl, value in meta.get("flag_alias", {}).items():
            key = _alias_key(name, value)
            if not typed_flags(ctx, {key: options.get(key)}).get(key):
                continue
            if name in out and out[name] != value:
                raise InputError(f"{decl} means {flag(name)} {value}; "
                                 f"{flag(name)} {out[name]} was typed too")  # fmt: skip
            out[name] = value
    return out


def _declarations(name: str, hint: Any, meta: Any) -> list[str]:
    """The option's spellings: ``--field-name`` (``--x/--no-x`` for a bool), then the aliases
    declared beside the field (``"alias": "--no-margin"``: a bool's ``--no-`` alias is its
    off switch)."""
    opt = flag(name)
    alias = meta.get("alias", ())
    aliases = (alias,) if isinstance(alias, str) else tuple(alias)
    if hint is not bool:
        return [opt, *aliases]
    off = [a for a in aliases if a.startswith("--no-")]
    on = [a for a in aliases if not a.startswith("--no-")]
    return [f"{opt}/--no-{opt[2:]}", *on, *(f" /{a}" for a in off)]


def with_parameters(func, extra: list[inspect.Parameter]):
    """Give ``func(**kwargs)`` a signature: its own parameters, then ``extra``."""
    if not hasattr(func, "_own_parameters"):
        func._own_parameters = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in inspect.signature(func, eval_str=True).parameters.values()
            if p.kind is not inspect.Parameter.VAR_KEYWORD
        ]
    func.__signature__ = inspect.Signature(func._own_parameters + extra)
    return func


def typed_flags(ctx: typer.Context, options: dict[str, Any]) -> dict[str, Any]:
    """The options the user gave (command line or environment), not those left at default."""
    given = {}
    for name, value in options.items():
        source = ctx.get_parameter_source(name)
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
            given[name] = value
    return given


def read_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file (--config)") from None
    except tomllib.TOMLDecodeError as err:
        raise InputError(f"{path}: not valid TOML: {err}") from None


def resolve(
    ctx: typer.Context,
    sections: list[Section],
    options: dict[str, Any],
    *,
    table: str | None = None,
    ignore: tuple[str, ...] = (),
    preset: dict[str, Any] | None = None,
):
    """Build the command's top config from defaults, ``--config`` and the typed flags.

    ``preset``: top-level values that replace the defaults before the file and the flags
    are read (``memorize --rm`` presets ``mode`` finetune, so that --epochs goes to the
    check runs' training).

    ``table`` reads this config from that table of the TOML file (a command that builds two
    configs, such as ``demo``); ``ignore`` leaves out the tables of the command's other
    configs. Returns the checked config; raises :class:`InputError` worded for the command
    line.
    """
    from rmlens._params import ParamError

    top, nested = sections[0], sections[1:]
    config_file = options.get(CONFIG_FILE)
    from_file = read_toml(config_file) if config_file else {}
    from_file = from_file.get(table, {}) if table else {
        k: v for k, v in from_file.items() if k not in ignore
    }
    owner = {n: s for s in reversed(sections) for n in s.names()}
    given = typed_flags(ctx, {k: v for k, v in options.items() if k in owner})
    given = {k: _parsed(_listed(v, owner[k], k), owner[k], k) for k, v in given.items()}
    given = _flag_aliases(ctx, owner, options, given)

    values = {**_defaults(top), **(preset or {})}
    origin: dict[tuple[str | None, str], str] = {}
    for s in nested:
        values[s.key] = _defaults(s)
    for key, value in from_file.items():
        if isinstance(value, dict) and any(s.key == key for s in nested):
            values[key].update(value)
            origin.update({(key, k): f"{config_file}: {key}.{k}" for k in value})
        else:
            values[key] = value
            origin[(None, key)] = f"{config_file}: {key}"
    for name, value in given.items():
        if name in top.names():
            values[name] = value
            origin[(None, name)] = flag(name)
    for name, value in given.items():
        owners = [s for s in nested if name in s.names()]
        if not owners:
            continue
        active = [s for s in owners if s.applies(values)]
        if not active and name not in top.names():
            raise InputError(_refusal(flag(name), owners, values))
        for s in active:
            values[s.key][name] = value
            origin[(s.key, name)] = flag(name)
    for s in nested:
        table = from_file.get(s.key)
        if not s.applies(values) and isinstance(table, dict) and _sets_anything(s, table):
            raise InputError(f"{config_file}: [{s.key}]: " + _refusal("", [s], values).lstrip())
    try:
        return top.cls.from_dict(values).check()
    except ParamError as err:
        key = next((s.key for s in sections if s.cls.__name__ == err.owner), None)
        where = origin.get((key, err.param)) or origin.get((None, err.param))
        if where is None or where.startswith(str(config_file)) and config_file:
            raise InputError(str(err) if where is None else f"{where}: {err}") from None
        raise  # typed as a flag: the command line's error path names it (cli._talk)


def _listed(value: Any, section: Section, name: str) -> Any:
    """``--targets tm,tg --targets cm`` -> ``["tm", "tg", "cm"]``; numbers for a numeric list."""
    if not isinstance(value, (list, tuple)):
        return value
    items = [v.strip() for item in value for v in str(item).split(",") if v.strip()]
    kind = (typing.get_args(_hints(section.cls)[name]) or (str,))[0]
    if kind in (int, float):
        try:
            return [kind(v) for v in items]
        except ValueError:
            raise InputError(
                f"{flag(name)} must be {kind.__name__}s, got {','.join(items)}"
            ) from None
    return items


def _choice_of_types(hint: Any) -> tuple[type, ...]:
    """The types of a field that takes one of several (``int | str``: ``(int, str)``), else
    ``()``; None is left out (``str | None`` is one type)."""
    if typing.get_origin(hint) not in (typing.Union, types.UnionType):
        return ()
    options = tuple(h for h in typing.get_args(hint) if h is not type(None))
    return options if len(options) > 1 else ()


def _parsed(value: Any, section: Section, name: str) -> Any:
    """A typed flag's text as the first of its field's types that reads it: ``--probe-pairs
    500`` -> 500, ``--probe-pairs all`` -> ``"all"`` (the field's check judges the rest)."""
    if not isinstance(value, str):
        return value
    for kind in _choice_of_types(_hints(section.cls)[name]):
        if kind in (int, float):
            try:
                return kind(value)
            except ValueError:
                continue
    return value


def _sets_anything(section: Section, table: dict[str, Any]) -> bool:
    """Whether a TOML table sets a value other than the section's default (a saved config of
    an older rmlens holds the other mode's table at its defaults: it sets nothing)."""
    names = {f.name for f in fields(section.cls)}
    for key, value in table.items():
        if key not in names:
            return True
        default = section.default_of(key)
        if (list(default) if isinstance(default, tuple) else default) != value:
            return True
    return False


def _defaults(section: Section) -> dict[str, Any]:
    return {name: section.default_of(name) for name in section.names()}


def _refusal(opt: str, owners: list[Section], values: dict[str, Any]) -> str:
    mode = owners[0].when[0]
    wanted = " or ".join(f"{flag(mode)} {s.when[1]}" for s in owners)
    return f"{opt} applies to {wanted} only (here {flag(mode)} {values.get(mode)})"


def save_config(
    config: Any, path: Path, *, sections: list[Section] | None = None, **tables: Any
) -> Path:
    """Write the resolved config as TOML (loadable with ``--config``); None values left out.

    ``sections``: the command's sections; a nested table whose section does not apply (the
    ``[train]`` table of a frozen audit) is left out, as ``--config`` would refuse it.
    ``tables`` adds the command's other configs as TOML tables (``synth=SynthConfig(...)``).
    """
    import tomli_w

    from rmlens._io import write_atomic

    def clean(d: dict) -> dict:  # to_dict gives lists already; TOML has no None
        return {k: clean(v) if isinstance(v, dict) else v for k, v in d.items() if v is not None}

    data = config.to_dict()
    for section in (sections or [])[1:]:
        if not section.applies(data):
            data.pop(section.key, None)
    data |= {k: v.to_dict() for k, v in tables.items()}
    text = tomli_w.dumps(clean(data))
    return write_atomic(path, lambda tmp: tmp.write_text(text))


def config_beside(out: Path) -> Path:
    """Where a command whose output is one file saves its settings: ``pairs.config.toml``."""
    return out.with_name(out.name.split(".")[0] + ".config.toml")
