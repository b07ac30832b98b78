"""One substep of Blender's cloth solver as a fixed sequence of kernel launches: forces,
assembly of the linearized backward-Euler system, truncated CG, and the position/velocity
update. The forward rollout, the captured graphs and the adjoint's recompute all launch
substeps through ``SubstepSolver.launch``, so they run the very same kernels in the same
order."""

from __future__ import annotations

from dataclasses import dataclass

import warp as wp

from .arrays import ClothArrays
from .buffers import SubstepBuffers
from .collision import CollisionInputs, CollisionStage
from .dots import block_order, dot_columns, dot_kernels, launch_dot
from .fields import launch_fields
from .params import ClothParams
from .pressure import launch_pressure
from .schedule import CG_BLOCK_BOUNDS, CG_MAX_ITERATIONS, CG_TOLERANCE, SubstepSchedule, conditional_nodes
from .solver_kernels import solver_kernels
from .state import ClothState


@dataclass(frozen=True)
class SubstepInputs:
    """What drives one substep besides the state: the frame's pin goals and where the
    substep sits within the frame."""

    goal_old: wp.array  # pin goal positions at the frame's start, (N,) vec3
    goal_new: wp.array  # and at its end
    frame_start: bool  # first substep of the frame: pinned vertices take their goal's velocity
    goal_time: float  # goal-spring time at the substep start, fraction of the frame
    pin_time: float  # pin time at the substep end, fraction of the frame
    h: float  # substep length

    @classmethod
    def of(cls, goal_old: wp.array, goal_new: wp.array, schedule: SubstepSchedule, k: int) -> SubstepInputs:
        """Inputs of substep ``k`` of a frame."""
        goal_time, pin_time = schedule.times(k)
        return cls(goal_old, goal_new, k == 0, goal_time, pin_time, schedule.h)


@dataclass(frozen=True)
class CGControl:
    """How the CG loop decides when to stop.

    ``frozen_count >= 0``: run exactly that many iterations, with no host checks.
    ``frozen_count <= -2``: run ``-2 - frozen_count`` iterations, and more only while the
    residual is still 10 times above Blender's tolerance. Otherwise (-1) stop on Blender's
    criterion, reading the device's convergence flag every ``check_every`` iterations.
    ``in_graph``: no host checks, the count taken from ``SubstepBuffers.frozen`` as the
    caller set it, so the launches can be captured once into a graph: the iterations run
    in blocks (``CG_BLOCK_BOUNDS``), each only while the CG is still active (iterations
    past convergence within a block are masked no-ops); with per-iteration buffers (a
    backward pass follows) ``graph_iterations`` run, masked past the count.
    """

    frozen_count: int = -1
    check_every: int = 1
    in_graph: bool = False
    # in a graph without conditional blocks: how many iterations it launches (masked past
    # ``SubstepBuffers.frozen``); a backward pass captures one graph per needed length
    graph_iterations: int = CG_MAX_ITERATIONS
    tolerance: float = CG_TOLERANCE  # r.r <= tolerance |S b|^2 ends the CG (-1 and -2 - n)


CG_UNTIL_CONVERGED = CGControl()
# Blender's stopping test, checked after every iteration


