"""``SoftBodySimulator``: a mesh embedded in a tetrahedral lattice, simulated as a stable
Neo-Hookean soft body by Newton's VBD solver, with rollouts of the embedded mesh.

Time: a frame is ``substeps`` VBD steps of ``dt = 1 / (fps * substeps)``; frame ``f``
runs the substeps from ``f - 1`` to ``f``. The state at ``start_frame`` is the rest state
(the lattice at rest, velocity 0).

Pins: the mesh vertices whose pin weight exceeds ``pin_threshold`` are pinned, and so is
every lattice node that carries one of them (barycentric weight above 1e-9): those nodes
are kinematic (mass and inverse mass 0, which Newton's VBD leaves where they are put).
Each frame, the least-squares affine map from the pinned vertices' rest positions to their
goals (``goals[f - start_frame]``, the input mesh of that frame; the rest shape without
goals) is fitted, falling back to the best rigid motion when they do not span 3D (fewer
than four non-coplanar vertices), and moves the pinned nodes. Before every substep the
pinned nodes are put where the map, interpolated linearly between the frame's ends, takes
them at the end of that substep, with the frame's goal velocity, so the implicit solve
sees them where they will be.

Colliders and ground: see :mod:`.scene`. A moving collider's body is placed before every
substep at its object's transform interpolated between the frame's ends (translation
linearly, rotation along the short arc).

Precision: Newton's VBD is float32; far from the origin a step's small increments are
lost (a slow motion stalls once g dt^2 nears a unit in the last place), so the body is
simulated relative to its lattice's centre, the ground, colliders and goals moved with it.

Determinism: two rollouts with the same inputs are bit-identical; the fit's finite
differences rely on it. On CUDA Newton runs in its run-to-run deterministic mode (contacts
gathered per particle, no atomics); on the CPU, whose kernels run their threads in turn,
without it (``scene.newton_determinism``). Each frame's substeps run as one captured graph (frame data
copied into fixed buffers first), the first frame's too (launched kernel by kernel it took
0.37 s of a 47k-tet body's first rollout on an H100, for the same bits); on the CPU too, where
a substep's ~140 launches cost more than their work on a small body (a 162-tet cube: 1.52 s
a rollout, 0.18 s captured).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import warp as wp

from ...capture import graph_capture
from ...mesh import ClothMesh, max_edge_stretch, rest_edges
from ...tape import suspended_tape
from .adjoint import contact_refusal, record_on_tape
from .kernels import embed_vertices, nodes_to_world, set_body_poses, set_pinned_nodes
from .lattice import Lattice, build_lattice
from .materials import MAP_FIELDS, MaterialMaps
from .motion import checked_goals, pinned_node_goals
from .params import GRADIENT_KIND, PARAMETER_NAMES, SoftBodyParams
from .recording import StepHistory
from .scene import (
    NewtonScene,
    build_scene,
    contact_stiffness,
    set_contact_stiffness,
    set_density,
    set_material,
)
from .tangent import ForwardTangents
from .unbatched import Unbatched

__all__ = ["PIN_NODE_WEIGHT", "SoftBodyRollout", "SoftBodySimulator"]

FLOAT32_ONLY = "the soft-body model runs in float32 only (Newton's VBD)"
# a lattice node carries a pinned vertex when its barycentric weight exceeds this
PIN_NODE_WEIGHT = 1e-9


@dataclass
class SoftBodyRollout:
    """Embedded mesh positions at the requested frames, shape (frames, N) of vec3; with
    ``keep_nodes``, the lattice nodes' positions and velocities at those frames (frames, M).
    Made by ``SoftBodySimulator.rollout``, read by the fit (``base.ModelRollout``)."""

    frames: list[int]
    positions: wp.array
    node_positions: wp.array | None = None
    node_velocities: wp.array | None = None
    extras: dict = field(default_factory=dict)  # "gradient_residual" after a backward pass

    @property
    def frozen(self) -> None:
        """Nothing discrete to repeat: VBD runs a fixed number of iterations."""
        return None

    repeated = frozen

    def numpy(self) -> np.ndarray:
        return self.positions.numpy().astype(np.float64)


class SoftBodySimulator(Unbatched, ForwardTangents):
    """The ``soft_body`` model for one mesh on one Warp device (float32 only): made by
    ``SoftBodyModel.build``, driven by the fit engine through ``base.Simulator``.

    ``params``: a float32 Warp array of the parameters in ``PARAMETER_NAMES`` order. Their
    gradient is the adjoint's (``adjoint``), their forward tangents ``tangent``'s."""

    # each keeps its own Newton model, solver and states: a Jacobian's rollouts side by side
    # are the ones made in turn, bit for bit (a 2,400-tet slab's fit on 2 cores: 54 s -> 35 s)
    parallel_rollouts = True
    # on CUDA a rollout waits on nothing until its positions are read (``rollout_pool``)
    stream_rollouts = True
    # the start-gap probe was measured against Blender cloth's collision response only
    contact_probe = False

    def __init__(
        self,
        mesh: ClothMesh,
        params: SoftBodyParams | None = None,
        device: str = "cpu",
        precision: str = "float32",
        start_frame: int = 1,
    ) -> None:
        params = params or SoftBodyParams()
        params.validate()
        if precision != "float32":
            other = f"precision must be 'float32' ({FLOAT32_ONLY}), got {precision!r}"
            raise ValueError(FLOAT32_ONLY if precision == "float64" else other)
        self.mesh = mesh
        self.settings = params
        self.device = str(wp.get_device(device))
        self.dtype = wp.float32
        self.vec3 = wp.vec3
        self.start_frame = int(start_frame)
        self.lattice: Lattice = build_lattice(mesh.vertices, mesh.triangles(), params.lattice_cells)
        lat = self.lattice
        self.pinned_vertices = np.flatnonzero(mesh.pin_weights > params.pin_threshold)
        self.pinned_nodes = np.zeros(len(lat.nodes), dtype=bool)
        carried = lat.vertex_weights[self.pinned_vertices] > PIN_NODE_WEIGHT
        self.pinned_nodes[lat.vertex_nodes[self.pinned_vertices][carried]] = True
        self._pinned_index = np.flatnonzero(self.pinned_nodes)
        self.origin = 0.5 * (lat.nodes.min(axis=0) + lat.nodes.max(axis=0))
        self._origin = wp.vec3(*self.origin.astype(np.float32))
        self.scene: NewtonScene = build_scene(lat, params, self.pinned_nodes, self.device, self.origin)
        self._control = self.scene.model.control()
        self.materials = MaterialMaps(mesh.vertices, lat.nodes[lat.tets].mean(axis=1))
        painted = {kind: getattr(mesh, name) for kind, name in MAP_FIELDS.items()}
        self.materials.paint({kind: w for kind, w in painted.items() if w is not None})

        d = self.device
        self.params = wp.array(self._values(params), dtype=wp.float32, device=d, requires_grad=True)
        self._vertex_nodes = wp.array(lat.vertex_nodes, dtype=wp.int32, device=d)
        self._vertex_weights = wp.array(lat.vertex_weights.astype(np.float32), dtype=wp.float32, device=d)
        self._rest_q = wp.array((lat.nodes - self.origin).astype(np.float32), dtype=wp.vec3, device=d)
        n_pins = len(self._pinned_index)
        self._pins = wp.array(self._pinned_index.astype(np.int32), dtype=wp.int32, device=d)
        self._goal_start, self._goal_end = (wp.zeros(n_pins, dtype=wp.vec3, device=d) for _ in range(2))
        n_bodies = len(self.scene.moving)
        self._pose_start = wp.zeros(n_bodies, dtype=wp.transform, device=d)
        self._pose_end = wp.zeros(n_bodies, dtype=wp.transform, device=d)
        self._goal_frames: wp.array | None = None
        self._pose_frames: wp.array | None = None
        self.graphs_enabled = True
        self.gradient = GRADIENT_KIND  # the kind a rollout on a tape records (the only one)
        # the adjoint's device recorder while a recorded rollout runs; the last one (``recording``)
        self.step_recorder: StepHistory | None = None
        self.step_history: StepHistory | None = None
        self._graphs: dict[int, object] = {}
        self._set_material(params)  # with the painted maps
        self._edges, self._rest_lengths = rest_edges(mesh)

    # ---------------------------------------------------------------- sizes
    @property
    def vertex_count(self) -> int:
        return self.mesh.vertex_count

    @property
    def node_count(self) -> int:
        return len(self.lattice.nodes)

    @property
    def tet_count(self) -> int:
        return len(self.lattice.tets)

    @property
    def worst_quality(self) -> float:
        return self.lattice.worst_quality

    # ---------------------------------------------------------------- parameters
    @staticmethod
    def _values(settings: SoftBodyParams) -> np.ndarray:
        v = settings.values()
        return np.array([v[k] for k in PARAMETER_NAMES], dtype=np.float32)

    def param_values(self) -> dict[str, float]:
        return self.settings.values()

    def set_params(self, values: dict[str, float]) -> None:
        """Set some of the continuous parameters; the lattice and the Newton model stay,
        the tets' materials and the nodes' masses change in place."""
        unknown = set(values) - set(PARAMETER_NAMES)
        if unknown:
            raise ValueError(f"unknown soft-body parameter(s): {', '.join(sorted(unknown))}")
        settings = self.settings.replace(**{k: float(v) for k, v in values.items()})
        settings.validate()
        old = self.settings
        material = ("young_modulus", "poisson_ratio", "damping", "young_modulus_max", "damping_max")
        if any(getattr(settings, n) != getattr(old, n) for n in material):
            self._set_material(settings)
        if settings.density != old.density:
            set_density(self.scene, float(settings.density), self.pinned_nodes)
        self.settings = settings
        self.params.assign(self._values(settings))

    def _set_material(self, settings: SoftBodyParams) -> None:
        """Every tet's material and the contact stiffness at ``settings`` and the maps."""
        set_material(self.scene, self.materials.materials(settings))
        stiffness = contact_stiffness(self.materials.mean_young_modulus(settings), self.lattice.cell_size)
        if stiffness != self.scene.contact_stiffness:
            set_contact_stiffness(self.scene, stiffness)  # the captured graphs read it

    # ---------------------------------------------------------------- material maps
    def record_maps(self, kinds: Sequence[str]) -> None:
        """A backward pass reports the gradient of these maps' weights from now on."""
        self.materials.record(tuple(kinds))

    def map_gradients(self) -> dict[str, np.ndarray]:
        """kind -> d loss / d weight per mesh vertex (N,) of the last backward pass."""
        return dict(self.materials.gradients)

    def set_maps(self, maps: Mapping[str, np.ndarray]) -> None:
        """New weights of some material maps (kind -> (N,) in [0, 1], ``materials``)."""
        self.materials.paint(maps)
        self._set_material(self.settings)

    # ---------------------------------------------------------------- diagnostics
    def max_stretch(self, positions: np.ndarray) -> float:
        """Largest mesh edge length over its rest length in ``positions`` (frames, N, 3)."""
        return max_edge_stretch(positions, self._edges, self._rest_lengths)

    # ---------------------------------------------------------------- what a fit asks
    def tape_gradient_refusal(self) -> str | None:
        """Why a rollout on a tape has no gradient (contacts, see ``adjoint``), or None."""
        return contact_refusal(self)

    # ---------------------------------------------------------------- rollout
    def _load_goals(self, goals: np.ndarray | None, n_frames: int) -> None:
        """Upload the pinned nodes' positions and the collider poses of every frame."""
        d = self.device
        self._goal_frames = self._pose_frames = None
        if goals is not None:
            goals = checked_goals(goals, n_frames, self.vertex_count)
        if len(self._pinned_index):
            pv = self.pinned_vertices
            track = pinned_node_goals(
                self.mesh.vertices[pv],
                self.lattice.nodes[self._pinned_index],
                None if goals is None else goals[: n_frames + 1, pv],
                n_frames,
            )
            self._goal_frames = wp.array((track - self.origin).astype(np.float32), dtype=wp.vec3, device=d)
        poses = self.scene.body_poses(n_frames)
        if poses is not None:
            self._pose_frames = wp.array(poses.astype(np.float32), dtype=wp.transform, device=d)

    def _reset(self) -> None:
        for state in self.scene.states:
            wp.copy(state.particle_q, self._rest_q)
            state.particle_qd.zero_()
            if self._pose_frames is not None:
                wp.copy(state.body_q, self._pose_frames[0])
                state.body_qd.zero_()

    def rollout(
        self,
        frame_end: int,
        output_frames: list[int] | None = None,
        goals: np.ndarray | None = None,
        frozen: object = None,
        keep_nodes: bool = False,
    ) -> SoftBodyRollout:
        """Simulate from ``start_frame`` to ``frame_end``; the embedded mesh at
        ``output_frames`` (default: every frame). ``goals[f - start_frame]`` are the input
        mesh's positions at frame ``f`` (the pins' goals); ``frozen`` is ignored (nothing
        to freeze). ``keep_nodes`` also keeps the lattice nodes' positions and velocities.
        Inside a ``wp.Tape`` it records its adjoint there (``adjoint.record_on_tape``)."""
        run = lambda: self._rollout(frame_end, output_frames, goals, keep_nodes)  # noqa: E731
        with suspended_tape() as tape:
            if tape is not None:
                return record_on_tape(self, tape, frame_end, run)
            return run() if keep_nodes else self.kept_if_asked(frame_end, output_frames, goals, run)

    def _rollout(
        self, frame_end: int, output_frames: list[int] | None, goals: np.ndarray | None, keep_nodes: bool
    ) -> SoftBodyRollout:
        f0 = self.start_frame
        if frame_end < f0:
            raise ValueError(f"frame_end {frame_end} is before the start frame {f0}")
        frames = list(range(f0, frame_end + 1)) if output_frames is None else [int(f) for f in output_frames]
        bad = [f for f in frames if f < f0 or f > frame_end]
        if bad:
            raise ValueError(f"output frames {bad[:5]} are outside [{f0}, {frame_end}]")
        n_frames = frame_end - f0
        self._load_goals(goals, n_frames)
        self._reset()
        d = self.device
        recorder = self.step_recorder
        taped = recorder is not None  # the positions get a gradient array
        positions = wp.zeros((len(frames), self.vertex_count), dtype=wp.vec3, device=d, requires_grad=taped)
        result = SoftBodyRollout(frames, positions)
        if keep_nodes:
            result.node_positions = wp.zeros((len(frames), self.node_count), dtype=wp.vec3, device=d)
            result.node_velocities = wp.zeros((len(frames), self.node_count), dtype=wp.vec3, device=d)
        rows: dict[int, list[int]] = {}
        for row, f in enumerate(frames):
            rows.setdefault(f, []).append(row)
        parity = 0
        self._write(result, rows.get(f0, []), parity)
        steps = int(self.settings.substeps)
        for fi in range(n_frames):
            self._run_frame(fi, parity)
            parity = (parity + steps) % 2
            self._write(result, rows.get(f0 + fi + 1, []), parity)
        if recorder is not None:
            recorder.last(self.scene.states[parity])
        return result

    def _write(self, result: SoftBodyRollout, rows: list[int], parity: int) -> None:
        state = self.scene.states[parity]
        for row in rows:
            wp.launch(
                embed_vertices,
                dim=self.vertex_count,
                inputs=[self._vertex_nodes, self._vertex_weights, state.particle_q, self._origin],
                outputs=[result.positions, row],
                device=self.device,
            )
            if result.node_positions is not None:
                wp.launch(
                    nodes_to_world,
                    dim=self.node_count,
                    inputs=[state.particle_q, self._origin],
                    outputs=[result.node_positions, row],
                    device=self.device,
                )
                wp.copy(result.node_velocities[row], state.particle_qd)

    def _run_frame(self, fi: int, parity: int) -> None:
        if self._goal_frames is not None:
            wp.copy(self._goal_start, self._goal_frames[fi])
            wp.copy(self._goal_end, self._goal_frames[fi + 1])
        if self._pose_frames is not None:
            wp.copy(self._pose_start, self._pose_frames[fi])
            wp.copy(self._pose_end, self._pose_frames[fi + 1])
        if not self.use_graphs:
            self._substeps(parity)
            return
        # a recorded rollout's graphs also write its recorder's arrays: the recorder keeps them
        graphs = self._graphs if self.step_recorder is None else self.step_recorder.graphs
        graph = graphs.get(parity)
        if graph is None:
            with graph_capture(self.device) as capture:
                self._substeps(parity)
            graph = graphs[parity] = capture.graph
        wp.capture_launch(graph)

    @property
    def use_graphs(self) -> bool:
        """Capture each frame's substeps as a graph (set ``graphs_enabled`` to False to
        launch them one by one)."""
        return self.graphs_enabled

    def _substeps(self, parity: int) -> None:
        scene = self.scene
        steps = int(self.settings.substeps)
        dt = 1.0 / (float(self.settings.fps) * steps)
        fps = float(self.settings.fps)
        d = self.device
        for k in range(steps):
            state_in = scene.states[(parity + k) % 2]
            state_out = scene.states[(parity + k + 1) % 2]
            alpha = (k + 1) / steps
            if len(self._pinned_index):
                wp.launch(
                    set_pinned_nodes,
                    dim=len(self._pinned_index),
                    inputs=[self._pins, self._goal_start, self._goal_end, alpha, fps],
                    outputs=[state_in.particle_q, state_in.particle_qd],
                    device=d,
                )
            if self._pose_frames is not None:
                wp.launch(
                    set_body_poses,
                    dim=len(scene.moving),
                    inputs=[self._pose_start, self._pose_end, alpha],
                    outputs=[state_out.body_q],
                    device=d,
                )
            if scene.pipeline is not None:
                scene.pipeline.collide(state_in, scene.contacts)
            if self.step_recorder is not None:
                self.step_recorder.before_step(state_in, state_out)
            scene.solver.step(state_in, state_out, self._control, scene.contacts, dt)
            if self.step_recorder is not None:
                self.step_recorder.after_step()
