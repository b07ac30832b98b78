"""``ClothSimulator``: Blender's cloth modifier on a mesh, as Warp arrays, with rollouts.

A rollout starts at the cache start frame from the mesh (or a given state) and runs one
step of ``quality`` substeps per frame. Inside ``with wp.Tape():`` it records its own
backward pass (see ``adjoint.py``), so losses written as Warp kernels on the returned
positions get exact gradients for every parameter, the initial positions and velocities.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import warp as wp

from ...mesh import ClothMesh
from .params import PARAMETER_NAMES, ClothParams
from .solver_kernels import (
    CG_MAX_ITERATIONS,
    CG_TOLERANCE,
    DOT_CHUNK,
    solver_kernels,
    substep_schedule,
    substep_times,
)
from .topology import build_topology, vertex_tables

DTYPES = {"float32": wp.float32, "float64": wp.float64}


@contextlib.contextmanager
def suspended_tape():
    """Run launches without recording them on the caller's tape (we record our own backward)."""
    runtime = wp._src.context.runtime
    tape = runtime.tape
    runtime.tape = None
    try:
        yield tape
    finally:
        runtime.tape = tape


class SubstepBuffers:
    """Work arrays of one substep; ``cg_sets`` buffer sets for CG iterations."""

    def __init__(
        self, n: int, n_springs: int, n_hinges: int, cg_sets: int, dtype, device: str, requires_grad: bool
    ) -> None:
        fk = solver_kernels(dtype).forces
        vec3, mat33 = fk.vec3, fk.mat33

        def vec(count: int = n):
            return wp.zeros(count, dtype=vec3, device=device, requires_grad=requires_grad)

        def mat(count: int):
            return wp.zeros(count, dtype=mat33, device=device, requires_grad=requires_grad)

        self.v_start = vec()
        self.force = vec()
        self.dfdx_diag = mat(n)
        self.dfdv_diag = mat(n)
        self.hinge_force_a = vec(n_hinges)
        self.hinge_force_b = vec(n_hinges)
        self.hinge_force_edge = vec(n_hinges)
        self.spring_force = vec(n_springs)
        self.spring_dfdx = mat(n_springs)
        self.spring_dfdv = mat(n_springs)
        self.system_diag = mat(n)
        self.system_offdiag = mat(n_springs)
        self.rhs = vec()
        self.delta = wp.zeros(CG_MAX_ITERATIONS + 2, dtype=dtype, device=device, requires_grad=requires_grad)
        self.curvature = wp.zeros(
            CG_MAX_ITERATIONS + 2, dtype=dtype, device=device, requires_grad=requires_grad
        )
        chunks = (n + DOT_CHUNK - 1) // DOT_CHUNK
        self.delta_partials = wp.zeros(
            (CG_MAX_ITERATIONS + 2, chunks), dtype=dtype, device=device, requires_grad=requires_grad
        )
        self.curvature_partials = wp.zeros(
            (CG_MAX_ITERATIONS + 2, chunks), dtype=dtype, device=device, requires_grad=requires_grad
        )
        self.active = wp.zeros(CG_MAX_ITERATIONS + 2, dtype=wp.int32, device=device)
        self.frozen = wp.full(1, -1, dtype=wp.int32, device=device)  # CG iteration count, or -1
        self.dv = [vec() for _ in range(cg_sets + 1)]
        self.residual = [vec() for _ in range(cg_sets + 1)]
        self.direction = [vec() for _ in range(cg_sets + 1)]
        self.product = [vec() for _ in range(cg_sets)]
        self.cg_sets = cg_sets
        # without gradients two buffer sets alternate; with them each iteration keeps its own
        self.ping_pong = not requires_grad


@dataclass
class Rollout:
    """Positions at the requested frames, shape (frames, N) of vec3, and solver statistics."""

    frames: list[int]
    positions: wp.array
    cg_iterations: np.ndarray  # per substep
    substeps_per_frame: int
    state_x: wp.array | None = None  # (substeps + 1, N) when a backward pass may follow
    state_v: wp.array | None = None
    extras: dict = field(default_factory=dict)

    @property
    def frozen(self) -> np.ndarray:
        """Pass as ``rollout(frozen=...)`` to repeat this rollout's CG iteration counts."""
        return self.cg_iterations

    def numpy(self) -> np.ndarray:
        return self.positions.numpy().astype(np.float64)


