"""The add-on's input error: what the panel shows and the operators and the batch command report."""

from __future__ import annotations

from ..warp_core.errors import UserError


class FitInputError(UserError, ValueError):
    """The fit (or Apply, Revert, Bake) cannot run; the message (one line) says what to change."""
