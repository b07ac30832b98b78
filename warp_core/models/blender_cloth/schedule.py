"""When each substep of a frame runs, and how long Blender's truncated CG may iterate.

A frame is one step of ``quality`` substeps, each solved with Blender's filtered
conjugate gradients: x0 = 0, stop when r.r <= ``CG_TOLERANCE`` |S b|^2 or after
``CG_MAX_ITERATIONS`` iterations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import warp as wp

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


# Where a CG captured on CUDA may stop: the iterations up to each bound run as one block,
# and the next block only if the CG is still active (a conditional graph node). Even bounds,
# ending at CG_MAX_ITERATIONS. Blocks of 4 (2 at first): on the CPU a 12x12 sheet's rollout
# took 151 ms running all 100 iterations masked, 57 ms with these blocks, 65-96 ms with
# blocks doubling in size (0, 2, 4, 8, 16, ...); blocks of 2 were no faster than 4. The CPU
# now captures a while loop instead (``cg.py``): as fast to replay, and a 12x12 simulator
# captures its substep graphs in 12 ms instead of 290.
CG_BLOCK_BOUNDS = (0, 2, 4, 6, *range(8, CG_MAX_ITERATIONS, 4), CG_MAX_ITERATIONS)


def conditional_nodes(device: str) -> bool:
    """Whether a captured graph can branch on the device: always on the CPU, on CUDA with a
    12.4+ driver and toolkit (else all iterations run, masked)."""
    return wp.get_device(device).is_cpu or wp.is_conditional_graph_supported()
