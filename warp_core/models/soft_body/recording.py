"""What a rollout to be differentiated records of each substep (``adjoint``): its start
positions and velocities, its contacts with the ground and the colliders, the contacts'
materials the solver used, and the bodies' poses at the substep's ends.

The records are written on the device by kernels the simulator launches around each
substep (:class:`StepHistory`), indexed by a step counter that lives on the device, so a
recorded rollout replays as captured graphs like any other and reads nothing back until it
ends; then :meth:`StepHistory.read` turns the whole history into host arrays at once
(:class:`Recording`), placing each contact in the simulation frame, or
:meth:`StepHistory.read_on_device` keeps a copy of it on the device
(:class:`DeviceRecording`, for ``adjoint_device``, which places the contacts itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import warp as wp

__all__ = ["DeviceRecording", "Recording", "StepContacts", "StepHistory"]


@dataclass
class StepContacts:
    """The contacts of one substep as the solver used them: made by
    :meth:`StepHistory.read`, read by ``adjoint_step.StepOperator``."""

    particles: np.ndarray  # (C,) int: the node of each contact
    shapes: np.ndarray  # (C,) int
    # a point of the contact plane at the substep's end and its velocity over the substep, in
    # the simulation frame: where the ground or a collider's body (at its end pose) puts it
    body_pos: np.ndarray  # (C, 3)
    body_vel: np.ndarray  # (C, 3)
    normals: np.ndarray  # (C, 3)
    ke: np.ndarray  # (C,) penalty stiffness, damping and friction the solver used
    kd: np.ndarray
    mu: np.ndarray


@dataclass
class Recording:
    """A recorded rollout on the host: made by :meth:`StepHistory.read`, read by
    ``adjoint.backward``. ``x[n]``, ``v[n]``: the start of substep n (pins placed), and
    ``x[-1]`` the state the last substep left; ``contacts[n]``: substep n's (None without a
    collision stage)."""

    x: list[np.ndarray]
    v: list[np.ndarray]
    contacts: list[StepContacts | None]


@dataclass
class DeviceRecording:
    """A recorded rollout left on its device, as the simulator's kernels wrote it (float32,
    contacts in their bodies' frames): made by :meth:`StepHistory.read_on_device`, read by
    ``adjoint_device``, whose kernels place each substep's contacts as :meth:`StepHistory.read`
    does. Rows as :class:`Recording`'s; every contact array is (substeps, capacity), its
    first ``counts[n]`` entries substep n's. A copy: a later recorded rollout leaves it as it is."""

    substeps: int
    xs: wp.array  # (substeps + 1, nodes) vec3
    vs: wp.array
    capacity: int  # contact records a substep can hold (0: no collision stage)
    counts: wp.array  # (substeps,) int
    indices: wp.array  # vec3i: the node, and -1, -1 (node contacts only)
    shapes: wp.array
    body_pos: wp.array  # in the body's frame, as the collision stage found it
    body_vel: wp.array
    normals: wp.array
    materials: wp.array  # (substeps, capacity, 3): ke, kd, mu
    pose_starts: wp.array  # (substeps, bodies) transforms at each substep's start
    pose_ends: wp.array
    shape_body: wp.array  # the model's, not copied: each shape's body (-1: the ground)


@wp.kernel
def _flag_face_contacts(
    counts: wp.array(dtype=int), indices: wp.array2d(dtype=wp.vec3i), flag: wp.array(dtype=int)
):
    n, c = wp.tid()
    if c < counts[n]:
        if indices[n, c][1] >= 0 or indices[n, c][2] >= 0:
            flag[0] = 1


@wp.kernel
def _record_nodes(
    step: wp.array(dtype=int),
    q: wp.array(dtype=wp.vec3),
    qd: wp.array(dtype=wp.vec3),
    xs: wp.array2d(dtype=wp.vec3),
    vs: wp.array2d(dtype=wp.vec3),
):
    i = wp.tid()
    xs[step[0], i] = q[i]
    vs[step[0], i] = qd[i]


