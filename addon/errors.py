"""The add-on's input error: what the panel shows and the operators and the batch command
report; and how a message names a setting, in the words of whoever reads it (the panel's
labels, or the batch command's options)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..warp_core.errors import UserError


class FitInputError(UserError, ValueError):
    """The fit (or Apply, Revert, Bake) cannot run; the message (one line) says what to change."""


# Set while the batch command runs (its own process, or a test calling it in-process): the
# messages made meanwhile are read on a terminal or in a report, not in the panel.
_for_batch = False


@contextlib.contextmanager
def addressed_to_batch() -> Iterator[None]:
    """Messages made inside name the batch command's options (``--loss surface``)."""
    global _for_batch
    before, _for_batch = _for_batch, True
    try:
        yield
    finally:
        _for_batch = before


def setting(panel: str, batch: str) -> str:
    """How to change a setting, for whoever reads the message: ``panel`` ("Loss: Surface in
    the panel") in Blender, ``batch`` ("--loss surface") for the batch command."""
    return batch if _for_batch else panel