class SubstepSolver:
    """Launches substeps of one mesh's cloth (``arrays``) on its device."""

    def __init__(self, arrays: ClothArrays) -> None:
        self.arrays = arrays
        self.kernels = solver_kernels(arrays.dtype)
        self.collisions: CollisionStage | None = None  # object collisions, when the cloth has colliders
        self.dot_kernels = dot_kernels(arrays.dtype)
        # how the CG's dot products run (``dots.launch_dot``): the block order, as tiles on
        # CUDA; set before any buffers are made
        self.dot_mode = "chunks"
        if block_order(arrays.vertex_count):
            self.dot_mode = "tiles" if wp.get_device(arrays.device).is_cuda else "blocks"

    @property
    def dot_columns(self) -> int:
        """Partial sums per dot product (the width of a partials array)."""
        return dot_columns(self.arrays.vertex_count, self.dot_mode != "chunks")

    def make_buffers(self, cg_sets: int, requires_grad: bool) -> SubstepBuffers:
        a = self.arrays
        sizes = (a.vertex_count, a.spring_count, a.hinge_count, self.dot_columns)
        return SubstepBuffers(sizes, cg_sets, a.dtype, a.device, requires_grad)

    def load_modules(self) -> None:
        """Compile/load every kernel module now: a graph capture must not load any."""
        namespaces = [self.kernels, self.kernels.forces, self.dot_kernels]
        if self.collisions is not None:
            namespaces.append(self.collisions.kernels)
        for namespace in namespaces:
            for kernel in vars(namespace).values():
                if isinstance(kernel, wp.Kernel):
                    wp.load_module(kernel.module, device=self.arrays.device)

    def launch(
        self,
        settings: ClothParams,
        buf: SubstepBuffers,
        params: wp.array,
        state: ClothState,
        inputs: SubstepInputs,
        out: ClothState,
        cg: CGControl = CG_UNTIL_CONVERGED,
    ) -> int:
        """Launch one substep from ``state`` into ``out`` with the continuous parameters
        ``params``; ``settings`` gives gravity, time scale and bending model. Returns the
        number of CG iteration launches (including masked ones)."""
        v = self._forces(settings, buf, params, state, inputs)
        self._assemble(buf, params, v, inputs.h)
        launched = self._solve(buf, cg)
        # at a frame start the update adds dv to the pinned-goal velocities, not to state.v
        final = launched % 2 if buf.ping_pong else launched
        dv = buf.dv[final]
        if self.collisions is not None:
            # Blender's collision response: v + dv, then the impulses as a further change
            collide = CollisionInputs(state.x, v, dv, inputs.goal_time, inputs.pin_time, inputs.h)
            v, dv = self.collisions.launch(collide, self.arrays.pinned)
        self._finish(ClothState(state.x, v), dv, inputs, out)
        return launched

    def _forces(
        self,
        settings: ClothParams,
        buf: SubstepBuffers,
        params: wp.array,
        state: ClothState,
        inputs: SubstepInputs,
    ) -> wp.array:
        """Vertex, hinge and spring forces and their Jacobians; returns the velocities the
        substep starts from (pinned ones replaced by their goal's at a frame start)."""
        a = self.arrays
        k_ = self.kernels
        fk = k_.forces
        d = a.device
        n = a.vertex_count
        dt = a.dtype
        x, v = state.x, state.v
        if inputs.frame_start:
            wp.launch(
                k_.pin_velocities,
                dim=n,
                device=d,
                inputs=[v, a.pinned, inputs.goal_old, inputs.goal_new, dt(1.0 / settings.time_scale)],
                outputs=[buf.v_start],
            )
            v = buf.v_start
        gravity = fk.vec3(*[float(g) for g in settings.gravity])
        if settings.use_pressure:
            launch_pressure(a, settings, x, buf)
        if settings.force_fields:
            launch_fields(a, settings, x, v, buf)
        wp.launch(
            fk.vertex_forces,
            dim=n,
            device=d,
            inputs=[
                x,
                v,
                inputs.goal_old,
                inputs.goal_new,
                a.goal_weight,
                params,
                gravity,
                dt(inputs.goal_time),
                a.inv_avg_spring_length,
                buf.pressure_force,
                buf.field_force,
            ],
            outputs=[buf.force, buf.dfdx_diag, buf.dfdv_diag],
        )
        if a.hinge_count:
            wp.launch(
                fk.hinge_forces,
                dim=a.hinge_count,
                device=d,
                inputs=[
                    x,
                    v,
                    a.hinge_vertices,
                    a.hinge_spring,
                    a.hinge_face_a,
                    a.hinge_face_b,
                    a.hinge_face_vertices,
                    a.hinge_rest_angle,
                    a.spring_rest_length,
                    a.hinge_ang_stiffness,
                    params,
                ],
                outputs=[buf.hinge_force_a, buf.hinge_force_b, buf.hinge_force_edge],
            )
        angular = 1 if settings.bending_model == "ANGULAR" else 0
        wp.launch(
            fk.spring_forces,
            dim=a.spring_count,
            device=d,
            inputs=[
                x,
                v,
                a.spring_vertices,
                a.spring_kind,
                a.spring_rest_length,
                a.spring_lin_stiffness,
                params,
                a.inv_avg_spring_length,
                angular,
                dt(settings.sewing_force_max),
            ],
            outputs=[buf.spring_force, buf.spring_dfdx, buf.spring_dfdv],
        )
        return v

    def _assemble(self, buf: SubstepBuffers, params: wp.array, v: wp.array, h: float) -> None:
        """Diagonal blocks and right-hand side per vertex, off-diagonal blocks per spring."""
        a = self.arrays
        k_ = self.kernels
        d = a.device
        hh = a.dtype(h)
        wp.launch(
            k_.assemble_vertices,
            dim=a.vertex_count,
            device=d,
            inputs=[
                v,
                buf.force,
                buf.dfdx_diag,
                buf.dfdv_diag,
                buf.hinge_force_a,
                buf.hinge_force_b,
                buf.hinge_force_edge,
                a.vertex_hinge_offsets,
                a.vertex_hinge_ids,
                a.vertex_hinge_roles,
                buf.spring_force,
                buf.spring_dfdx,
                buf.spring_dfdv,
                a.vertex_spring_offsets,
                a.vertex_spring_ids,
                a.vertex_spring_other,
                a.vertex_spring_sign,
                params,
                hh,
            ],
            outputs=[buf.system_diag, buf.rhs],
        )
        wp.launch(
            k_.assemble_springs,
            dim=a.spring_count,
            device=d,
            inputs=[buf.spring_dfdx, buf.spring_dfdv, hh],
            outputs=[buf.system_offdiag],
        )

    def _solve(self, buf: SubstepBuffers, cg: CGControl) -> int:
        """Blender's filtered CG on the assembled system; returns the iteration launches."""
        a = self.arrays
        k_ = self.kernels
        d = a.device
        n = a.vertex_count
        buf.active.zero_()
        wp.launch(
            k_.cg_init,
            dim=n,
            device=d,
            inputs=[buf.rhs, a.pinned],
            outputs=[buf.residual[0], buf.direction[0], buf.dv[0]],
        )
        self._dot(buf.residual[0], buf.residual[0], 0, buf.delta_partials, buf.delta)
        if not cg.in_graph:
            buf.frozen.fill_(cg.frozen_count)
        wp.launch(k_.cg_start, dim=1, device=d, inputs=[buf.delta, buf.frozen], outputs=[buf.active])
        frozen_count = cg.frozen_count
        if cg.in_graph and buf.ping_pong and conditional_nodes(d):
            # captured: blocks of iterations, each entered only while the CG is active
            self._graph_blocks(buf, 0, cg.tolerance)
            return CG_BLOCK_BOUNDS[-1]
        iterations = frozen_count if frozen_count >= 0 and not cg.in_graph else cg.graph_iterations
        launched = 0
        for k in range(iterations):
            self._iteration(buf, k, cg.tolerance)
            launched = k + 1
            if (
                frozen_count < 0
                and not cg.in_graph
                and launched % cg.check_every == 0
                and not int(buf.active.numpy()[launched])
            ):
                break
        return launched

    def _graph_blocks(self, buf: SubstepBuffers, block: int, tolerance: float = CG_TOLERANCE) -> None:
        """Iterations ``CG_BLOCK_BOUNDS[block]`` up to the next bound, then the next block
        inside a conditional node that runs only if the CG is still active there. Past
        convergence an iteration changes nothing (it is masked), so skipping it is exact;
        the bounds are even, so the ping-pong buffers end where 100 iterations would."""
        lo, hi = CG_BLOCK_BOUNDS[block], CG_BLOCK_BOUNDS[block + 1]
        for k in range(lo, hi):
            self._iteration(buf, k, tolerance)
        if block + 2 < len(CG_BLOCK_BOUNDS):
            wp.capture_if(
                buf.active[hi : hi + 1], on_true=lambda: self._graph_blocks(buf, block + 1, tolerance)
            )

    def _dot(self, a: wp.array, b: wp.array, row: int, partials: wp.array, out: wp.array) -> None:
        """out[row] = a . b in a fixed order (``dots.py``)."""
        launch_dot(self.dot_kernels, a, b, row, partials, out, self.dot_mode)

    def _iteration(self, buf: SubstepBuffers, k: int, tolerance: float = CG_TOLERANCE) -> None:
        """CG iteration ``k`` (masked when the CG is no longer active)."""
        a = self.arrays
        k_ = self.kernels
        d = a.device
        n = a.vertex_count
        ping_pong = buf.ping_pong
        tol = a.dtype(tolerance)
        i = k % 2 if ping_pong else k
        j = (k + 1) % 2 if ping_pong else k + 1
        wp.launch(
            k_.matvec,
            dim=n,
            device=d,
            inputs=[
                buf.system_diag,
                buf.system_offdiag,
                a.vertex_spring_offsets,
                a.vertex_spring_ids,
                a.vertex_spring_other,
                buf.direction[i],
                a.pinned,
            ],
            outputs=[buf.product[i]],
        )
        self._dot(buf.direction[i], buf.product[i], k, buf.curvature_partials, buf.curvature)
        wp.launch(
            k_.cg_update,
            dim=n,
            device=d,
            inputs=[
                buf.dv[i],
                buf.residual[i],
                buf.direction[i],
                buf.product[i],
                buf.curvature,
                buf.delta,
                buf.active,
                k,
            ],
            outputs=[buf.dv[j], buf.residual[j]],
        )
        self._dot(buf.residual[j], buf.residual[j], k + 1, buf.delta_partials, buf.delta)
        wp.launch(
            k_.cg_direction,
            dim=n,
            device=d,
            inputs=[
                buf.residual[j],
                buf.direction[i],
                buf.delta,
                a.pinned,
                k,
                buf.frozen,
                CG_MAX_ITERATIONS,
                tol,
                buf.active,
            ],
            outputs=[buf.direction[j]],
        )

    def _finish(self, start: ClothState, dv: wp.array, inputs: SubstepInputs, out: ClothState) -> None:
        """v += dv, x += h v; pinned vertices follow their goal."""
        a = self.arrays
        dt = a.dtype
        wp.launch(
            self.kernels.finish_substep,
            dim=a.vertex_count,
            device=a.device,
            inputs=[
                start.x,
                start.v,
                dv,
                a.pinned,
                inputs.goal_old,
                inputs.goal_new,
                dt(inputs.pin_time),
                dt(inputs.h),
            ],
            outputs=[out.x, out.v],
        )
