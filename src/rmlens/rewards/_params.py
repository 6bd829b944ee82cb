"""Moved to :mod:`rmlens._params` (the bottom layer); kept while callers move."""

from rmlens._params import (  # noqa: F401
    check_params,
    config_dict,
    non_negative,
    positive,
    positive_int,
)
