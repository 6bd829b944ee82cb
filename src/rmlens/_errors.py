"""Errors and warnings of the library; the command line alone turns them into words and exit codes.

Library messages name Python parameters in backticks (```runs``` must be ...); the command
line rewrites a backticked name that is one of the invoked command's options into that
option's flag (``--runs``), prints ``error: <message>`` and exits with code 2.
"""


class InputError(ValueError):
    """Bad input or usage: the message names the file, line or row, field, expected and found.

    The command line prints ``error: <message>`` on stderr and exits with code 2.
    """


class RmlensWarning(UserWarning):
    """A result to read with care; the command line prints ``warning: <message>``."""


class RmlensNote(RmlensWarning):
    """A fact a reader should see that is not a problem; the command line prints ``note: ...``."""
