"""Errors the user can fix, and how any error is shown in one line."""

from __future__ import annotations

import re

LONGEST_WORD = 200  # characters of one word (a name, a path) a message shows in full
LONGEST_LINE = 4000  # characters of one message line


class UserError(Exception):
    """Bad input: the message names the object or value and what to change.

    Subclasses also derive from the builtin they replaced (``ValueError`` or
    ``RuntimeError``) so existing handlers keep catching them.
    """


def one_line(error: BaseException) -> str:
    """The error's message on one line (whitespace collapsed), or its type's name."""
    return " ".join(str(error).split()) or type(error).__name__


def abridged(text: str, longest: int = LONGEST_WORD) -> str:
    """``text`` with each word (a run without spaces) longer than ``longest`` characters
    cut to its start and end, with its length, and the whole cut to :data:`LONGEST_LINE`:
    a 100,000-character name or path in a message still reads as one short line."""

    def cut(match: re.Match[str]) -> str:
        word = match.group(0)
        head = max(longest - 20, 1)
        return f"{word[:head]}...{word[-10:]} ({len(word)} characters)"

    text = re.sub(rf"\S{{{longest + 1},}}", cut, text)
    if len(text) > LONGEST_LINE:
        text = f"{text[: LONGEST_LINE - 40]}... ({len(text)} characters)"
    return text
