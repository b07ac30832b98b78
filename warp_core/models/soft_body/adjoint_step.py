"""One substep of the soft-body adjoint (``adjoint``): what a rollout records of each
substep, the forces VBD balances in it as reverse-mode products, and the linear solve
``H^T lam = xbar'`` with ``H = M / dt^2 - df/dx'``.

The forces: every tet's elasticity and damping, and the contacts with the ground and the
colliders (penalty, damping while approaching, smoothed friction) with the contact
records, stiffnesses and friction the solver used in that substep, frozen (which nodes
touch, and where, is not differentiated). Friction makes ``H`` unsymmetric, so the solve
is BiCGStab, preconditioned by VBD's own 3 x 3 vertex blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import warp as wp

from .adjoint_kernels import contact_forces, tet_forces, tet_forces_only

__all__ = ["Recorder", "StepContacts", "StepOperator", "solve_adjoint"]

SOLVE_TOLERANCE = 1e-6  # relative residual of the adjoint solve (the products are float32)
SOLVE_MAX_ITERATIONS = 500


@dataclass
class StepContacts:
    """The contacts of one substep as the solver used them: recorded by
    :class:`Recorder`, read by :class:`StepOperator`."""

    particles: np.ndarray  # (C,) int: the node of each contact
    shapes: np.ndarray  # (C,) int
    # a point of the contact plane at the substep's end and its velocity over the substep, in
    # the simulation frame: where the ground or a collider's body (at its end pose) puts it
    body_pos: np.ndarray  # (C, 3)
    body_vel: np.ndarray  # (C, 3)
    normals: np.ndarray  # (C, 3)
    ke: np.ndarray | None = None  # (C,) penalty stiffness, damping and friction: set once
    kd: np.ndarray | None = None  # the solver has run the substep
    mu: np.ndarray | None = None


class Recorder:
    """Each substep's start positions and velocities (copied before the solver steps it),
    its contacts, and the rollout's last state: the simulator's ``step_observer`` while a
    rollout that is to be differentiated runs. ``sim``: a SoftBodySimulator."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self.x: list[np.ndarray] = []
        self.v: list[np.ndarray] = []
        self.contacts: list[StepContacts | None] = []

    def __call__(self, state: Any) -> None:
        scene = self.sim.scene
        if self.contacts and self.contacts[-1] is not None:
            # the solver's per-contact materials of the substep that just ran
            last, solver, n = self.contacts[-1], scene.solver, len(self.contacts[-1].particles)
            last.ke = solver.body_particle_contact_penalty_k.numpy()[:n].astype(np.float64)
            last.kd = solver.body_particle_contact_material_kd.numpy()[:n].astype(np.float64)
            last.mu = solver.body_particle_contact_material_mu.numpy()[:n].astype(np.float64)
        self.x.append(state.particle_q.numpy().astype(np.float64))
        self.v.append(state.particle_qd.numpy().astype(np.float64))
        if scene.contacts is None:
            self.contacts.append(None)
            return
        # the solver places each contact with the bodies' poses at the substep's end (the other
        # state, set before it steps) and at its start
        end = next(s for s in scene.states if s is not state)
        dt = 1.0 / (float(self.sim.settings.fps) * int(self.sim.settings.substeps))
        self.contacts.append(self._contacts(scene.contacts, scene.model, state, end, dt))

    @staticmethod
    def _contacts(contacts: Any, model: Any, start: Any, end: Any, dt: float) -> StepContacts:
        n = int(contacts.soft_contact_count.numpy()[0])
        corners = contacts.soft_contact_indices.numpy()[:n]
        if (corners[:, 1:] >= 0).any():
            raise NotImplementedError(
                "the soft-body gradient takes node contacts only (no edge or face records)"
            )
        shapes = contacts.soft_contact_shape.numpy()[:n].astype(np.int64)
        local = contacts.soft_contact_body_pos.numpy()[:n].astype(np.float64)
        surface_vel = contacts.soft_contact_body_vel.numpy()[:n].astype(np.float64)
        body = model.shape_body.numpy()[shapes] if n else np.zeros(0, np.int64)
        point_start, _ = _placed(start.body_q, body, local)
        point_end, rotation_end = _placed(end.body_q, body, local)
        return StepContacts(
            particles=corners[:, 0].astype(np.int64),
            shapes=shapes,
            body_pos=point_end,
            # Newton's body-particle contact: (bx - bx_prev) / dt + R surface_vel
            body_vel=(point_end - point_start) / dt + np.einsum("cij,cj->ci", rotation_end, surface_vel),
            normals=contacts.soft_contact_normal.numpy()[:n].astype(np.float64),
        )


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


