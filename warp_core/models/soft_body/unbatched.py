"""What the soft body's simulator does not do, as the fit's simulator protocol
(``models.base.Simulator``) asks: batches of rollouts and the start-gap probe."""

from __future__ import annotations

from typing import NoReturn

import numpy as np

from .params import MODEL_NAME


class Unbatched:
    """The protocol's methods the soft body answers with "never" (its capabilities say so:
    ``batch_width`` 0, ``contact_probe`` False)."""

    def batch_width(self, rollouts: int) -> int:
        """0: this model runs no batches (the fit runs its rollouts one by one)."""
        return 0

    def rollout_batch(
        self,
        points: list[dict[str, float]],
        frame_end: int,
        output_frames: list[int] | None = None,
        goals: np.ndarray | None = None,
        frozen: object = None,
        maps: object = None,
    ) -> NoReturn:
        """Never: ``batch_width`` is 0."""
        raise NotImplementedError(
            f"the {MODEL_NAME} model runs no batches (batch_width is 0): run the rollouts one at a time"
        )

    def rollout_shifted(
        self, shift_m: np.ndarray, frame_end: int, output_frames: list[int], goals: np.ndarray | None
    ) -> NoReturn:
        """Never: ``contact_probe`` is False."""
        raise NotImplementedError(f"the {MODEL_NAME} model has no start-gap probe (contact_probe is False)")
