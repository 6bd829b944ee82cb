"""The format and length an RM scores with, set after loading (``--format``,
``--max-length`` of ``score``, ``evaluate`` and ``sweep``): :func:`use_format`."""

from __future__ import annotations

import warnings
from typing import Any

from rmlens._errors import InputError, RmlensWarning
from rmlens.backbones import resolve_format
from rmlens.hub._classifier import SequenceClassifierRM, classifier_kind
from rmlens.hub._ensemble import EnsembleRM, _members
from rmlens.rewards import ExplicitHeadRM, TunedRM


def use_format(rm: Any, format: str | None, max_length: int | None = None) -> Any:
    """Score ``rm`` (and every member of an ensemble) in ``format``, keeping ``max_length``
    tokens; returns ``rm``.

    ``auto`` (or None) keeps each RM's own format: the one an rmlens RM was trained with,
    a sequence classifier's ``rmlens_format``, else what its tokenizer resolves auto to.
    ``chat``, ``raw`` or ``pair`` replace it (chat needs a chat template), with a warning
    when an rmlens RM was trained on another format.

    Parameters
    ----------
    rm : RewardModel
        An RM, or an :class:`EnsembleRM` (nested ensembles included); its members' format is
        set in place.
    format : {"auto", "chat", "raw", "pair"} or None
        The format to score in; ``auto`` or None leaves ``rm`` as it is.
    max_length : int, optional
        Tokens kept of each sequence (the prompt cut from the left); None keeps each RM's.

    Returns
    -------
    RewardModel
        ``rm`` itself.

    Raises
    ------
    InputError
        For an RM that scores texts its own way (no tokenizer to format for), chat
        without a chat template, or an unknown format.
    """
    leaves, trained = list(_members(rm)), set()
    while any(isinstance(m, EnsembleRM) for m in leaves):
        leaves = [x for m in leaves for x in (m.members if isinstance(m, EnsembleRM) else [m])]
    if max_length is not None:
        for member in leaves:
            _set_max_length(member, int(max_length))
    if format in (None, "auto"):
        return rm
    for member in leaves:
        if isinstance(member, (ExplicitHeadRM, TunedRM)):
            tokenizer, kind, was = member.backbone.tokenizer, member.backbone.kind, member.format
        elif isinstance(member, SequenceClassifierRM):
            tokenizer, kind = member.tokenizer, classifier_kind(member.model.config)
            was = getattr(member.model.config, "rmlens_format", None)
        else:
            raise InputError(f"`format` {format}: a {type(member).__name__} scores texts its "
                             "own way; leave `format` at auto")  # fmt: skip
        member.format = resolve_format(format, tokenizer, kind)
        member.format_guessed = False
        if was is not None and was != member.format:
            trained.add(was)
    if trained:
        warnings.warn(f"`format` {format}: the RM was trained on {' and '.join(sorted(trained))}"
                      "-formatted text; its rewards of other text may not mean what they did",
                      RmlensWarning, stacklevel=2)  # fmt: skip
    return rm


def _set_max_length(member: Any, max_length: int) -> None:
    if isinstance(member, SequenceClassifierRM):
        member.max_length = max_length
    elif hasattr(member, "backbone"):  # shared by the members on one backbone
        member.backbone.max_length = max_length
    else:
        raise InputError(f"`max_length`: a {type(member).__name__} tokenizes its own way; "
                         "leave `max_length` unset")
