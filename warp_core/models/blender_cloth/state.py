"""What a rollout carries from substep to substep, what drives it, and where it writes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import warp as wp

from .schedule import SubstepSchedule


@dataclass(frozen=True)
class ClothState:
    """Positions and velocities of every vertex, (N,) arrays of vec3."""

    x: wp.array
    v: wp.array


@dataclass(frozen=True)
class RolloutPlan:
    """The inputs of a rollout that stay fixed while it runs."""

    goals: list[wp.array]  # pin goal positions of frames 0..n_frames after the start, (N,) vec3 each
    schedule: SubstepSchedule
    n_frames: int  # frames simulated after the start frame
    start_frame: int
    frozen: np.ndarray | None  # CG iteration count of every substep, or None to stop on Blender's test


@dataclass(frozen=True)
class RolloutOutputs:
    """Where a rollout writes: positions at the output frames, CG iteration counts, and the
    state at every substep start when a backward pass may follow."""

    frames: list[int]
    positions: wp.array  # (len(frames), N) vec3
    counts: wp.array  # (max(substeps, 1),) int32, CG iterations per substep
    state_x: wp.array | None  # (substeps + 1, N) vec3, or None
    state_v: wp.array | None

    def write_positions(self, frame: int, x: wp.array) -> None:
        """Copy ``x`` into every output row of ``frame``."""
        for r, f in enumerate(self.frames):
            if f == frame:
                wp.copy(self.positions[r], x)
