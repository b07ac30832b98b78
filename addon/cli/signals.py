"""SIGINT and SIGTERM in the batch command: stop cleanly at any moment.

A first signal only records itself (and asks a running fit to stop after its current
iteration); the run checks for it at every step that writes something (before the bake,
before each file is renamed into place), so nothing is baked or saved after it. The run
then writes the partial report it was asked for and exits 128 + the signal number (130
for SIGINT, 143 for SIGTERM). A second signal stops at once, except inside the few lines
that rename an output into place and record it.

``FIT_TO_TARGET_SELF_SIGNAL=PHASE:SIGNAME`` makes the run send itself SIGNAME when it
reaches PHASE (the names passed to :meth:`SignalGuard.at`): how the tests interrupt a run
at a chosen moment without depending on timing. ``PHASE:WAIT`` instead holds the run at
PHASE until a signal comes from outside (at most ``HOLD_S``), so a test of a real external
signal cannot lose the race against a run that finishes first.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SELF_SIGNAL_ENV = "FIT_TO_TARGET_SELF_SIGNAL"
HANDLED = (signal.SIGINT, signal.SIGTERM)
HOLD_S = 600.0  # a held run goes on by itself after this: only a guard against a hang
HOLD_SLICE_S = 0.05


class Interrupted(BaseException):
    """Raised at a checkpoint after a signal. A BaseException, so no ``except Exception``
    on the way swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def self_signal(phase: str) -> str | None:
    """What the test hook ``FIT_TO_TARGET_SELF_SIGNAL`` asks for at ``phase``: a signal name,
    "WAIT", or None."""
    wanted, _, name = os.environ.get(SELF_SIGNAL_ENV, "").partition(":")
    return name if wanted == phase and name else None


class SignalGuard:
    """The run's SIGINT/SIGTERM handlers and checkpoints (main thread only)."""

    def __init__(self, cancel: threading.Event, err_fd: int | None = None) -> None:
        self.cancel = cancel  # a running fit polls this between iterations
        self.err_fd = err_fd  # stderr's descriptor: the handler writes to it unbuffered
        self.signum: int | None = None
        self._critical = 0
        self._again = False
        self._fired: set[str] = set()
        self._previous: dict[int, Any] = {}
        self._announced = False

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in HANDLED:
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except (ValueError, OSError):
                pass

    def restore(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    def adopt(self, pending: list[int]) -> None:
        """Signals that arrived before :meth:`install` (``batch.py`` records them while bpy loads)."""
        for signum in pending:
            self._record(signum)
        pending.clear()

    def _record(self, signum: int) -> None:
        if self.signum is None:
            self.signum = signum
            self.cancel.set()

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.signum is not None:
            if self._critical:
                self._again = True
                return
            raise Interrupted(self.signum)
        self._record(signum)
        if self.err_fd is not None:
            # os.write: printing through sys.stderr here could re-enter a print in progress
            try:
                os.write(self.err_fd, self.notice().encode())
                self._announced = True
            except OSError:
                pass

    def notice(self) -> str:
        name = signal_name(self.signum or signal.SIGINT)
        again = "Ctrl+C" if self.signum == signal.SIGINT else name
        return (
            f"fit-to-target: {name}: stopping; nothing more is baked or saved ({again} again to stop now)\n"
        )

    def pending_notice(self) -> str | None:
        """The notice, once, if the handler could not write it itself."""
        if self.signum is None or self._announced:
            return None
        self._announced = True
        return self.notice()

    @property
    def interrupted(self) -> bool:
        return self.signum is not None

    def checkpoint(self) -> None:
        """Raise :class:`Interrupted` if a signal arrived."""
        if self.signum is not None:
            raise Interrupted(self.signum)

    def at(self, phase: str) -> None:
        """A named moment of the run: the test hook may send a signal here (once per phase)."""
        if phase not in self._fired:
            self._fired.add(phase)
            name = self_signal(phase)
            if name == "WAIT":
                # the handler sets the event. It runs on the main thread between bytecodes,
                # and a lock wait returns for it only where the signal reached this thread;
                # where the kernel gave it to another (a worker's), one long wait held the run
                # to HOLD_S, so the wait is cut into slices
                deadline = time.monotonic() + HOLD_S
                while not self.cancel.wait(HOLD_SLICE_S) and time.monotonic() < deadline:
                    pass
            elif name:
                signal.raise_signal(getattr(signal, name))

    @contextmanager
    def critical(self) -> Iterator[None]:
        """A second signal waits until the block ends (an output renamed and recorded)."""
        self._critical += 1
        try:
            yield
        finally:
            self._critical -= 1
        if not self._critical and self._again:
            self._again = False
            raise Interrupted(self.signum or signal.SIGINT)
