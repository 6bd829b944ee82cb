"""The converter registry: one module per dataset, found by name, so a new dataset is one file.

A dataset module is a private module of this package (``_prism.py``) that defines
``CONVERTER = Converter(...)``. :func:`converters` imports every such module once and maps
the converter names (``"prism"``, ``"chatbot-arena"``) to them.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from rmlens._errors import InputError

INFRASTRUCTURE = ("_common", "_convert", "_registry", "_source")


@dataclass(frozen=True)
class Converter:
    """How one public dataset becomes preference pairs.

    Attributes
    ----------
    name : str
        What ``--from`` takes, e.g. ``"prism"``.
    title : str
        The dataset and its Hugging Face id, for help and reports.
    hub_id : str or callable
        The Hugging Face dataset id loaded when SOURCE is the converter's name, or
        ``hub_id(options) -> str`` when it depends on the options.
    options : type
        A :class:`rmlens._params.Config` dataclass of the converter's options.
    pairs : callable
        ``pairs(sources, options, tally) -> iterable of dict``: the pair rows, built from
        a list of :class:`rmlens.data._loaders.Records`; counts go to the
        :class:`~rmlens.data.converters._common.Tally`.
    rules : str
        The dataset's rules in one paragraph (shown by ``rmlens data convert --help``).
    group_by : str or None
        The column to group memorization runs by (None: the audit's default).
    hub_args : callable
        ``hub_args(options) -> dict`` of extra ``datasets.load_dataset`` arguments
        (``name``, ``data_dir``).
    splits : tuple of str
        Split names tried in order when none is given.
    folder_files : callable or None
        ``folder_files(folder, split, options) -> list of Path``: the files to read from a
        folder in the native layout (default: every data file in it, recursively).
    text_fields : tuple of str
        Fields read from CSV as text (empty cell = ``""``), so ids keep leading zeros.
    """

    name: str
    title: str
    hub_id: str | Callable[[Any], str]
    options: type
    pairs: Callable[[list[Any], Any, Any], Iterable[dict[str, Any]]]
    rules: str
    group_by: str | None = "user_id"
    hub_args: Callable[[Any], dict[str, Any]] = field(default=lambda options: {})
    splits: tuple[str, ...] = ("train",)
    folder_files: Callable[[Path, str | None, Any], list[Path]] | None = None
    text_fields: tuple[str, ...] = ()

    def hub_id_for(self, options: Any) -> str:
        return self.hub_id(options) if callable(self.hub_id) else self.hub_id


@cache
def converters() -> dict[str, Converter]:
    """Every converter of this package, by name, in name order."""
    found: dict[str, Converter] = {}
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if not info.name.startswith("_") or info.name in INFRASTRUCTURE:
            continue
        module = importlib.import_module(f"{__package__}.{info.name}")
        converter = getattr(module, "CONVERTER", None)
        if isinstance(converter, Converter):
            if converter.name in found:
                raise RuntimeError(f"two converters named {converter.name!r}")
            found[converter.name] = converter
    return dict(sorted(found.items()))


def converter_names() -> list[str]:
    """The names ``rmlens data convert --from`` accepts.

    Returns
    -------
    list of str
        For example ``["chatbot-arena", "community-alignment", "helpsteer2", "prism", ...]``.
    """
    return list(converters())


def get_converter(name: str) -> Converter:
    """The converter called ``name`` (``_`` and case ignored: ``Chatbot_Arena`` works)."""
    key = str(name).strip().lower().replace("_", "-")
    found = converters()
    if key not in found:
        raise InputError(f"--from: unknown dataset {name!r}; known: {', '.join(found)}")
    return found[key]
