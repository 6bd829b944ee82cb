"""Errors that the command line turns into exit codes (DESIGN.md section 6)."""


class InputError(ValueError):
    """Bad input or usage: the message names the file, line or row, field, expected and found.

    The command line prints ``error: <message>`` on stderr and exits with code 2.
    """