@wp.kernel
def _record_contacts(
    step: wp.array(dtype=int),
    count: wp.array(dtype=int),
    indices: wp.array(dtype=wp.vec3i),
    shapes: wp.array(dtype=int),
    body_pos: wp.array(dtype=wp.vec3),
    body_vel: wp.array(dtype=wp.vec3),
    normals: wp.array(dtype=wp.vec3),
    counts: wp.array(dtype=int),
    indices_out: wp.array2d(dtype=wp.vec3i),
    shapes_out: wp.array2d(dtype=int),
    body_pos_out: wp.array2d(dtype=wp.vec3),
    body_vel_out: wp.array2d(dtype=wp.vec3),
    normals_out: wp.array2d(dtype=wp.vec3),
):
    c = wp.tid()
    n = step[0]
    if c == 0:
        counts[n] = count[0]
    indices_out[n, c] = indices[c]
    shapes_out[n, c] = shapes[c]
    body_pos_out[n, c] = body_pos[c]
    body_vel_out[n, c] = body_vel[c]
    normals_out[n, c] = normals[c]


@wp.kernel
def _record_contact_materials(
    step: wp.array(dtype=int),
    ke: wp.array(dtype=float),
    kd: wp.array(dtype=float),
    mu: wp.array(dtype=float),
    materials: wp.array3d(dtype=float),
):
    c = wp.tid()
    n = step[0]
    materials[n, c, 0] = ke[c]
    materials[n, c, 1] = kd[c]
    materials[n, c, 2] = mu[c]


@wp.kernel
def _record_poses(
    step: wp.array(dtype=int),
    start: wp.array(dtype=wp.transform),
    end: wp.array(dtype=wp.transform),
    starts: wp.array2d(dtype=wp.transform),
    ends: wp.array2d(dtype=wp.transform),
):
    b = wp.tid()
    starts[step[0], b] = start[b]
    ends[step[0], b] = end[b]


@wp.kernel
def _advance(step: wp.array(dtype=int)):
    step[0] = step[0] + 1


_NODE_CONTACTS_ONLY = "the soft-body gradient takes node contacts only (no edge or face records)"


@dataclass(eq=False)
class RolloutPoint:
    """What a rollout's result depends on besides the simulator's mesh and scene: made by
    :func:`rollout_point` for a recording kept on a :class:`StepHistory`, compared by
    ``adjoint.recorded_rollout`` before it runs the same rollout again."""

    settings: Any  # the simulator's SoftBodyParams (a dataclass: compared field by field)
    weights: dict[str, np.ndarray]  # the painted maps' weights, copied
    frame_end: int
    frames: tuple[int, ...] | None
    goals: np.ndarray | None  # the caller's array itself, held: compared by identity

    def same(self, other: RolloutPoint) -> bool:
        return (
            self.settings == other.settings
            and self.frame_end == other.frame_end
            and self.frames == other.frames
            and self.goals is other.goals
            and self.weights.keys() == other.weights.keys()
            and all(np.array_equal(w, other.weights[k]) for k, w in self.weights.items())
        )


def rollout_point(sim: Any, frame_end: int, output_frames: Any, goals: np.ndarray | None) -> RolloutPoint:
    """The point of ``sim``'s rollout to ``frame_end`` with these outputs and goals now."""
    weights = {k: np.array(w, copy=True) for k, w in sim.materials.weights.items()}
    frames = None if output_frames is None else tuple(int(f) for f in output_frames)
    return RolloutPoint(sim.settings, weights, int(frame_end), frames, goals)


