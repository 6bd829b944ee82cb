"""What every verb and every estimator-like class share (sklearn's ``base.py``).

A verb is ``verb(data_or_dirs, config=None, *, out=None, **overrides)``: :func:`resolve_config`
turns its ``config`` and ``overrides`` into the config it runs with, :func:`needed_out` names
``out`` when a verb that writes a folder got none. :class:`Params` gives ``get_params`` and
``set_params`` from a config dataclass's fields.
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import fields
from typing import Any

from rmlens._errors import InputError
from rmlens._params import ParamError


def resolve_config(verb: str, config_class: type, config: Any, overrides: dict[str, Any]):
    """The config ``verb`` runs with: ``config`` (default ``config_class()``), ``overrides``
    applied with :meth:`Config.replace`.

    ``audit(pairs, runs=10)`` is ``audit(pairs, AuditConfig(runs=10))``; a name that is no
    field of ``config_class`` is a :class:`ParamError` naming it. The result is not checked.
    """
    owner = config_class.__name__
    if config is None:
        config = config_class()
    elif not isinstance(config, config_class):
        raise InputError(
            f"`config` of {verb}(): expected {owner} or None, got {type(config).__name__} "
            "(the output folder is the keyword argument `out`)"
        )
    if not overrides:
        return config
    known = [f.name for f in fields(config_class) if f.init]
    for name in overrides:
        if name not in known:
            raise ParamError(
                name, f"{verb}()", f"a field of {owner}", overrides[name],
                message=f"{verb}() got an unknown setting `{name}`: neither one of its "
                f"arguments nor a field of {owner} (fields: {', '.join(known)})",
            )  # fmt: skip
    return config.replace(**overrides)


def needed_out(verb: str, out: Any) -> Any:
    """``out``, or an :class:`InputError` naming it when a verb that writes a folder has none."""
    if out is None:
        raise InputError(f"`out`: {verb}() writes a folder; give its path (out=...)")
    return out


class Params:
    """``get_params`` and ``set_params`` for every estimator-like class (``sklearn/base.py``).

    A class whose settings are a config dataclass names it in ``config_class`` and holds it
    in ``self.config`` (None: the defaults); its parameters are the config's fields, and
    ``set_params`` replaces the config (checked like :meth:`Config.replace`). Without a
    ``config_class`` the parameters are the keyword arguments of ``__init__``, stored as
    attributes of the same name.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> from rmlens._params import Config
    >>> @dataclass
    ... class FitConfig(Config):
    ...     lr: float = 0.1
    >>> class Fitter(Params):
    ...     config_class = FitConfig
    ...     def __init__(self, config=None):
    ...         self.config = config
    >>> Fitter().set_params(lr=0.5).get_params()
    {'lr': 0.5}
    """

    config_class: typing.ClassVar[type | None] = None

    def get_params(self) -> dict[str, Any]:
        """The parameters, by name (the config's fields, or ``__init__``'s arguments)."""
        if self.config_class is None:
            return {name: getattr(self, name) for name in self._init_names()}
        cfg = self._config()
        return {f.name: getattr(cfg, f.name) for f in fields(cfg)}

    def set_params(self, **params: Any):
        """Change parameters by name; an unknown name is a :class:`ParamError`; return ``self``."""
        if self.config_class is not None:
            self.config = self._config().replace(**params)
            return self
        known = self._init_names()
        for name, value in params.items():
            if name not in known:
                raise ParamError(name, type(self).__name__, "one of " + ", ".join(known), value,
                                 message=f"{type(self).__name__} has no parameter `{name}` "
                                 f"(its parameters: {', '.join(known)})")  # fmt: skip
            setattr(self, name, value)
        return self

    def _config(self):
        config = getattr(self, "config", None)
        return config if config is not None else self.config_class()

    @classmethod
    def _init_names(cls) -> list[str]:
        signature = inspect.signature(cls.__init__)
        return [p.name for p in list(signature.parameters.values())[1:]
                if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]  # fmt: skip
