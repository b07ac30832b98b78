"""What the batch command prints through: streams a closed reader cannot break, and names
quoted to stay one word on one line.

A reader that goes away (``batch.py ... | head``, a closed terminal) or a standard stream
that was never open changes nothing but what is printed: the fit, the files and the exit
code stay what they would have been.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import threading
import unicodedata
from collections.abc import Iterator
from typing import Any, TextIO


class OutputStream:
    """A text stream whose reader may go away. The first write or flush that fails (a pipe
    whose reader exited, a closed terminal, a full disk) drops everything after it and
    points the stream's file descriptor at the null device, so that nothing written there
    later, Blender's own lines and the interpreter's last flush included, fails either."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream
        self.dropped = stream is None

    def write(self, text: str) -> int:
        if not self.dropped:
            try:
                self.stream.write(text)
            except (OSError, ValueError):  # ValueError: a stream closed in this process
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self.dropped:
            try:
                self.stream.flush()
            except (OSError, ValueError):
                self._drop()

    def fileno(self) -> int:
        if self.stream is None:
            raise ValueError("no stream")
        return self.stream.fileno()

    def _drop(self) -> None:
        self.dropped = True
        try:
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):  # StringIO in tests
            return
        _to_null(fd)
        try:
            self.stream.flush()  # what the failed write left in the buffer
        except (OSError, ValueError):
            pass


def open_standard_streams() -> None:
    """Descriptors 0-2 open (on the null device where they were closed), and ``sys.stdout``
    and ``sys.stderr`` streams: otherwise the next file opened (a temporary of the .blend
    being saved) would get a standard descriptor, and any line printed would go into it."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            _to_null(fd)
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # kept for the process's life
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")


def _to_null(fd: int) -> None:
    try:
        null = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    try:
        if null != fd:
            os.dup2(null, fd)
    except OSError:
        pass
    finally:
        if null != fd:
            os.close(null)


def ignore_broken_pipes() -> Any:
    """SIGPIPE ignored for the run (a Blender binary keeps its default, which ends the process
    on the first write to a pipe whose reader exited); returns the handler to restore
    (None: nothing to restore)."""
    if not hasattr(signal, "SIGPIPE") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        return signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    except (OSError, ValueError):
        return None


def shell_word(text: str) -> str:
    """``text`` as one word of a POSIX shell, on one line: quoted as ``shlex.quote`` does, or,
    when it holds a line break or another control character (an object named "A<newline>B"),
    as ``$'A\\nB'`` (the quoting of POSIX.1-2024, bash, zsh and ksh), each such character
    escaped."""
    if not any(_breaks_line(c) for c in text):
        return shlex.quote(text)
    named = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
    escaped = "".join(named.get(c) or (f"\\u{ord(c):04x}" if _breaks_line(c) else c) for c in text)
    return f"$'{escaped}'"


def _breaks_line(c: str) -> bool:
    return unicodedata.category(c) in ("Cc", "Zl", "Zp")


@contextlib.contextmanager
def native_stdout_silenced() -> Iterator[None]:
    """Blender's own lines on standard output (a save prints "Saved copy as" with the name
    of our temporary) go to the null device while this lasts: a farm's log shows the run's
    lines, not the temporaries it renamed away."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    try:
        kept = os.dup(1)
    except OSError:  # no standard output at all
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        yield
    finally:
        os.dup2(kept, 1)
        os.close(kept)
        os.close(null)