class StepHistory:
    """Device arrays for every substep of one rollout of ``substeps`` substeps, and the
    launches that fill them: made by ``adjoint``, the simulator's ``step_recorder`` while a
    rollout that is to be differentiated runs (:meth:`reset` before it; the simulator calls
    :meth:`before_step` and :meth:`after_step` around each substep and :meth:`last` at the
    end). ``sim``: a SoftBodySimulator."""

    def __init__(self, sim: Any, substeps: int) -> None:
        scene, d = sim.scene, sim.device
        self.scene, self.device = scene, d
        self.dt = 1.0 / (float(sim.settings.fps) * int(sim.settings.substeps))
        self.nodes, self.substeps = sim.node_count, substeps
        self.step = wp.zeros(1, dtype=int, device=d)
        self.graphs: dict[int, Any] = {}  # the simulator's captured frames that write these arrays
        self.xs = wp.zeros((substeps + 1, self.nodes), dtype=wp.vec3, device=d)
        self.vs = wp.zeros((substeps + 1, self.nodes), dtype=wp.vec3, device=d)
        self.capacity = 0 if scene.contacts is None else len(scene.contacts.soft_contact_shape)
        shape = (substeps, self.capacity)
        self.counts = wp.zeros(substeps, dtype=int, device=d)
        self.indices = wp.zeros(shape, dtype=wp.vec3i, device=d)
        self.shapes = wp.zeros(shape, dtype=int, device=d)
        self.body_pos, self.body_vel, self.normals = (
            wp.zeros(shape, dtype=wp.vec3, device=d) for _ in range(3)
        )
        self.materials = wp.zeros((*shape, 3), dtype=float, device=d)
        bodies = 0 if scene.states[0].body_q is None else len(scene.states[0].body_q)
        self.pose_starts, self.pose_ends = (
            wp.zeros((substeps, bodies), dtype=wp.transform, device=d) for _ in range(2)
        )
        self.kept: tuple[RolloutPoint, Any] | None = None  # see keep

    def reset(self) -> None:
        """Before the rollout (not captured): the first substep writes row 0."""
        self.step.zero_()
        self.kept = None

    def keep(self, point: RolloutPoint, result: Any) -> None:
        """After the rollout: it is the one at ``point`` and returned ``result``, so a
        recorded rollout of the same point reads these arrays instead of running again."""
        self.kept = (point, result)

    def kept_result(self, point: RolloutPoint) -> Any:
        """The kept rollout's result where it was made at ``point``, else None."""
        kept = self.kept
        return kept[1] if kept is not None and kept[0].same(point) else None

    def before_step(self, state_in: Any, state_out: Any) -> None:
        """The substep's start (pins placed), its contacts, and the bodies' poses at its ends."""
        d = self.device
        wp.launch(
            _record_nodes,
            dim=self.nodes,
            inputs=[self.step, state_in.particle_q, state_in.particle_qd],
            outputs=[self.xs, self.vs],
            device=d,
        )
        if self.capacity:
            c = self.scene.contacts
            inputs = [self.step, c.soft_contact_count, c.soft_contact_indices, c.soft_contact_shape]
            inputs += [c.soft_contact_body_pos, c.soft_contact_body_vel, c.soft_contact_normal]
            outputs = [self.counts, self.indices, self.shapes, self.body_pos, self.body_vel, self.normals]
            wp.launch(_record_contacts, dim=self.capacity, inputs=inputs, outputs=outputs, device=d)
        if self.pose_starts.shape[1]:
            wp.launch(
                _record_poses,
                dim=self.pose_starts.shape[1],
                inputs=[self.step, state_in.body_q, state_out.body_q],
                outputs=[self.pose_starts, self.pose_ends],
                device=d,
            )

    def after_step(self) -> None:
        """The contacts' materials the solver used in the substep; then the next row."""
        if self.capacity:
            s = self.scene.solver
            inputs = [
                self.step,
                s.body_particle_contact_penalty_k,
                s.body_particle_contact_material_kd,
                s.body_particle_contact_material_mu,
            ]
            wp.launch(
                _record_contact_materials,
                dim=self.capacity,
                inputs=inputs,
                outputs=[self.materials],
                device=self.device,
            )
        wp.launch(_advance, dim=1, inputs=[self.step], device=self.device)

    def last(self, state: Any) -> None:
        """The state the last substep left (its row is the substep count)."""
        wp.launch(
            _record_nodes,
            dim=self.nodes,
            inputs=[self.step, state.particle_q, state.particle_qd],
            outputs=[self.xs, self.vs],
            device=self.device,
        )

    def _check_steps(self) -> int:
        steps = int(self.step.numpy()[0])
        if steps != self.substeps:
            raise RuntimeError(f"the rollout recorded {steps} substeps of {self.substeps}")
        return steps

    def read_on_device(self) -> DeviceRecording:
        """A copy of the history on the device (two scalars read back: the step count and
        whether any contact is on an edge or a face, refused as :meth:`read` refuses it)."""
        steps = self._check_steps()
        if self.capacity:
            flag = wp.zeros(1, dtype=int, device=self.device)
            dim = (steps, self.capacity)
            wp.launch(
                _flag_face_contacts, dim=dim, inputs=[self.counts, self.indices, flag], device=self.device
            )
            if flag.numpy()[0]:
                raise NotImplementedError(_NODE_CONTACTS_ONLY)
        copies = [
            wp.clone(a)
            for a in (self.xs, self.vs, self.counts, self.indices, self.shapes, self.body_pos)
            + (self.body_vel, self.normals, self.materials, self.pose_starts, self.pose_ends)
        ]
        return DeviceRecording(steps, *copies[:2], self.capacity, *copies[2:], self.scene.model.shape_body)

    def read(self) -> Recording:
        """The history on the host, each contact placed in the simulation frame;
        NotImplementedError for a contact on an edge or a face (the gradient takes node
        contacts only)."""
        steps = self._check_steps()
        xs, vs = self.xs.numpy().astype(np.float64), self.vs.numpy().astype(np.float64)
        contacts: list[StepContacts | None] = [None] * steps
        if self.capacity:
            counts, indices, shapes = self.counts.numpy(), self.indices.numpy(), self.shapes.numpy()
            body_pos, body_vel = self.body_pos.numpy(), self.body_vel.numpy()
            normals, materials = self.normals.numpy(), self.materials.numpy()
            starts, ends = self.pose_starts.numpy(), self.pose_ends.numpy()
            shape_body = self.scene.model.shape_body.numpy()
            for n in range(steps):
                k = int(counts[n])
                if (indices[n, :k, 1:] >= 0).any():
                    raise NotImplementedError(_NODE_CONTACTS_ONLY)
                body = shape_body[shapes[n, :k]] if k else np.zeros(0, np.int64)
                point_start, _ = _placed(starts[n], body, body_pos[n, :k].astype(np.float64))
                point_end, rotation_end = _placed(ends[n], body, body_pos[n, :k].astype(np.float64))
                surface_vel = body_vel[n, :k].astype(np.float64)
                contacts[n] = StepContacts(
                    particles=indices[n, :k, 0].astype(np.int64),
                    shapes=shapes[n, :k].astype(np.int64),
                    body_pos=point_end,
                    # Newton's body-particle contact: (bx - bx_prev) / dt + R surface_vel
                    body_vel=(point_end - point_start) / self.dt
                    + np.einsum("cij,cj->ci", rotation_end, surface_vel),
                    normals=normals[n, :k].astype(np.float64),
                    ke=materials[n, :k, 0].astype(np.float64),
                    kd=materials[n, :k, 1].astype(np.float64),
                    mu=materials[n, :k, 2].astype(np.float64),
                )
        return Recording(list(xs), list(vs), contacts)


def _rotations(q: np.ndarray) -> np.ndarray:
    """(K, 3, 3) rotation matrices of (K, 4) unit quaternions (x, y, z, w), Warp's order."""
    x, y, z, w = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], axis=1),
            np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], axis=1),
            np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], axis=1),
        ],
        axis=1,
    )


def _placed(poses: np.ndarray, body: np.ndarray, local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each contact's body-frame point in the simulation frame at the bodies' ``poses`` ((B, 7)
    transforms), and its body's rotation; the identity for the ground (body -1)."""
    rotation = np.repeat(np.eye(3)[None], len(body), axis=0)
    point = local.copy()
    on_body = body >= 0
    if on_body.any():
        pose = poses.astype(np.float64)[body[on_body]]
        rotation[on_body] = _rotations(pose[:, 3:7])
        point[on_body] = np.einsum("cij,cj->ci", rotation[on_body], local[on_body]) + pose[:, :3]
    return point, rotation
