"""Launching outside the caller's ``wp.Tape``: a rollout records its own backward pass."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import warp as wp


@contextlib.contextmanager
def suspended_tape() -> Iterator[wp.Tape | None]:
    """Run launches without recording them on the caller's tape; yields that tape (or None)."""
    # Warp (1.19) has no public accessor for the tape that is recording: its runtime holds
    # it, and this is the one place that reads and sets it there
    runtime = wp._src.context.runtime
    tape = runtime.tape
    runtime.tape = None
    try:
        yield tape
    finally:
        runtime.tape = tape
