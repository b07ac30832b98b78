"""``ClothSimulator``: Blender's cloth modifier on a mesh, as Warp arrays, with rollouts.

A rollout starts at the cache start frame from the mesh (or a given state) and runs one
step of ``quality`` substeps per frame. Inside ``with wp.Tape():`` it records its own
backward pass (``adjoint.py``): losses on the positions get exact gradients.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import warp as wp

from ...mesh import ClothMesh, max_edge_stretch
from ...tape import suspended_tape
from .adjoint import BackwardWorkspace, record_rollout_backward
from .arrays import ClothArrays
from .batch import batch_arrays, batch_width, batch_windows, rollout_batch
from .buffers import SubstepBuffers
from .graphs import SubstepGraphs
from .maps import checked_kinds, paint, vertex_gradients
from .params import ALL_PARAMETER_NAMES, COLLISION_FIELDS, ClothParams
from .schedule import CG_TOLERANCE, SubstepSchedule
from .self_collision import collision_stages
from .state import ClothState, RolloutOutputs, RolloutPlan
from .step import CGControl, SubstepSolver
from .topology import build_topology

DTYPES = {"float32": wp.float32, "float64": wp.float64}


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
        """Pass as ``rollout(frozen=...)`` to repeat this rollout's CG iteration counts at
        nearby parameter values (a tangent's rollouts), except where a count leaves the
        residual 10 times above Blender's tolerance (one iteration short can move a falling
        sheet by far more than a 1 % parameter change does): there it iterates on."""
        return -2 - np.asarray(self.cg_iterations, dtype=np.int32)

    @property
    def repeated(self) -> np.ndarray:
        """Every substep's count exactly, whatever the residual (the tape's slope)."""
        return np.asarray(self.cg_iterations, dtype=np.int32)

    def numpy(self) -> np.ndarray:
        return self.positions.numpy().astype(np.float64)


class ClothSimulator:
    """Blender's cloth model for one mesh on one Warp device: made by
    ``BlenderClothModel.build`` (or directly, by tests and benchmarks), driven by the fit
    engine through ``base.Simulator``.

    ``params`` is a Warp array of the continuous parameters in ``ALL_PARAMETER_NAMES`` order
    (requires_grad): read ``params.grad`` after ``tape.backward``. ``np_float`` is the
    numpy dtype matching ``dtype`` (what host values are cast to before an upload).
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
        self.topology = build_topology(
            mesh, params.bending_model, params.shrink_min, params.shrink_max, params.use_sewing_springs
        )
        volume = None
        if params.use_pressure:
            volume = params.target_volume if params.use_pressure_volume else 0.0
        self._use_arrays(
            ClothArrays.build(mesh, self.topology, self.dtype, self.device, volume, params.force_fields)
        )
        self._build_collisions()
        self.vec3 = self.kernels.forces.vec3
        self.np_float = np.float32 if precision == "float32" else np.float64
        self.params = wp.array(
            np.array([params.values()[k] for k in ALL_PARAMETER_NAMES], dtype=self.np_float),
            dtype=self.dtype,
            device=self.device,
            requires_grad=True,
        )
        self.graphs_enabled = True
        # the reverse pass a tape records (adjoint_stable.py): "exact" (every CG iteration
        # differentiated), "implicit" (each solve differentiated as if exact) or "stable"
        # (the exact one, the implicit one where the exact one explodes)
        self.gradient = "exact"
        # Blender's CG tolerance; a smaller one (kernel by kernel) only to check the implicit
        # gradient against an exact solve's
        self.cg_tolerance = CG_TOLERANCE

    def _use_arrays(self, arrays: ClothArrays, dot_mode: str | None = None) -> None:
        """Run on ``arrays``: a solver, graphs and work buffers of their own (a batch shares
        nothing of these with the simulator it copies)."""
        self.arrays = arrays
        self.solver = SubstepSolver(arrays)
        if dot_mode is not None:
            self.solver.dot_mode = dot_mode
        self.kernels = self.solver.kernels
        self._forward_buffers: SubstepBuffers | None = None
        self._graphs = SubstepGraphs(self.solver)
        # what the last backward pass worked in, kept for the next (adjoint.py reads and writes it)
        self.backward_workspace: BackwardWorkspace | None = None
        self._batch: ClothSimulator | None = None  # the last one ``batched`` made

    # ---------------------------------------------------------------- mesh arrays
    @property
    def vertex_count(self) -> int:
        return self.arrays.vertex_count

    @property
    def rest_positions(self) -> wp.array:
        return self.arrays.rest_positions

    @property
    def avg_spring_length(self) -> float:
        return self.arrays.avg_spring_length

    def _build_collisions(self) -> None:
        """The collision stages of the current settings: colliders, self collisions (or none)."""
        stages = collision_stages(self.mesh, self.settings, self.topology, self.dtype, self.device)
        self.solver.collisions, self.solver.self_collisions = stages

    @property
    def has_collisions(self) -> bool:
        return self.solver.collisions is not None

    # ---------------------------------------------------------------- parameters
    def set_params(self, values: ClothParams | dict[str, float]) -> None:
        """Set parameters: a ClothParams (quality, time scale and gravity too), or a dict of
        some continuous parameters."""
        if isinstance(values, ClothParams):
            values.validate()
            if values.bending_model != self.settings.bending_model:
                raise ValueError("bending_model changes the springs: build a new ClothSimulator")
            if (values.shrink_min, values.shrink_max) != (self.settings.shrink_min, self.settings.shrink_max):
                raise ValueError("shrinking changes the rest lengths: build a new ClothSimulator")
            old, self.settings = self.settings, values
            # the collision stage holds its colliders' arrays and these settings' values
            same_stage = values.colliders is old.colliders and all(
                getattr(values, k) == getattr(old, k) for k in (*COLLISION_FIELDS[1:], "time_scale")
            )
            if not same_stage:
                self._build_collisions()
            values = values.values()
        self.settings, row = self.settings.with_parameters(values)
        self.params.assign(np.array(row, dtype=self.np_float))

    @functools.cached_property
    def _structural_rest(self) -> tuple[np.ndarray, np.ndarray]:
        """Structural springs and their rest lengths: fixed for the mesh, read once."""
        top = self.topology
        edges = top.spring_vertices[top.spring_kind == 0]
        v0 = self.mesh.vertices
        return edges, np.linalg.norm(v0[edges[:, 1]] - v0[edges[:, 0]], axis=1)

    def max_stretch(self, positions: np.ndarray) -> float:
        """Largest structural spring length over its rest length in ``positions`` (frames, N, 3)."""
        return max_edge_stretch(positions, *self._structural_rest)

    def param_values(self) -> dict[str, float]:
        return dict(zip(ALL_PARAMETER_NAMES, self.params.numpy().astype(float), strict=True))

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
            wp.array(g.astype(self.np_float), dtype=self.vec3, device=self.device)
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
        the backward pass is recorded on it. ``frozen`` gives each substep's CG iterations:
        ``n >= 0`` exactly n, ``-2 - n`` n and more only while far from converged (a
        rollout's ``frozen``), -1 Blender's test; ``keep_states`` (default: inside a tape) keeps the state
        at every substep start; on the kernel-by-kernel path the host checks CG convergence
        every ``check_every`` iterations (default 1 on the CPU, 8 elsewhere)."""
        f0 = self.start_frame
        if frame_end < f0:
            raise ValueError(f"frame_end {frame_end} is before the start frame {f0}")
        frames = list(range(f0, frame_end + 1)) if output_frames is None else [int(f) for f in output_frames]
        bad = [f for f in frames if f < f0 or f > frame_end]
        if bad:
            raise ValueError(f"output frames {bad[:5]} are outside [{f0}, {frame_end}]")
        n_frames = frame_end - f0
        schedule = SubstepSchedule.for_settings(self.settings.quality, self.settings.time_scale)
        total = n_frames * len(schedule)
        d = self.device
        n = self.vertex_count
        plan = RolloutPlan(self.goal_arrays(goals, n_frames), schedule, n_frames, f0, frozen)
        if check_every is None:
            check_every = 1 if wp.get_device(d).is_cpu else 8

        with suspended_tape() as tape:
            if tape is not None and self.tape_gradient_refusal():
                raise ValueError(
                    f"{self.tape_gradient_refusal()}: fit a cloth with collisions by "
                    "Levenberg-Marquardt (finite-difference tangents), not Adam"
                )
            if keep_states is None:
                keep_states = tape is not None
            x_init = self.rest_positions if x0 is None else x0
            v_init = wp.zeros(n, dtype=self.vec3, device=d) if v0 is None else v0
            positions = wp.zeros((len(frames), n), dtype=self.vec3, device=d, requires_grad=tape is not None)
            members = self.arrays.members
            counts = wp.zeros(max(total, 1) * members, dtype=wp.int32, device=d)
            state_x = state_v = None
            if keep_states:
                state_x = wp.zeros((total + 1, n), dtype=self.vec3, device=d)
                state_v = wp.zeros((total + 1, n), dtype=self.vec3, device=d)
                wp.copy(state_x[0], x_init)
                wp.copy(state_v[0], v_init)
            outputs = RolloutOutputs(frames, positions, counts, state_x, state_v)
            if self._forward_buffers is None:
                self._forward_buffers = self.make_buffers(2, requires_grad=False)
            buf = self._forward_buffers

            initial = ClothState(x_init, v_init)
            self._run(buf, plan, initial, outputs, check_every)
            result = Rollout(
                frames, positions, counts.numpy()[: total * members].copy(), len(schedule), state_x, state_v
            )
            if self.has_collisions:
                result.extras["contacts"] = self.solver.collisions.contact_report()
            if tape is not None:
                record_rollout_backward(tape, self, result, plan, x0, v0)
        return result

    def _run(
        self,
        buf: SubstepBuffers,
        plan: RolloutPlan,
        initial: ClothState,
        outputs: RolloutOutputs,
        check_every: int,
    ) -> None:
        """Every substep of ``plan``; with collisions, again with more room for candidate
        pairs while a cloth triangle met more triangles than there was room for."""
        stages = [st for st in (self.solver.collisions, self.solver.self_collisions) if st is not None]
        while True:
            for stage in stages:
                stage.start_rollout()
            outputs.write_positions(plan.start_frame, initial.x)
            if self.use_graphs:
                self._graphs.run(self.settings, buf, self.params, plan, initial, outputs, self.frame_rest)
            else:
                cg = CGControl(check_every=check_every, tolerance=self.cg_tolerance)
                self.solver.run(self.settings, buf, self.params, plan, initial, outputs, self.frame_rest, cg)
            grown = [stage for stage in stages if stage.overflowed()]
            if not grown:
                return
            for stage in grown:
                stage.set_slots(2 * stage.slots)

    def frame_rest(self, plan: RolloutPlan, fi: int) -> None:
        """Before the substeps of frame ``fi`` of ``plan``: with a dynamic mesh, the rest
        shape is the input mesh of the frame being stepped to (Blender's cloth_update_verts
        and cloth_update_spring_lengths); otherwise it stays the start frame's."""
        if self.settings.use_dynamic_mesh:
            self.solver.arrays.update_rest(plan.goals[fi + 1])
        if self.solver.collisions is not None:
            self.solver.collisions.load_frame(fi)

    # ---------------------------------------------------------------- captured graphs
    @property
    def use_graphs(self) -> bool:
        """Each substep (forces, the CG iterations, update) runs as one captured graph:
        thousands of small launches per frame otherwise cost more than the work, on CUDA
        and on the CPU alike (measured 4x faster on a 10x10 sheet on the CPU when the graph
        still ran all 100 CG iterations masked; it now stops at the first block boundary
        past convergence, ``schedule.CG_BLOCK_BOUNDS``). Set ``graphs_enabled`` to False to
        launch kernel by kernel with host convergence checks instead (as a CG tolerance other
        than Blender's does)."""
        return self.graphs_enabled and self.cg_tolerance == CG_TOLERANCE

    def make_buffers(self, cg_sets: int, requires_grad: bool) -> SubstepBuffers:
        return self.solver.make_buffers(cg_sets, requires_grad)

    def load_modules(self) -> None:
        """Compile/load every kernel module now: a graph capture must not load any."""
        self.solver.load_modules()

    # forward batches of parameter sets (batch.py): ``rollout_batch(param_sets, frame_end,
    # output_frames, goals, frozen)`` -> positions (B, frames, N, 3), each member its single
    # rollout bit for bit; ``batch_width(rollouts)`` members per batch (0: not batchable);
    # ``batch_windows(starts)`` members from their own starts, run on window by window
    rollout_batch = rollout_batch
    batch_width = batch_width
    batch_windows = batch_windows

    def batched(self, members: int) -> ClothSimulator:
        """The simulator ``rollout_batch`` runs: ``members`` copies of this mesh one after
        the other in every array (``batch.batch_arrays``), this dot order, one parameter row
        per member in ``params`` (no gradient). The last one made is returned again while
        its member count and dot order match; the caller sets its settings and rows."""
        kept = self._batch
        if kept is None or kept.arrays.members != members or kept.solver.dot_mode != self.solver.dot_mode:
            kept = copy.copy(self)
            kept._use_arrays(batch_arrays(self.arrays, members), self.solver.dot_mode)
            kept.params = wp.zeros(members * len(ALL_PARAMETER_NAMES), dtype=self.dtype, device=self.device)
            self._batch = kept
        return kept

    # ---------------------------------------------------------------- what a fit asks (base.Simulator)
    # every simulator keeps its own buffers, graphs and collision stage, and Warp's CPU
    # kernels run without Python's lock: simulators of one problem run side by side
    parallel_rollouts = True
    stream_rollouts = False  # on CUDA it runs batches (``batch``); streams were not measured

    def tape_gradient_refusal(self) -> str | None:
        """Why a rollout inside a ``wp.Tape`` records no gradient (None: it does)."""
        if self.settings.colliders:
            return "object collisions have no tape gradient"
        return "self collisions have no tape gradient" if self.settings.use_self_collision else None

    @property
    def contact_probe(self) -> bool:
        """With collision objects or self collisions, contacts may decide the motion
        (``rollout_shifted``)."""
        return bool(self.settings.colliders) or self.settings.use_self_collision

    recorded_maps: tuple[str, ...] = ()  # the weight maps (maps.py) a rollout on a tape records

    def record_maps(self, kinds: Sequence[str]) -> None:
        """Rollouts on a tape record the gradient of these weight maps from now on."""
        self.recorded_maps = checked_kinds(kinds, self.settings)

    def map_gradients(self) -> dict[str, np.ndarray]:
        """kind -> d loss / d weight per vertex (N,), from the last backward pass (maps.py)."""
        ws = self.backward_workspace
        return vertex_gradients(self, None if ws is None else ws.maps)

    def set_maps(self, maps: Mapping[str, np.ndarray]) -> None:
        """New weights for some stiffness maps, kind -> (N,) in [0, 1]."""
        self.mesh, self.topology = paint(self.mesh, self.topology, self.arrays, maps)
        self._batch = None  # it holds the old weights

    def rollout_shifted(
        self, shift_m: np.ndarray, frame_end: int, output_frames: list[int], goals: np.ndarray | None
    ) -> Rollout:
        """A forward rollout from the rest positions moved by ``shift_m`` (3,) metres."""
        start = self.rest_positions.numpy().astype(np.float64) + np.asarray(shift_m, dtype=np.float64)
        x0 = wp.array(start, dtype=self.vec3, device=self.device)
        return self.rollout(frame_end, output_frames, goals, x0=x0)

    def simulate(
        self, frame_end: int, output_frames: list[int] | None = None, goals: np.ndarray | None = None
    ) -> np.ndarray:
        """Forward only: positions (frames, N, 3) as float64 numpy."""
        return self.rollout(frame_end, output_frames, goals, keep_states=False).numpy()
