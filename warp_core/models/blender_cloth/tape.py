"""Launching outside the caller's ``wp.Tape``: a rollout records its own backward pass."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import warp as wp


@contextlib.contextmanager
def suspended_tape() -> Iterator[wp.Tape | None]:
    """Run launches without recording them on the caller's tape; yields that tape (or None)."""
    runtime = wp._src.context.runtime
    tape = runtime.tape
    runtime.tape = None
    try:
        yield tape
    finally:
        runtime.tape = tape
