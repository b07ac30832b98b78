"""Where a captured graph may be recorded.

Warp's CPU graph capture is process-wide: while one thread records a graph, every CPU
launch, copy and array allocation of every other thread is recorded into that graph
instead of running (Warp keeps the capture in one global). Two simulators that run side by
side on threads would then corrupt each other's results, or crash on the arrays of the
other's graph. So a thread marked ``side_by_side`` never records: a simulator there that
needs a new graph (its collision stage just grew, say) raises ``CaptureOnWorker``, and
whoever runs the threads repeats that job alone once the others have finished. Every
graph is captured through ``graph_capture``, which checks the mark.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import warp as wp

_thread = threading.local()


class CaptureOnWorker(Exception):  # noqa: N818 (a signal to the pool, not an error to report)
    """A graph capture was needed on a thread that runs beside others: run the job alone."""


@contextmanager
def side_by_side() -> Iterator[None]:
    """Mark this thread as one of several using Warp at once, for the block."""
    _thread.side_by_side = True
    try:
        yield
    finally:
        _thread.side_by_side = False


@contextmanager
def graph_capture(device: Any, force_module_load: bool | None = None) -> Iterator[wp.ScopedCapture]:
    """``wp.ScopedCapture`` on ``device``, refused on a thread marked ``side_by_side``: every
    graph of the project is captured through here."""
    check_capture_allowed()
    with wp.ScopedCapture(device=device, force_module_load=force_module_load) as capture:
        yield capture


def check_capture_allowed() -> None:
    """Raise ``CaptureOnWorker`` on a thread marked ``side_by_side``."""
    if getattr(_thread, "side_by_side", False):
        raise CaptureOnWorker("a graph capture must not run beside other threads using Warp")
