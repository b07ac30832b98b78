"""One substep of the soft-body adjoint on the device (``adjoint_device``): the forces of
``adjoint_step.StepOperator``, its arrays and its recorded tet launch, placed at a substep of
a :class:`~.recording.DeviceRecording` by kernels (the step's index read from a device
array, so a captured graph serves every substep) and taken as products on float64 device
vectors: a kernel seeds the reverse launches and another combines their gradients, with no
host copy. The contacts' arrays hold the recording's capacity, their launches recorded once,
reading the substep's count from the device.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from .adjoint_kernels import contact_forces, tet_forces
from .adjoint_step import StepOperator
from .recording import DeviceRecording

__all__ = ["DeviceStepOperator"]

Vectors = wp.array(dtype=wp.vec3d)


@wp.kernel
def _place_nodes(
    step: wp.array(dtype=int),
    xs: wp.array2d(dtype=wp.vec3),
    free: wp.array(dtype=wp.int32),
    x_end: wp.array(dtype=wp.vec3),
    x_start: wp.array(dtype=wp.vec3),
    x_end64: Vectors,
    x_start64: Vectors,
):
    # x'_n: the next step's start with the pins where this step left them
    i = wp.tid()
    n = step[0]
    start = xs[n, i]
    end = start
    if free[i] != 0:
        end = xs[n + 1, i]
    x_end[i] = end
    x_start[i] = start
    x_end64[i] = wp.vec3d(end)
    x_start64[i] = wp.vec3d(start)


@wp.func
def _rotation(q: wp.quat):
    # ``recording._rotations`` in float64, for the host path's rounding: the recorded
    # float32 quaternion is unit only to about 1e-7, and Warp's quat_to_matrix (another
    # formula, the same for a unit one) parts from it by that much, which moved the
    # gradient on a tilting collider by 2.5e-7 against the host path's
    x, y, z, w = wp.float64(q[0]), wp.float64(q[1]), wp.float64(q[2]), wp.float64(q[3])
    one, two = wp.float64(1.0), wp.float64(2.0)
    return wp.mat33d(
        one - two * (y * y + z * z),
        two * (x * y - z * w),
        two * (x * z + y * w),
        two * (x * y + z * w),
        one - two * (x * x + z * z),
        two * (y * z - x * w),
        two * (x * z - y * w),
        two * (y * z + x * w),
        one - two * (x * x + y * y),
    )


@wp.kernel
def _place_contacts(
    step: wp.array(dtype=int),
    counts: wp.array(dtype=int),
    indices: wp.array2d(dtype=wp.vec3i),
    shapes: wp.array2d(dtype=int),
    body_pos: wp.array2d(dtype=wp.vec3),
    body_vel: wp.array2d(dtype=wp.vec3),
    normals: wp.array2d(dtype=wp.vec3),
    materials: wp.array3d(dtype=float),
    pose_starts: wp.array2d(dtype=wp.transform),
    pose_ends: wp.array2d(dtype=wp.transform),
    shape_body: wp.array(dtype=int),
    dt: wp.float64,
    count: wp.array(dtype=int),
    particles_out: wp.array(dtype=int),
    shapes_out: wp.array(dtype=int),
    body_pos_out: wp.array(dtype=wp.vec3),
    body_vel_out: wp.array(dtype=wp.vec3),
    normals_out: wp.array(dtype=wp.vec3),
    ke: wp.array(dtype=float),
    kd: wp.array(dtype=float),
    mu: wp.array(dtype=float),
):
    """Contact c of the substep as ``StepHistory.read`` places it (in float64, rounded to
    float32 as ``StepOperator.at`` rounds it): its plane's point at its body's end pose, and
    that point's velocity over the substep plus the surface's own."""
    c = wp.tid()
    n = step[0]
    if c == 0:
        count[0] = counts[n]
    if c >= counts[n]:
        return
    shape = shapes[n, c]
    local = wp.vec3d(body_pos[n, c])
    point_start = local
    point_end = local
    rotation_end = wp.identity(n=3, dtype=wp.float64)
    body = shape_body[shape]
    if body >= 0:
        start, end = pose_starts[n, body], pose_ends[n, body]
        point_start = _rotation(wp.transform_get_rotation(start)) * local + wp.vec3d(
            wp.transform_get_translation(start)
        )
        rotation_end = _rotation(wp.transform_get_rotation(end))
        point_end = rotation_end * local + wp.vec3d(wp.transform_get_translation(end))
    particles_out[c] = indices[n, c][0]
    shapes_out[c] = shape
    body_pos_out[c] = wp.vec3(point_end)
    body_vel_out[c] = wp.vec3((point_end - point_start) / dt + rotation_end * wp.vec3d(body_vel[n, c]))
    normals_out[c] = normals[n, c]
    ke[c] = materials[n, c, 0]
    kd[c] = materials[n, c, 1]
    mu[c] = materials[n, c, 2]


@wp.kernel
def _block_inverses(
    mass_dt2: wp.array(dtype=wp.float64),
    blocks: wp.array(dtype=wp.mat33),
    free: wp.array(dtype=wp.int32),
    inverse: wp.array(dtype=wp.mat33d),
):
    # ``solve_adjoint``'s preconditioner: the transposed blocks of H, the identity at pins
    i = wp.tid()
    identity = wp.identity(n=3, dtype=wp.float64)
    block = identity
    if free[i] != 0:
        block = wp.transpose(mass_dt2[i] * identity + wp.mat33d(blocks[i]))
    inverse[i] = wp.inverse(block)


@wp.kernel
def _seed(
    p: Vectors,
    free: wp.array(dtype=wp.int32),
    contacts: int,
    seed64: Vectors,
    grad_end64: Vectors,
    seed: wp.array(dtype=wp.vec3),
):
    # the tets' seed and the end gradient they add to; the contacts' float32 seed where
    # their reverse launch follows (a pullback: the products take the contacts' blocks)
    i = wp.tid()
    value = wp.vec3d()
    if free[i] != 0:
        value = p[i]
    seed64[i] = value
    grad_end64[i] = wp.vec3d()
    if contacts != 0:
        seed[i] = wp.vec3(value)


@wp.kernel
def _product(
    p: Vectors,
    free: wp.array(dtype=wp.int32),
    mass_dt2: wp.array(dtype=wp.float64),
    grad_end64: Vectors,
    contact_blocks: wp.array(dtype=wp.mat33d),
    out: Vectors,
):
    # H^T p = M / dt^2 p - (df/dx')^T p over the free nodes: the tets' reversed, the
    # contacts' by their blocks
    i = wp.tid()
    value = wp.vec3d()
    if free[i] != 0:
        value = mass_dt2[i] * p[i] - (grad_end64[i] + wp.transpose(contact_blocks[i]) * p[i])
    out[i] = value


@wp.kernel
def _gather_blocks(rows: wp.array2d(dtype=wp.vec3), blocks: wp.array(dtype=wp.mat33d)):
    # row k of a node's block: the reverse launch seeded with axis k at every node
    i = wp.tid()
    blocks[i] = wp.mat33d(wp.matrix_from_rows(rows[0, i], rows[1, i], rows[2, i]))


@wp.kernel
def _add_contact_stiffness(
    count: wp.array(dtype=int),
    ke: wp.array(dtype=float),
    kd: wp.array(dtype=float),
    ke_grad: wp.array(dtype=float),
    kd_grad: wp.array(dtype=float),
    values: wp.array(dtype=wp.float64),
    slot: int,
):
    # (df/dlog ke)^T lam: every contact's stiffness and damping scaled together
    c = wp.tid()
    if c < count[0]:
        term = wp.float64(ke_grad[c]) * wp.float64(ke[c]) + wp.float64(kd_grad[c]) * wp.float64(kd[c])
        wp.atomic_add(values, slot, term)


class DeviceStepOperator:
    """A substep's forces for the device-resident backward: made by ``adjoint_device`` for
    one backward pass over ``recording`` (``sim``: a SoftBodySimulator), placed at the substep
    ``step[0]`` by :meth:`place`; the solve reads :attr:`inverse` and calls :meth:`apply`, the
    loop reads the gradients :meth:`pullback` leaves in :attr:`host`'s arrays (``grad_start64``,
    ``grad_start``, ``grad_materials``) and adds the contacts' by :meth:`add_contact_stiffness`."""

    def __init__(self, sim: Any, dt: float, recording: DeviceRecording, step: wp.array) -> None:
        self.host = op = StepOperator(sim, dt)
        self.recording, self.step, self.dt = recording, step, dt
        self.device, self.nodes, self.tets = sim.device, sim.node_count, sim.tet_count
        d = self.device
        free = ~sim.pinned_nodes
        self.free = wp.array(free.astype(np.int32), dtype=wp.int32, device=d)
        mass = sim.scene.unit_mass * free * float(sim.settings.density)
        self.mass_dt2 = wp.array(mass / dt**2, dtype=wp.float64, device=d)
        self.inverse = wp.zeros(self.nodes, dtype=wp.mat33d, device=d)
        self.reverse_launches = list(op.reverse_launches)  # the tets' only: ``at`` is never called
        self.capacity = recording.capacity
        self.contacts: list = []
        # the contacts' df/dx' by node (a contact pulls on its own node only), once a substep
        self.contact_blocks = wp.zeros(self.nodes, dtype=wp.mat33d, device=d)
        if self.capacity:
            self._contacts(sim)

    def _contacts(self, sim: Any) -> None:
        op, d, n = self.host, self.device, self.capacity
        self.count = wp.zeros(1, dtype=int, device=d)
        self.particles, self.shapes = (wp.zeros(n, dtype=int, device=d) for _ in range(2))
        self.body_pos, self.body_vel, self.normals = (wp.zeros(n, dtype=wp.vec3, device=d) for _ in range(3))
        self.ke, self.kd, self.mu, self.ke_grad, self.kd_grad = (
            wp.zeros(n, dtype=float, device=d) for _ in range(5)
        )
        model = sim.scene.model
        self.contacts = [
            *[self.count, self.particles, self.shapes, self.body_pos, self.body_vel, self.normals],
            *[self.ke, self.kd, self.mu, model.particle_radius, model.shape_margin],
            float(sim.scene.solver.friction_epsilon),
            self.dt,
        ]
        # as ``StepOperator.at`` records it, at the capacity (the kernel stops at the count)
        self.reverse_launches.append(op.contact_reverse(self.contacts, (self.ke_grad, self.kd_grad), n))
        # and seeded with each axis at every node: the blocks' rows (``contact_jacobians``)
        axes = np.repeat(np.eye(3)[:, None, :], self.nodes, axis=1)
        self.axes = wp.array(axes, dtype=wp.vec3, device=d)
        self.rows = wp.zeros((3, self.nodes), dtype=wp.vec3, device=d)
        unused_start = wp.zeros(self.nodes, dtype=wp.vec3, device=d)
        unused = wp.zeros(n, dtype=float, device=d)
        self.block_launches = [
            op.contact_reverse(self.contacts, (unused, unused), n, self.axes[k], (self.rows[k], unused_start))
            for k in range(3)
        ]

    def place(self) -> None:
        """Launch the substep's positions (and contacts) into the operator's arrays."""
        r, op, d = self.recording, self.host, self.device
        outputs = [op.x_end, op.x_start, op.x_end64, op.x_start64]
        wp.launch(
            _place_nodes, dim=self.nodes, inputs=[self.step, r.xs, self.free], outputs=outputs, device=d
        )
        if self.capacity:
            inputs = [
                self.step,
                r.counts,
                r.indices,
                r.shapes,
                r.body_pos,
                r.body_vel,
                r.normals,
                r.materials,
            ]
            inputs += [r.pose_starts, r.pose_ends, r.shape_body, wp.float64(self.dt)]
            outputs = [self.count, self.particles, self.shapes, self.body_pos, self.body_vel, self.normals]
            outputs += [self.ke, self.kd, self.mu]
            wp.launch(_place_contacts, dim=self.capacity, inputs=inputs, outputs=outputs, device=d)

    def forces(self) -> None:
        """Launch the forces into ``host.out`` and VBD's blocks into ``host.blocks_out``, then
        the preconditioner's inverses from them into :attr:`inverse`."""
        op, d = self.host, self.device
        op.out.zero_()
        op.blocks_out.zero_()
        outputs = [op.out, op.blocks_out]
        wp.launch(tet_forces, dim=(self.tets, 4), inputs=op.tet_inputs, outputs=outputs, device=d)
        if self.capacity:
            inputs = [op.x_end, op.x_start, *self.contacts]
            wp.launch(contact_forces, dim=self.capacity, inputs=inputs, outputs=outputs, device=d)
        inputs = [self.mass_dt2, op.blocks_out, self.free]
        wp.launch(_block_inverses, dim=self.nodes, inputs=inputs, outputs=[self.inverse], device=d)

    def take_contact_blocks(self) -> None:
        """Launch the contacts' blocks by the end positions into :attr:`contact_blocks` (after
        :meth:`place`), which the products read: three reverse launches a substep instead of
        one a product."""
        if self.capacity:
            self.rows.zero_()
            for launch in self.block_launches:
                launch.launch()
            inputs = [self.rows, self.contact_blocks]
            wp.launch(_gather_blocks, dim=self.nodes, inputs=inputs, device=self.device)

    def _reverse(self, p: wp.array, pullback: bool) -> None:
        # a product reverses the tets alone (the contacts' part is their blocks); a pullback
        # every launch, the contacts' from their float32 seed
        op = self.host
        contacts = int(pullback and self.capacity > 0)
        outputs = [op.seed64, op.grad_end64, op.seed]
        inputs = [p, self.free, contacts]
        wp.launch(_seed, dim=self.nodes, inputs=inputs, outputs=outputs, device=self.device)
        for launch in self.reverse_launches if pullback else [op.tet_product]:
            launch.launch()

    def apply(self, p: wp.array, out: wp.array) -> None:
        """Launch ``out = H^T p`` over the free nodes (zero at the pins): the solve's product."""
        op = self.host
        self._reverse(p, pullback=False)
        inputs = [p, self.free, self.mass_dt2, op.grad_end64, self.contact_blocks]
        wp.launch(_product, dim=self.nodes, inputs=inputs, outputs=[out], device=self.device)

    def pullback(self, lam: wp.array) -> None:
        """Launch the reverse products of ``lam`` into every gradient array (zeroed first):
        ``(df/dx)^T lam`` into ``host.grad_start64`` + ``host.grad_start``, ``(df/dmaterials)^T
        lam`` into ``host.grad_materials``, the contacts' stiffness and damping into theirs."""
        op = self.host
        for a in (op.grad_start, op.grad_start64, op.grad_materials):
            a.zero_()
        if self.capacity:
            self.ke_grad.zero_()
            self.kd_grad.zero_()
        self._reverse(lam, pullback=True)

    def add_contact_stiffness(self, values: wp.array, slot: int) -> None:
        """Launch ``values[slot] +=`` the derivative by the log of the contacts' stiffness
        (after :meth:`pullback`), as ``StepOperator.pullback`` gives it."""
        if self.capacity:
            inputs = [self.count, self.ke, self.kd, self.ke_grad, self.kd_grad, values, slot]
            wp.launch(_add_contact_stiffness, dim=self.capacity, inputs=inputs, device=self.device)
