"""Errors the user can fix, and how any error is shown in one line."""

from __future__ import annotations


class UserError(Exception):
    """Bad input: the message names the object or value and what to change.

    Subclasses also derive from the builtin they replaced (``ValueError`` or
    ``RuntimeError``) so existing handlers keep catching them.
    """


def one_line(error: BaseException) -> str:
    """The error's message on one line (whitespace collapsed), or its type's name."""
    return " ".join(str(error).split()) or type(error).__name__
