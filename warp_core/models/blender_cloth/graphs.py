"""The forward rollout as captured graphs: one graph per substep index within a frame.

Each substep (forces, the CG iterations, update) is captured once and replayed for every
frame: thousands of small launches per frame otherwise cost more than the work, on CUDA
and on the CPU alike. The graphs read and write fixed buffers, so a replay copies the
state and goals in and out around each launch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import warp as wp

from ...capture import graph_capture
from .buffers import SubstepBuffers
from .params import ClothParams
from .schedule import SubstepSchedule
from .state import ClothState, RolloutOutputs, RolloutPlan
from .step import CGControl, SubstepInputs, SubstepSolver

# the CG iterations in blocks, each entered only while the CG is active and masked past
# convergence within it, with the count read from SubstepBuffers.frozen
_IN_GRAPH = CGControl(in_graph=True)


def graph_key(settings: ClothParams, schedule: SubstepSchedule) -> tuple:
    """What a captured substep graph bakes in besides its arrays: the substep times and
    every setting its launches take as a value. Equal keys, same graphs."""
    return (
        tuple(schedule.starts.tolist()),
        schedule.h,
        schedule.time_scale,
        tuple(settings.gravity),
        settings.sewing_force_max,
        (settings.use_pressure, settings.uniform_pressure_force, settings.pressure_factor),
        (settings.force_fields, settings.fps),
        settings.bending_model,
    )


@dataclass
class SubstepGraphSet:
    """The fixed buffers the captured graphs read and write, and the graphs."""

    state: ClothState  # the substep's start state, (N,) vec3 each
    next_state: ClothState  # its end state
    goal_old: wp.array  # the frame's pin goals at its start, (N,) vec3
    goal_new: wp.array  # and at its end
    count: wp.array  # (members,) int32, CG iterations of the last substep
    graphs: list = field(default_factory=list)  # one per substep index within a frame


class SubstepGraphs:
    """Captured substep graphs, kept until the schedule, gravity, time scale or the work
    buffers change."""

    def __init__(self, solver: SubstepSolver) -> None:
        self.solver = solver
        self._cached: tuple[tuple, SubstepGraphSet] | None = None

    def capture(
        self, settings: ClothParams, buf: SubstepBuffers, params: wp.array, schedule: SubstepSchedule
    ) -> SubstepGraphSet:
        """The graph set for ``schedule``, captured now unless the cached one matches."""
        key = (graph_key(settings, schedule), id(buf), self._collision_key())
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1]
        a = self.solver.arrays
        d = a.device
        n = a.vertex_count
        kernels = self.solver.kernels

        def vec() -> wp.array:
            return wp.zeros(n, dtype=kernels.forces.vec3, device=d)

        io = SubstepGraphSet(
            state=ClothState(vec(), vec()),
            next_state=ClothState(vec(), vec()),
            goal_old=vec(),
            goal_new=vec(),
            count=wp.zeros(a.members, dtype=wp.int32, device=d),
        )
        self.solver.load_modules()
        for k in range(len(schedule)):
            inputs = SubstepInputs.of(io.goal_old, io.goal_new, schedule, k)
            with graph_capture(d, force_module_load=False) as capture:
                self.solver.launch(settings, buf, params, io.state, inputs, io.next_state, _IN_GRAPH)
                wp.launch(
                    kernels.count_iterations,
                    dim=a.members,
                    device=d,
                    inputs=[buf.active, 0],
                    outputs=[io.count],
                )
            io.graphs.append(capture.graph)
        self._cached = (key, io)
        return io

    def _collision_key(self) -> tuple:
        """What the captured collision launches hold: the stage's arrays and its constants."""
        key: tuple = ()
        for stage in (self.solver.collisions, self.solver.self_collisions):
            if stage is not None:
                s = stage.settings
                key += (id(stage), stage.slots, s.distance_min, s.impulse_clamp, s.collision_quality)
                key += (s.self_distance_min, s.self_friction, s.self_impulse_clamp)
        return key

    def run(
        self,
        settings: ClothParams,
        buf: SubstepBuffers,
        params: wp.array,
        plan: RolloutPlan,
        initial: ClothState,
        outputs: RolloutOutputs,
        frame_rest: Callable[[RolloutPlan, int], None],
    ) -> None:
        """Replay the graphs for every substep of ``plan`` from ``initial``; ``frame_rest``
        runs before each frame's substeps (the rest shape of a dynamic mesh)."""
        io = self.capture(settings, buf, params, plan.schedule)
        d = self.solver.arrays.device
        x, v = io.state.x, io.state.v
        wp.copy(x, initial.x)
        wp.copy(v, initial.v)
        frozen = None
        if plan.frozen is not None:
            frozen = wp.array(np.asarray(plan.frozen, dtype=np.int32), dtype=wp.int32, device=d)
        else:
            buf.frozen.fill_(-1)
        s = 0
        for fi in range(plan.n_frames):
            wp.copy(io.goal_old, plan.goals[fi])
            wp.copy(io.goal_new, plan.goals[fi + 1])
            frame_rest(plan, fi)
            for graph in io.graphs:
                if frozen is not None:
                    wp.copy(buf.frozen, frozen, src_offset=s, count=1)
                wp.capture_launch(graph)
                members = io.count.shape[0]
                wp.copy(outputs.counts, io.count, dest_offset=s * members, count=members)
                wp.copy(x, io.next_state.x)
                wp.copy(v, io.next_state.v)
                if outputs.state_x is not None:
                    wp.copy(outputs.state_x[s + 1], x)
                    wp.copy(outputs.state_v[s + 1], v)
                s += 1
            outputs.write_positions(plan.start_frame + fi + 1, x)
