"""One substep of Blender's cloth solver as a fixed sequence of kernel launches: forces,
assembly of the linearized backward-Euler system, truncated CG, and the position/velocity
update. The forward rollout, the captured graphs and the adjoint's recompute all launch
substeps through ``SubstepSolver.launch``, so they run the very same kernels in the same
order."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import warp as wp

from .arrays import ClothArrays
from .buffers import SubstepBuffers
from .cg import CG_UNTIL_CONVERGED, CGControl, ConjugateGradients
from .collision import CollisionInputs, CollisionStage
from .fields import launch_fields
from .params import ClothParams
from .pressure import launch_pressure
from .schedule import SubstepSchedule
from .self_collision import SelfCollisionStage
from .solver_kernels import solver_kernels
from .state import ClothState, RolloutOutputs, RolloutPlan


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


class SubstepSolver:
    """Launches substeps of one mesh's cloth (``arrays``) on its device.

    Made by ``ClothSimulator`` (one per mesh or batch); its rollouts (:meth:`run`), its
    captured graphs and the adjoint's recompute launch substeps through :meth:`launch`.
    The stages of a substep (:meth:`forces`, :meth:`assemble`, :meth:`solve`,
    :meth:`finish`) and :meth:`dot` are public because the implicit reverse
    (``adjoint_stable``) records, solves and differentiates them one by one.
    """

    def __init__(self, arrays: ClothArrays) -> None:
        self.arrays = arrays
        self.kernels = solver_kernels(arrays.dtype, arrays.members > 1)
        self.collisions: CollisionStage | None = None  # object collisions, when the cloth has colliders
        self.self_collisions: SelfCollisionStage | None = None  # with Self Collisions on
        self.cg = ConjugateGradients(arrays)

    @property
    def dot_mode(self) -> str:
        """How the CG's dot products run (``dots.launch_dot``); set before any buffers exist."""
        return self.cg.dot_mode

    @dot_mode.setter
    def dot_mode(self, mode: str) -> None:
        self.cg.dot_mode = mode

    @property
    def dot_columns(self) -> int:
        """Partial sums per dot product (the width of a partials array)."""
        return self.cg.dot_columns

    def make_buffers(self, cg_sets: int, requires_grad: bool) -> SubstepBuffers:
        a = self.arrays
        sizes = (a.vertex_count, a.spring_count, a.hinge_count, self.dot_columns, a.members)
        return SubstepBuffers(sizes, cg_sets, a.dtype, a.device, requires_grad)

    def load_modules(self) -> None:
        """Compile/load every kernel module now: a graph capture must not load any."""
        namespaces = [self.kernels, self.kernels.forces, self.cg.dot_kernels]
        if self.collisions is not None:
            namespaces.append(self.collisions.kernels)
        if self.self_collisions is not None:
            stage = self.self_collisions
            namespaces += [stage.kernels, stage.shared, stage.grid]
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
        v = self.forces(settings, buf, params, state, inputs)
        self.assemble(buf, params, v, inputs.h)
        launched = self.solve(buf, cg)
        # at a frame start the update adds dv to the pinned-goal velocities, not to state.v
        final = launched % 2 if buf.ping_pong else launched
        dv = buf.dv[final]
        if self.collisions is not None or self.self_collisions is not None:
            # Blender's collision response: v + dv, then the impulses as a further change
            collide = CollisionInputs(state.x, v, dv, inputs.goal_time, inputs.pin_time, inputs.h)
            if self.collisions is not None:
                v, dv = self.collisions.launch(collide, self.arrays.pinned, self.self_collisions)
            else:
                v, dv = self.self_collisions.launch(collide, self.arrays.pinned)
        self.finish(ClothState(state.x, v), dv, inputs, out)
        return launched

    def run(
        self,
        settings: ClothParams,
        buf: SubstepBuffers,
        params: wp.array,
        plan: RolloutPlan,
        initial: ClothState,
        outputs: RolloutOutputs,
        frame_rest: Callable[[RolloutPlan, int], None],
        cg: CGControl,
    ) -> None:
        """Every substep of ``plan`` from ``initial``, launched kernel by kernel with host
        CG convergence checks as ``cg`` says (each substep's count from ``plan.frozen``);
        ``frame_rest`` runs before each frame's substeps. What a rollout runs where it
        replays no captured graphs (``graphs.SubstepGraphs.run``, the same launches)."""
        a = self.arrays
        keep_states = outputs.state_x is not None
        if not keep_states:
            # nothing is kept for a backward pass: two states alternate, memory O(N)
            n, vec3, d = a.vertex_count, self.kernels.forces.vec3, a.device
            states = [
                ClothState(wp.clone(initial.x), wp.clone(initial.v)),
                ClothState(wp.zeros(n, dtype=vec3, device=d), wp.zeros(n, dtype=vec3, device=d)),
            ]
        s = 0
        for fi in range(plan.n_frames):
            goal_old, goal_new = plan.goals[fi], plan.goals[fi + 1]
            frame_rest(plan, fi)
            for k in range(len(plan.schedule)):
                if keep_states:
                    state = ClothState(outputs.state_x[s], outputs.state_v[s])
                    next_state = ClothState(outputs.state_x[s + 1], outputs.state_v[s + 1])
                else:
                    state, next_state = states[s % 2], states[(s + 1) % 2]
                frozen_count = -1 if plan.frozen is None else int(plan.frozen[s])
                self.launch(
                    settings,
                    buf,
                    params,
                    state,
                    SubstepInputs.of(goal_old, goal_new, plan.schedule, k),
                    next_state,
                    dataclasses.replace(cg, frozen_count=frozen_count),
                )
                wp.launch(
                    self.kernels.count_iterations,
                    dim=a.members,
                    device=a.device,
                    inputs=[buf.active, s],
                    outputs=[outputs.counts],
                )
                s += 1
            outputs.write_positions(plan.start_frame + fi + 1, next_state.x)

    def forces(
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
                a.member_vertices,
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
                    a.hinge_count // a.members,
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
                a.spring_count // a.members,
                a.inv_avg_spring_length,
                angular,
                dt(settings.sewing_force_max),
            ],
            outputs=[buf.spring_force, buf.spring_dfdx, buf.spring_dfdv],
        )
        return v

    def assemble(self, buf: SubstepBuffers, params: wp.array, v: wp.array, h: float) -> None:
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
                a.member_vertices,
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

    def solve(self, buf: SubstepBuffers, cg: CGControl) -> int:
        """Blender's truncated CG on ``buf``'s system; returns its iteration launches."""
        return self.cg.solve(buf, cg)

    def dot(self, a: wp.array, b: wp.array, row: int, partials: wp.array, out: wp.array) -> None:
        """Each member m's ``a . b`` into ``out[row * members + m]``, in a fixed order (``dots.py``)."""
        self.cg.dot(a, b, row, partials, out)

    def finish(self, start: ClothState, dv: wp.array, inputs: SubstepInputs, out: ClothState) -> None:
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
