"""When each substep of a frame runs, and how long Blender's truncated CG may iterate.

A frame is one step of ``quality`` substeps, each solved with Blender's filtered
conjugate gradients: x0 = 0, stop when r.r <= ``CG_TOLERANCE`` |S b|^2 or after
``CG_MAX_ITERATIONS`` iterations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CG_TOLERANCE = 1.0e-4  # Blender: conjgrad_epsilon**2 with conjgrad_epsilon = 0.01
CG_MAX_ITERATIONS = 100


def substep_schedule(quality: int, time_scale: float) -> tuple[float, np.ndarray]:
    """Substep length and each substep's start time, as Blender's float32 loop runs them.

    ``while (step < tf) step += dt`` in float32 runs quality + 1 substeps for some
    qualities (12, 19, 23, ...); the pin interpolation then extrapolates slightly.
    """
    f32 = np.float32
    dt = f32(f32(1.0) / f32(quality)) * f32(time_scale)
    tf = f32(time_scale)
    starts = []
    step = f32(0.0)
    while step < tf:
        starts.append(step)
        step = f32(step + dt)
    return float(dt), np.array(starts, dtype=np.float32)


def substep_times(start: float, h: float, time_scale: float) -> tuple[float, float]:
    """Goal-spring time at the substep start and the pin time at its end, as fractions of
    the frame (Blender divides by time_scale so pinned motion is not scaled)."""
    return float(start) / time_scale, float(np.float32(np.float32(start) + np.float32(h))) / time_scale


@dataclass(frozen=True)
class SubstepSchedule:
    """The substeps of one frame: their length and float32 start times (see
    ``substep_schedule``), with the time scale that turns them into fractions of the frame."""

    h: float
    starts: np.ndarray  # (substeps,) float32, in frames times time_scale
    time_scale: float

    @classmethod
    def for_settings(cls, quality: int, time_scale: float) -> SubstepSchedule:
        h, starts = substep_schedule(quality, time_scale)
        return cls(h, starts, time_scale)

    def __len__(self) -> int:
        return len(self.starts)

    def times(self, k: int) -> tuple[float, float]:
        """``substep_times`` of substep ``k`` of the frame: (goal time, pin time)."""
        return substep_times(self.starts[k], self.h, self.time_scale)