def _placed(poses: Any, body: np.ndarray, local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each contact's body-frame point in the simulation frame at the bodies' ``poses`` (a
    Warp array of B transforms; None without bodies), and its body's rotation; the identity
    for the ground (body -1)."""
    rotation = np.repeat(np.eye(3)[None], len(body), axis=0)
    point = local.copy()
    on_body = body >= 0
    if on_body.any():
        pose = poses.numpy().astype(np.float64)[body[on_body]]
        rotation[on_body] = _rotations(pose[:, 3:7])
        point[on_body] = np.einsum("cij,cj->ci", rotation[on_body], local[on_body]) + pose[:, :3]
    return point, rotation


class StepOperator:
    """The forces of one substep around its end positions, as products for the solve; its
    node arrays are reused from step to step. ``sim``: a SoftBodySimulator."""

    def __init__(self, sim: Any, dt: float) -> None:
        model = sim.scene.model
        self.model = model
        self.solver = sim.scene.solver
        self.device = sim.device
        self.dt = dt
        self.free = ~sim.pinned_nodes
        self.nodes = sim.node_count
        d = sim.device
        self.x_end, self.x_start, self.seed, self.out, self.grad_end, self.grad_start = (
            wp.zeros(self.nodes, dtype=wp.vec3, device=d) for _ in range(6)
        )
        self.blocks_out = wp.zeros(self.nodes, dtype=wp.mat33, device=d)
        self.grad_materials = wp.zeros_like(model.tet_materials)
        self.contacts: list | None = None
        self.contact_grads: tuple[wp.array, wp.array] | None = None
        self.contact_stiffness: tuple[np.ndarray, np.ndarray] | None = None  # ke, kd (host)

    def at(self, x_end: np.ndarray, x_start: np.ndarray, contacts: StepContacts | None) -> None:
        self.x_end.assign(x_end.astype(np.float32))
        self.x_start.assign(x_start.astype(np.float32))
        self.contacts = None
        if contacts is None or not len(contacts.particles):
            return
        d, n = self.device, len(contacts.particles)

        def floats(a: np.ndarray) -> wp.array:
            return wp.array(a.astype(np.float32), dtype=float, device=d)

        def vectors(a: np.ndarray) -> wp.array:
            return wp.array(a.astype(np.float32), dtype=wp.vec3, device=d)

        self.contacts = [
            wp.array([n], dtype=int, device=d),
            wp.array(contacts.particles.astype(np.int32), dtype=int, device=d),
            wp.array(contacts.shapes.astype(np.int32), dtype=int, device=d),
            vectors(contacts.body_pos),
            vectors(contacts.body_vel),
            vectors(contacts.normals),
            floats(contacts.ke),
            floats(contacts.kd),
            floats(contacts.mu),
            self.model.particle_radius,
            self.model.shape_margin,
            float(self.solver.friction_epsilon),
            self.dt,
        ]
        self.contact_grads = (wp.zeros(n, dtype=float, device=d), wp.zeros(n, dtype=float, device=d))
        self.contact_stiffness = (contacts.ke, contacts.kd)

    def _launch(self, reverse: bool = False) -> None:
        """The forces into ``out`` and the blocks into ``blocks_out``; ``reverse``: the
        products of ``seed`` with their derivatives into the gradient arrays instead."""
        m = self.model
        outputs = [self.out, self.blocks_out]
        tet_inputs = [self.x_end, self.x_start, m.tet_indices, m.tet_poses, m.tet_materials, self.dt]
        adjoint = {}
        if reverse:
            adjoint = {
                "adj_inputs": [self.grad_end, self.grad_start, None, None, self.grad_materials, 0.0],
                "adj_outputs": [self.seed],
                "adjoint": True,
            }
            wp.launch(tet_forces_only, dim=m.tet_count, inputs=tet_inputs, outputs=[self.out], **adjoint)
            adjoint["adj_outputs"] = [self.seed, None]
        else:
            wp.launch(tet_forces, dim=(m.tet_count, 4), inputs=tet_inputs, outputs=outputs)
        if self.contacts is None:
            return
        if reverse:
            ke_grad, kd_grad = self.contact_grads
            # the inputs: x, x_prev, 6 contact records, ke, kd, mu, radius, margin, 2 scalars
            adj_inputs = [self.grad_end, self.grad_start, *[None] * 6, ke_grad, kd_grad, None, None, None]
            adjoint["adj_inputs"] = [*adj_inputs, 0.0, 0.0]
        n = len(self.contact_grads[0])
        inputs = [self.x_end, self.x_start, *self.contacts]
        wp.launch(contact_forces, dim=n, inputs=inputs, outputs=outputs, **adjoint)

    def forces(self) -> np.ndarray:
        self.out.zero_()
        self.blocks_out.zero_()
        self._launch()
        return self.out.numpy().astype(np.float64)

    def blocks(self) -> np.ndarray:
        """VBD's 3 x 3 vertex blocks of ``-df/dx'`` (after :meth:`forces`)."""
        return self.blocks_out.numpy().astype(np.float64)

    def _reverse(self, p: np.ndarray) -> None:
        self.seed.assign(p.astype(np.float32))
        for a in (self.grad_end, self.grad_start, self.grad_materials):
            a.zero_()
        if self.contacts is not None:
            for a in self.contact_grads:
                a.zero_()
        self._launch(reverse=True)

    def product(self, p: np.ndarray) -> np.ndarray:
        """``(df/dx')^T p``."""
        self._reverse(p)
        return self.grad_end.numpy().astype(np.float64)

    def pullback(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """``((df/dx)^T p, (df/dmaterials)^T p, (df/dlog ke)^T p)``: the last with every
        contact's stiffness and damping scaled together (as Young's modulus scales them)."""
        self._reverse(p)
        contact = 0.0
        if self.contacts is not None:
            ke, kd = self.contact_stiffness
            ke_grad, kd_grad = (g.numpy().astype(np.float64) for g in self.contact_grads)
            contact = float(ke_grad @ ke + kd_grad @ kd)
        return (
            self.grad_start.numpy().astype(np.float64),
            self.grad_materials.numpy().astype(np.float64),
            contact,
        )


def inverse_3x3(m: np.ndarray) -> np.ndarray:
    """Inverses of (N, 3, 3) matrices by their adjugates (np.linalg.inv takes 20 times as
    long on a hundred blocks)."""
    c0 = np.cross(m[:, :, 1], m[:, :, 2])
    c1 = np.cross(m[:, :, 2], m[:, :, 0])
    c2 = np.cross(m[:, :, 0], m[:, :, 1])
    det = np.einsum("ni,ni->n", m[:, :, 0], c0)
    return np.stack([c0, c1, c2], axis=1) / det[:, None, None]


def solve_adjoint(op: StepOperator, mass_dt2: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, int]:
    """``H^T lam = rhs`` over the free nodes (after ``op.forces()``) by BiCGStab,
    preconditioned by VBD's vertex blocks; the solution and the products it took."""
    free = op.free
    blocks = mass_dt2[:, None, None] * np.eye(3) + op.blocks()
    blocks[~free] = np.eye(3)
    inverse = inverse_3x3(np.transpose(blocks, (0, 2, 1)))

    def apply(p: np.ndarray) -> np.ndarray:
        p = np.where(free[:, None], p, 0.0)
        return np.where(free[:, None], mass_dt2[:, None] * p - op.product(p), 0.0)

    def precondition(r: np.ndarray) -> np.ndarray:
        return np.einsum("nij,nj->ni", inverse, r)

    rhs = np.where(free[:, None], rhs, 0.0)
    lam = np.zeros_like(rhs)
    norm = np.linalg.norm(rhs)
    if norm == 0.0:
        return lam, 0
    r = rhs.copy()
    shadow = r.copy()
    rho = alpha = omega = 1.0
    v = p = np.zeros_like(rhs)
    products = 0
    while products < SOLVE_MAX_ITERATIONS:
        rho_next = float(np.sum(shadow * r))
        if rho_next == 0.0:
            break
        p = r + (rho_next / rho) * (alpha / omega) * (p - omega * v)
        rho = rho_next
        y = precondition(p)
        v = apply(y)
        alpha = rho / float(np.sum(shadow * v))
        s = r - alpha * v
        products += 1
        if np.linalg.norm(s) <= SOLVE_TOLERANCE * norm:
            return lam + alpha * y, products
        z = precondition(s)
        t = apply(z)
        products += 1
        omega = float(np.sum(t * s)) / float(np.sum(t * t))
        lam = lam + alpha * y + omega * z
        r = s - omega * t
        if np.linalg.norm(r) <= SOLVE_TOLERANCE * norm:
            return lam, products
    raise ArithmeticError(f"the soft-body adjoint solve did not converge in {products} products")