class ClothSimulator:
    """Blender's cloth model for one mesh on one Warp device.

    ``params`` is a Warp array of the continuous parameters in ``PARAMETER_NAMES`` order
    (requires_grad): read ``params.grad`` after ``tape.backward``.
    """

    def __init__(
        self,
        mesh: ClothMesh,
        params: ClothParams | None = None,
        device: str = "cpu",
        precision: str = "float32",
        start_frame: int = 1,
    ) -> None:
        params = params or ClothParams()
        params.validate()
        if precision not in DTYPES:
            raise ValueError(f"precision must be one of {sorted(DTYPES)}, got {precision!r}")
        self.mesh = mesh
        self.device = str(wp.get_device(device))
        self.precision = precision
        self.dtype = DTYPES[precision]
        self.start_frame = int(start_frame)
        self.settings = params
        self.topology = top = build_topology(mesh, params.bending_model)
        self.kernels = solver_kernels(self.dtype)
        fk = self.kernels.forces
        self.vec3 = fk.vec3
        np_float = np.float32 if precision == "float32" else np.float64
        self._np_float = np_float
        d = self.device
        n = mesh.vertex_count
        self.vertex_count = n
        self.rest_positions = wp.array(mesh.vertices.astype(np_float), dtype=fk.vec3, device=d)
        self.spring_vertices = wp.array(top.spring_vertices, dtype=wp.vec2i, device=d)
        self.spring_kind = wp.array(top.spring_kind, dtype=wp.int32, device=d)
        self.hinge_vertices = wp.array(top.hinge_vertices, dtype=wp.vec2i, device=d)
        self.hinge_spring = wp.array(top.hinge_spring, dtype=wp.int32, device=d)
        self.hinge_face_a = wp.array(top.hinge_face_a, dtype=wp.vec2i, device=d)
        self.hinge_face_b = wp.array(top.hinge_face_b, dtype=wp.vec2i, device=d)
        self.hinge_face_vertices = wp.array(top.hinge_face_vertices, dtype=wp.int32, device=d)
        self.pinned = wp.array(top.pinned, dtype=wp.int32, device=d)
        # per-vertex tables: every sum over a vertex's springs and hinges runs in one fixed
        # order, the same on every device
        spring_table, hinge_table = vertex_tables(top, n)
        (
            self.vertex_spring_offsets,
            self.vertex_spring_ids,
            self.vertex_spring_other,
            self.vertex_spring_sign,
        ) = (wp.array(a, dtype=wp.int32, device=d) for a in spring_table)
        self.vertex_hinge_offsets, self.vertex_hinge_ids, self.vertex_hinge_roles = (
            wp.array(a, dtype=wp.int32, device=d) for a in hinge_table
        )
        self.goal_weight = wp.array(top.goal_weight.astype(np_float), dtype=self.dtype, device=d)
        self.spring_rest_length = wp.zeros(len(top.spring_kind), dtype=self.dtype, device=d)
        self.hinge_rest_angle = wp.zeros(len(top.hinge_spring), dtype=self.dtype, device=d)
        with suspended_tape():
            wp.launch(
                fk.spring_rest_lengths,
                dim=len(top.spring_kind),
                device=d,
                inputs=[self.rest_positions, self.spring_vertices],
                outputs=[self.spring_rest_length],
            )
            if len(top.hinge_spring):
                wp.launch(
                    fk.hinge_rest_angles,
                    dim=len(top.hinge_spring),
                    device=d,
                    inputs=[
                        self.rest_positions,
                        self.hinge_vertices,
                        self.hinge_face_a,
                        self.hinge_face_b,
                        self.hinge_face_vertices,
                    ],
                    outputs=[self.hinge_rest_angle],
                )
        rest = self.spring_rest_length.numpy().astype(np.float64)
        structural = top.structural_mask
        self.avg_spring_length = float(rest[structural].mean()) if structural.any() else 1.0
        self.params = wp.array(
            np.array([params.values()[k] for k in PARAMETER_NAMES], dtype=np_float),
            dtype=self.dtype,
            device=d,
            requires_grad=True,
        )
        self._forward_buffers: SubstepBuffers | None = None
        self.graphs_enabled = True
        self._graphs = None

    # ---------------------------------------------------------------- parameters
    def set_params(self, values: ClothParams | dict[str, float]) -> None:
        """Set parameters: a ClothParams (quality, time scale and gravity too), or a dict of
        some continuous parameters."""
        if isinstance(values, ClothParams):
            values.validate()
            if values.bending_model != self.settings.bending_model:
                raise ValueError("bending_model changes the springs: build a new ClothSimulator")
            self.settings = values
            values = values.values()
        unknown = set(values) - set(PARAMETER_NAMES)
        if unknown:
            raise ValueError(f"unknown cloth parameter(s): {', '.join(sorted(unknown))}")
        settings = self.settings.replace(**{k: float(v) for k, v in values.items()})
        settings.validate()
        self.settings = settings
        current = settings.values()
        self.params.assign(np.array([current[k] for k in PARAMETER_NAMES], dtype=self._np_float))

    def max_stretch(self, positions: np.ndarray) -> float:
        """Largest structural spring length over its rest length in ``positions`` (frames, N, 3)."""
        top = self.topology
        edges = top.spring_vertices[top.spring_kind == 0]
        if not len(edges):
            return 1.0
        v0 = self.mesh.vertices
        rest = np.linalg.norm(v0[edges[:, 1]] - v0[edges[:, 0]], axis=1)
        lengths = np.linalg.norm(positions[:, edges[:, 1]] - positions[:, edges[:, 0]], axis=2)
        return float((lengths / rest).max())

    def param_values(self) -> dict[str, float]:
        return dict(zip(PARAMETER_NAMES, self.params.numpy().astype(float), strict=True))

    # ---------------------------------------------------------------- one substep
    def launch_substep(
        self,
        buf: SubstepBuffers,
        params: wp.array,
        x: wp.array,
        v: wp.array,
        goal_old: wp.array,
        goal_new: wp.array,
        frame_start: bool,
        goal_time: float,
        pin_time: float,
        h: float,
        x_out: wp.array,
        v_out: wp.array,
        frozen_count: int = -1,
        check_every: int = 1,
        in_graph: bool = False,
    ) -> int:
        """Launch one substep. With ``frozen_count >= 0`` run exactly that many CG
        iterations (no host checks); otherwise stop on Blender's criterion. ``in_graph``:
        launch all CG iterations (those past convergence are masked no-ops) without host
        checks, taking the iteration count from ``buf.frozen`` as set by the caller, so the
        launches can be captured once into a CUDA graph. Returns the number of CG
        iteration launches (including masked ones)."""
        k_ = self.kernels
        fk = k_.forces
        d = self.device
        n = self.vertex_count
        n_springs = len(self.topology.spring_kind)
        n_hinges = len(self.topology.hinge_spring)
        dt = self.dtype
        inv_len = dt(1.0 / self.avg_spring_length)
        if frame_start:
            wp.launch(
                k_.pin_velocities,
                dim=n,
                device=d,
                inputs=[v, self.pinned, goal_old, goal_new, dt(1.0 / self.settings.time_scale)],
                outputs=[buf.v_start],
            )
            v = buf.v_start
        gravity = fk.vec3(*[float(g) for g in self.settings.gravity])
        wp.launch(
            fk.vertex_forces,
            dim=n,
            device=d,
            inputs=[x, v, goal_old, goal_new, self.goal_weight, params, gravity, dt(goal_time), inv_len],
            outputs=[buf.force, buf.dfdx_diag, buf.dfdv_diag],
        )
        if n_hinges:
            wp.launch(
                fk.hinge_forces,
                dim=n_hinges,
                device=d,
                inputs=[
                    x,
                    v,
                    self.hinge_vertices,
                    self.hinge_spring,
                    self.hinge_face_a,
                    self.hinge_face_b,
                    self.hinge_face_vertices,
                    self.hinge_rest_angle,
                    self.spring_rest_length,
                    params,
                ],
                outputs=[buf.hinge_force_a, buf.hinge_force_b, buf.hinge_force_edge],
            )
        angular = 1 if self.settings.bending_model == "ANGULAR" else 0
        wp.launch(
            fk.spring_forces,
            dim=n_springs,
            device=d,
            inputs=[
                x,
                v,
                self.spring_vertices,
                self.spring_kind,
                self.spring_rest_length,
                params,
                inv_len,
                angular,
            ],
            outputs=[buf.spring_force, buf.spring_dfdx, buf.spring_dfdv],
        )
        hh = dt(h)
        wp.launch(
            k_.assemble_vertices,
            dim=n,
            device=d,
            inputs=[
                v,
                buf.force,
                buf.dfdx_diag,
                buf.dfdv_diag,
                buf.hinge_force_a,
                buf.hinge_force_b,
                buf.hinge_force_edge,
                self.vertex_hinge_offsets,
                self.vertex_hinge_ids,
                self.vertex_hinge_roles,
                buf.spring_force,
                buf.spring_dfdx,
                buf.spring_dfdv,
                self.vertex_spring_offsets,
                self.vertex_spring_ids,
                self.vertex_spring_other,
                self.vertex_spring_sign,
                params,
                hh,
            ],
            outputs=[buf.system_diag, buf.rhs],
        )
        wp.launch(
            k_.assemble_springs,
            dim=n_springs,
            device=d,
            inputs=[buf.spring_dfdx, buf.spring_dfdv, hh],
            outputs=[buf.system_offdiag],
        )
        buf.active.zero_()
        wp.launch(
            k_.cg_init,
            dim=n,
            device=d,
            inputs=[buf.rhs, self.pinned],
            outputs=[buf.residual[0], buf.direction[0], buf.dv[0]],
        )
        chunks = buf.delta_partials.shape[1]
        wp.launch(
            k_.dot_partials,
            dim=chunks,
            device=d,
            inputs=[buf.residual[0], buf.residual[0], 0],
            outputs=[buf.delta_partials],
        )
        wp.launch(k_.dot_total, dim=1, device=d, inputs=[buf.delta_partials, 0], outputs=[buf.delta])
        if not in_graph:
            buf.frozen.fill_(frozen_count)
        wp.launch(k_.cg_start, dim=1, device=d, inputs=[buf.delta, buf.frozen], outputs=[buf.active])
        iterations = frozen_count if frozen_count >= 0 and not in_graph else CG_MAX_ITERATIONS
        ping_pong = buf.ping_pong
        tol = dt(CG_TOLERANCE)
        launched = 0
        for k in range(iterations):
            a = k % 2 if ping_pong else k
            b = (k + 1) % 2 if ping_pong else k + 1
            wp.launch(
                k_.matvec,
                dim=n,
                device=d,
                inputs=[
                    buf.system_diag,
                    buf.system_offdiag,
                    self.vertex_spring_offsets,
                    self.vertex_spring_ids,
                    self.vertex_spring_other,
                    buf.direction[a],
                    self.pinned,
                ],
                outputs=[buf.product[a]],
            )
            wp.launch(
                k_.dot_partials,
                dim=chunks,
                device=d,
                inputs=[buf.direction[a], buf.product[a], k],
                outputs=[buf.curvature_partials],
            )
            wp.launch(
                k_.dot_total, dim=1, device=d, inputs=[buf.curvature_partials, k], outputs=[buf.curvature]
            )
            wp.launch(
                k_.cg_update,
                dim=n,
                device=d,
                inputs=[
                    buf.dv[a],
                    buf.residual[a],
                    buf.direction[a],
                    buf.product[a],
                    buf.curvature,
                    buf.delta,
                    buf.active,
                    k,
                ],
                outputs=[buf.dv[b], buf.residual[b]],
            )
            wp.launch(
                k_.dot_partials,
                dim=chunks,
                device=d,
                inputs=[buf.residual[b], buf.residual[b], k + 1],
                outputs=[buf.delta_partials],
            )
            wp.launch(k_.dot_total, dim=1, device=d, inputs=[buf.delta_partials, k + 1], outputs=[buf.delta])
            wp.launch(
                k_.cg_direction,
                dim=n,
                device=d,
                inputs=[
                    buf.residual[b],
                    buf.direction[a],
                    buf.delta,
                    self.pinned,
                    k,
                    buf.frozen,
                    CG_MAX_ITERATIONS,
                    tol,
                    buf.active,
                ],
                outputs=[buf.direction[b]],
            )
            launched = k + 1
            if (
                frozen_count < 0
                and not in_graph
                and launched % check_every == 0
                and not int(buf.active.numpy()[launched])
            ):
                break
        final = launched % 2 if ping_pong else launched
        wp.launch(
            k_.finish_substep,
            dim=n,
            device=d,
            inputs=[x, v, buf.dv[final], self.pinned, goal_old, goal_new, dt(pin_time), hh],
            outputs=[x_out, v_out],
        )
        return launched

    # ---------------------------------------------------------------- rollout
    def goal_arrays(self, goals: np.ndarray | None, n_frames: int) -> list[wp.array]:
        """Per-frame pin goal positions (frames 0..n_frames after the start), on the device."""
        if goals is None:
            return [self.rest_positions] * (n_frames + 1)
        goals = np.asarray(goals, dtype=np.float64)
        if goals.shape[1:] != (self.vertex_count, 3) or len(goals) < n_frames + 1:
            raise ValueError(
                f"pin goals must have shape (>= {n_frames + 1}, {self.vertex_count}, 3), got {goals.shape}"
            )
        if not np.isfinite(goals).all():
            raise ValueError("pin goal positions contain NaN or infinite values")
        return [
            wp.array(g.astype(self._np_float), dtype=self.vec3, device=self.device)
            for g in goals[: n_frames + 1]
        ]

    def rollout(
        self,
        frame_end: int,
        output_frames: list[int] | None = None,
        goals: np.ndarray | None = None,
        x0: wp.array | None = None,
        v0: wp.array | None = None,
        frozen: np.ndarray | None = None,
        keep_states: bool | None = None,
        check_every: int | None = None,
    ) -> Rollout:
        """Simulate from ``start_frame`` to ``frame_end``; positions at ``output_frames``
        (default: every frame). ``goals[f - start_frame]`` are the pin goals (mesh input
        positions) of each frame; default the rest positions. Inside an active ``wp.Tape``
        the backward pass is recorded on it."""
        f0 = self.start_frame
        if frame_end < f0:
            raise ValueError(f"frame_end {frame_end} is before the start frame {f0}")
        frames = list(range(f0, frame_end + 1)) if output_frames is None else [int(f) for f in output_frames]
        bad = [f for f in frames if f < f0 or f > frame_end]
        if bad:
            raise ValueError(f"output frames {bad[:5]} are outside [{f0}, {frame_end}]")
        n_frames = frame_end - f0
        h, starts = substep_schedule(self.settings.quality, self.settings.time_scale)
        n_sub = len(starts)
        total = n_frames * n_sub
        d = self.device
        n = self.vertex_count
        goal = self.goal_arrays(goals, n_frames)
        if check_every is None:
            check_every = 1 if wp.get_device(d).is_cpu else 8

        with suspended_tape() as tape:
            if keep_states is None:
                keep_states = tape is not None
            x_init = self.rest_positions if x0 is None else x0
            v_init = wp.zeros(n, dtype=self.vec3, device=d) if v0 is None else v0
            positions = wp.zeros((len(frames), n), dtype=self.vec3, device=d, requires_grad=tape is not None)
            counts = wp.zeros(max(total, 1), dtype=wp.int32, device=d)
            if keep_states:
                state_x = wp.zeros((total + 1, n), dtype=self.vec3, device=d)
                state_v = wp.zeros((total + 1, n), dtype=self.vec3, device=d)
                wp.copy(state_x[0], x_init)
                wp.copy(state_v[0], v_init)
                states = None
            else:
                state_x = state_v = None
                states = [
                    (wp.clone(x_init), wp.clone(v_init)),
                    (wp.zeros(n, dtype=self.vec3, device=d), wp.zeros(n, dtype=self.vec3, device=d)),
                ]
            if self._forward_buffers is None:
                self._forward_buffers = self.make_buffers(2, requires_grad=False)
            buf = self._forward_buffers

            def write_output(frame: int, x_now: wp.array) -> None:
                for r, f in enumerate(frames):
                    if f == frame:
                        wp.copy(positions[r], x_now)

            write_output(f0, x_init)
            if self.use_graphs:
                self._run_graphs(
                    buf,
                    goal,
                    starts,
                    h,
                    n_frames,
                    x_init,
                    v_init,
                    frozen,
                    counts,
                    state_x,
                    state_v,
                    write_output,
                )
            else:
                s = 0
                for fi in range(n_frames):
                    for k, start in enumerate(starts):
                        if keep_states:
                            x, v, x_next, v_next = state_x[s], state_v[s], state_x[s + 1], state_v[s + 1]
                        else:
                            (x, v), (x_next, v_next) = states[s % 2], states[(s + 1) % 2]
                        frozen_count = -1 if frozen is None else int(frozen[s])
                        self.launch_substep(
                            buf,
                            self.params,
                            x,
                            v,
                            goal[fi],
                            goal[fi + 1],
                            k == 0,
                            *substep_times(start, h, self.settings.time_scale),
                            h,
                            x_next,
                            v_next,
                            frozen_count=frozen_count,
                            check_every=check_every,
                        )
                        wp.launch(
                            self.kernels.count_iterations,
                            dim=1,
                            device=d,
                            inputs=[buf.active, s],
                            outputs=[counts],
                        )
                        s += 1
                    write_output(f0 + fi + 1, x_next)
            result = Rollout(frames, positions, counts.numpy()[:total].copy(), n_sub, state_x, state_v)
            if tape is not None:
                from .adjoint import record_rollout_backward

                record_rollout_backward(tape, self, result, goal, starts, h, x0, v0)
        return result

    # ---------------------------------------------------------------- CUDA graphs
    @property
    def use_graphs(self) -> bool:
        """Each substep (forces, all CG iterations, update) runs as one captured graph:
        thousands of small launches per frame otherwise cost more than the work, on CUDA
        and on the CPU alike (measured 4x faster on a 10x10 sheet on the CPU, even though
        the graph always runs the 100 masked CG iterations). Set ``graphs_enabled`` to
        False to launch kernel by kernel with host convergence checks instead."""
        return self.graphs_enabled

    def make_buffers(self, cg_sets: int, requires_grad: bool) -> SubstepBuffers:
        top = self.topology
        return SubstepBuffers(
            self.vertex_count,
            len(top.spring_kind),
            len(top.hinge_spring),
            cg_sets,
            self.dtype,
            self.device,
            requires_grad,
        )

    def load_modules(self) -> None:
        """Compile/load every kernel module now: a graph capture must not load any."""
        for namespace in (self.kernels, self.kernels.forces):
            for kernel in vars(namespace).values():
                if isinstance(kernel, wp.Kernel):
                    wp.load_module(kernel.module, device=self.device)

    def _graph_set(self, buf: SubstepBuffers, starts: np.ndarray, h: float) -> SimpleNamespace:
        """One graph per substep index within a frame, reading and writing fixed buffers."""
        key = (tuple(starts.tolist()), h, self.settings.time_scale, tuple(self.settings.gravity), id(buf))
        if self._graphs is not None and self._graphs[0] == key:
            return self._graphs[1]
        d = self.device
        n = self.vertex_count

        def vec() -> wp.array:
            return wp.zeros(n, dtype=self.vec3, device=d)

        io = SimpleNamespace(
            x=vec(),
            v=vec(),
            x_next=vec(),
            v_next=vec(),
            goal_old=vec(),
            goal_new=vec(),
            count=wp.zeros(1, dtype=wp.int32, device=d),
            graphs=[],
        )
        self.load_modules()
        for k, start in enumerate(starts):
            with wp.ScopedCapture(device=d, force_module_load=False) as capture:
                self.launch_substep(
                    buf,
                    self.params,
                    io.x,
                    io.v,
                    io.goal_old,
                    io.goal_new,
                    k == 0,
                    *substep_times(start, h, self.settings.time_scale),
                    h,
                    io.x_next,
                    io.v_next,
                    in_graph=True,
                )
                wp.launch(
                    self.kernels.count_iterations, dim=1, device=d, inputs=[buf.active, 0], outputs=[io.count]
                )
            io.graphs.append(capture.graph)
        self._graphs = (key, io)
        return io

    def _run_graphs(
        self,
        buf,
        goal,
        starts,
        h,
        n_frames,
        x_init,
        v_init,
        frozen_iterations,
        counts,
        state_x,
        state_v,
        write_output,
    ) -> None:
        io = self._graph_set(buf, starts, h)
        d = self.device
        wp.copy(io.x, x_init)
        wp.copy(io.v, v_init)
        frozen = None
        if frozen_iterations is not None:
            frozen = wp.array(np.asarray(frozen_iterations, dtype=np.int32), dtype=wp.int32, device=d)
        else:
            buf.frozen.fill_(-1)
        s = 0
        for fi in range(n_frames):
            wp.copy(io.goal_old, goal[fi])
            wp.copy(io.goal_new, goal[fi + 1])
            for graph in io.graphs:
                if frozen is not None:
                    wp.copy(buf.frozen, frozen, src_offset=s, count=1)
                wp.capture_launch(graph)
                wp.copy(counts, io.count, dest_offset=s, count=1)
                wp.copy(io.x, io.x_next)
                wp.copy(io.v, io.v_next)
                if state_x is not None:
                    wp.copy(state_x[s + 1], io.x)
                    wp.copy(state_v[s + 1], io.v)
                s += 1
            write_output(self.start_frame + fi + 1, io.x)

    def simulate(
        self, frame_end: int, output_frames: list[int] | None = None, goals: np.ndarray | None = None
    ) -> np.ndarray:
        """Forward only: positions (frames, N, 3) as float64 numpy."""
        return self.rollout(frame_end, output_frames, goals, keep_states=False).numpy()
