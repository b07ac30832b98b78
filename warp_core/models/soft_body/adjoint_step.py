"""One substep of the soft-body adjoint (``adjoint``): the forces VBD balances in it (as
``recording`` recorded it) as reverse-mode products, and the linear solve
``H^T lam = xbar'`` with ``H = M / dt^2 - df/dx'``.

The forces: every tet's elasticity and damping, and the contacts with the ground and the
colliders (penalty, damping while approaching, smoothed friction) with the contact
records, stiffnesses and friction the solver used in that substep, frozen (which nodes
touch, and where, is not differentiated). Friction makes ``H`` unsymmetric, so the solve
is BiCGStab, preconditioned by VBD's own 3 x 3 vertex blocks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from .adjoint_kernels import contact_forces, tet_end_products64, tet_forces, tet_forces_only64
from .recording import StepContacts

__all__ = [
    "StepOperator",
    "fill_array",
    "inverse_3x3",
    "not_converged",
    "solve_adjoint",
    "solve_bounds",
    "solve_tolerance",
    "step_residual",
]

SOLVE_TOLERANCE = 1e-6  # the tightest relative residual an adjoint solve is taken to
# An adjoint solve need not be more exact than the step it differentiates: it stops at
# SOLVE_SHARE of that step's own residual (``step_residual``), within SOLVE_TOLERANCE and
# SOLVE_ACCEPT. VBD's default 10 iterations leave a dropped body's steps 1e-2 to 1 from their
# roots, and the gradient parts from the rollouts' differences by tens of per cent for that
# (``bench/soft_body_gradients.py``); a converged step (1e-5) keeps the 1e-6 solve.
SOLVE_SHARE = 0.1
SOLVE_MAX_ITERATIONS = 500
# A stiff body puts the products' rounding above 1e-6 of the right-hand side: with float32
# tet products from about 3e5 Pa on a 64-node sphere, with the float64 ones from about 2e7 Pa
# (the contacts stay float32), where BiCGStab's true residual bottoms out and then climbs while
# its recursive residual drifts away from it. So every SOLVE_CHECK iterations the solve
# replaces the recursive residual by the true one and keeps the best iterate by it, stops once
# SOLVE_STALL products have not bettered it, and takes it where it is within SOLVE_ACCEPT (an
# error of that order in one substep's adjoint).
SOLVE_CHECK = 10  # iterations (two products each)
SOLVE_STALL = 100
SOLVE_ACCEPT = 1e-3


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
        # the tets' products in float64 (``adjoint_kernels``), the contacts' in Newton's float32
        self.x_end64, self.x_start64, self.seed64, out64, self.grad_end64, self.grad_start64 = (
            wp.zeros(self.nodes, dtype=wp.vec3d, device=d) for _ in range(6)
        )
        materials64 = wp.array(model.tet_materials.numpy().astype(np.float64), dtype=wp.float64, device=d)
        self.grad_materials = wp.zeros_like(materials64)
        self.contacts: list | None = None
        self.contact_grads: tuple[wp.array, wp.array] | None = None
        self.contact_stiffness: tuple[np.ndarray, np.ndarray] | None = None  # ke, kd (host)
        self._contact_blocks: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.tet_inputs = [
            self.x_end,
            self.x_start,
            model.tet_indices,
            model.tet_poses,
            model.tet_materials,
            dt,
        ]
        poses64 = wp.array(model.tet_poses.numpy().astype(np.float64), dtype=wp.mat33d, device=d)
        # the reverse launches, recorded once (the tets') or once a substep (the contacts'):
        # a solve makes 20-40 of them a substep, and a recorded launch skips packing arguments
        tet_inputs64 = [self.x_end64, self.x_start64, model.tet_indices, poses64, materials64, float(dt)]
        self.reverse_launches = [
            wp.launch(
                tet_forces_only64,
                dim=model.tet_count,
                inputs=tet_inputs64,
                outputs=[out64],
                adj_inputs=[self.grad_end64, self.grad_start64, None, None, self.grad_materials, 0.0],
                adj_outputs=[self.seed64],
                adjoint=True,
                device=d,
                record_cmd=True,
            )
        ]
        # the products' launch of the tets: their derivative by the end positions alone
        self.tet_product = wp.launch(
            tet_end_products64,
            dim=model.tet_count,
            inputs=[*tet_inputs64, self.seed64],
            outputs=[self.grad_end64],
            device=d,
            record_cmd=True,
        )

    def at(self, x_end: np.ndarray, x_start: np.ndarray, contacts: StepContacts | None) -> None:
        ends = (self.x_end, self.x_start, self.x_end64, self.x_start64)
        for array, values in zip(ends, (x_end, x_start) * 2, strict=True):
            fill_array(array, values)
        self.contacts = None
        self.contact_nodes = np.zeros(0, dtype=np.int64)
        self._contact_blocks = None
        del self.reverse_launches[1:]
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
        self.contact_nodes = contacts.particles.astype(np.int64)
        self.reverse_launches[1:] = [self.contact_reverse(self.contacts, self.contact_grads, n)]

    def contact_reverse(
        self,
        contacts: list,
        stiffness_grads: tuple[wp.array, wp.array],
        n: int,
        seed: wp.array | None = None,
        grads: tuple[wp.array, wp.array] | None = None,
    ) -> Any:
        """The recorded reverse launch of ``contact_forces`` over ``n`` contacts (``contacts``:
        its inputs after the positions, as :meth:`at` makes them), seeded by ``seed`` (None:
        :attr:`seed`), into ``grads`` (None: :attr:`grad_end`, :attr:`grad_start`) and
        ``stiffness_grads`` (ke, kd): this operator's for a substep, the device operator's at
        the recording's capacity."""
        grad_end, grad_start = grads or (self.grad_end, self.grad_start)
        # the inputs: x, x_prev, 6 contact records, ke, kd, mu, radius, margin, 2 scalars
        adj_inputs = [grad_end, grad_start, *[None] * 6, *stiffness_grads, None, None, None]
        return wp.launch(
            contact_forces,
            dim=n,
            inputs=[self.x_end, self.x_start, *contacts],
            outputs=[self.out, self.blocks_out],
            adj_inputs=[*adj_inputs, 0.0, 0.0],
            adj_outputs=[self.seed if seed is None else seed, None],
            adjoint=True,
            device=self.device,
            record_cmd=True,
        )

    @property
    def contact_blocks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """:meth:`contact_jacobians` at the substep :meth:`at` placed, taken once there."""
        if self._contact_blocks is None:
            self._contact_blocks = self.contact_jacobians()
        return self._contact_blocks

    def contact_jacobians(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The contacts' ``df/dx'`` and ``df/dx`` per node ((N, 3, 3) each, row k: the
        force's component k) and ``df/dlog ke`` ((N, 3), every contact's stiffness and
        damping scaled together, as in :meth:`pullback`), after :meth:`at`; None without
        contacts. A contact pulls on its own node only, so one reverse launch seeded with
        axis k at every node reads row k of every node's blocks: three launches in all."""
        if self.contacts is None:
            return None
        ke, kd = self.contact_stiffness
        end, start = np.zeros((self.nodes, 3, 3)), np.zeros((self.nodes, 3, 3))
        stiffness = np.zeros((self.nodes, 3))
        for k in range(3):
            seed = np.zeros((self.nodes, 3))
            seed[:, k] = 1.0
            fill_array(self.seed, seed)
            for a in (self.grad_end, self.grad_start, *self.contact_grads):
                a.zero_()
            self.reverse_launches[1].launch()
            end[:, k] = self.grad_end.numpy()
            start[:, k] = self.grad_start.numpy()
            ke_grad, kd_grad = (g.numpy().astype(np.float64) for g in self.contact_grads)
            per_contact = ke_grad * ke + kd_grad * kd
            stiffness[:, k] = np.bincount(self.contact_nodes, per_contact, minlength=self.nodes)
        return end, start, stiffness

    def _launch(self) -> None:
        """The forces into ``out`` and the blocks into ``blocks_out``."""
        outputs = [self.out, self.blocks_out]
        wp.launch(tet_forces, dim=(self.model.tet_count, 4), inputs=self.tet_inputs, outputs=outputs)
        if self.contacts is not None:
            inputs = [self.x_end, self.x_start, *self.contacts]
            wp.launch(contact_forces, dim=len(self.contact_grads[0]), inputs=inputs, outputs=outputs)

    def forces(self) -> np.ndarray:
        self.out.zero_()
        self.blocks_out.zero_()
        self._launch()
        return self.out.numpy().astype(np.float64)

    def blocks(self) -> np.ndarray:
        """VBD's 3 x 3 vertex blocks of ``-df/dx'`` (after :meth:`forces`)."""
        return self.blocks_out.numpy().astype(np.float64)

    def _reverse(self, p: np.ndarray, pullback: bool) -> None:
        """The reverse launches seeded with ``p``; only the gradients a product reads are
        zeroed first, unless for a ``pullback``."""
        fill_array(self.seed64, p)
        read = [self.grad_end64]
        if pullback:
            read += [self.grad_end, self.grad_start, self.grad_start64, self.grad_materials]
            if self.contacts is not None:  # their reverse launch, in float32
                fill_array(self.seed, p)
                read += list(self.contact_grads)
        for a in read:
            a.zero_()
        for launch in self.reverse_launches if pullback else [self.tet_product]:
            launch.launch()

    def product(self, p: np.ndarray) -> np.ndarray:
        """``(df/dx')^T p``: the contacts' by their blocks (:attr:`contact_blocks`), not by a
        reverse launch a product."""
        self._reverse(p, pullback=False)
        if self.contact_blocks is None:
            return self.grad_end64.numpy()
        return self.grad_end64.numpy() + np.einsum("nkj,nk->nj", self.contact_blocks[0], p)

    def pullback(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """``((df/dx)^T p, (df/dmaterials)^T p, (df/dlog ke)^T p)``: the last with every
        contact's stiffness and damping scaled together (as Young's modulus scales them)."""
        self._reverse(p, pullback=True)
        contact = 0.0
        if self.contacts is not None:
            ke, kd = self.contact_stiffness
            ke_grad, kd_grad = (g.numpy().astype(np.float64) for g in self.contact_grads)
            contact = float(ke_grad @ ke + kd_grad @ kd)
        return (
            self.grad_start64.numpy() + self.grad_start.numpy(),
            self.grad_materials.numpy(),
            contact,
        )


def step_residual(
    op: StepOperator, mass: np.ndarray, x_end: np.ndarray, y: np.ndarray, weight: float
) -> float:
    """How far a substep's end ``x_end`` is from its implicit root (after ``op.at``): the
    free nodes' ``|M / dt^2 (x' - y) - f(x')|`` over the inertia term's norm, or over the
    body's ``weight`` where that is larger (in free fall both terms vanish together)."""
    inertia = mass[:, None] / op.dt**2 * (x_end - y)
    residual = np.where(op.free[:, None], inertia - op.forces(), 0.0)
    scale = max(float(np.linalg.norm(inertia[op.free])), weight) or 1.0
    return float(np.linalg.norm(residual)) / scale


def fill_array(array: wp.array, values: np.ndarray) -> None:
    """``values`` into ``array``: on the CPU straight into its memory (``assign`` builds a
    temporary array first, about 45 us, and a solve writes thousands), else by ``assign``."""
    if array.device.is_cpu:
        array.numpy()[...] = values
    else:
        array.assign(values.astype(np.float64 if array.dtype == wp.vec3d else np.float32))


def inverse_3x3(m: np.ndarray) -> np.ndarray:
    """Inverses of (N, 3, 3) matrices by their adjugates (np.linalg.inv takes 20 times as
    long on a hundred blocks)."""
    c0 = np.cross(m[:, :, 1], m[:, :, 2])
    c1 = np.cross(m[:, :, 2], m[:, :, 0])
    c2 = np.cross(m[:, :, 0], m[:, :, 1])
    det = np.einsum("ni,ni->n", m[:, :, 0], c0)
    return np.stack([c0, c1, c2], axis=1) / det[:, None, None]


def solve_bounds() -> tuple[float, float, float]:
    """``SOLVE_SHARE``, ``SOLVE_TOLERANCE`` and ``SOLVE_ACCEPT``: :func:`solve_tolerance`'s
    rule, which ``adjoint_device`` applies in a kernel."""
    return SOLVE_SHARE, SOLVE_TOLERANCE, SOLVE_ACCEPT


def solve_tolerance(step_residual: float) -> float:
    """The relative residual an adjoint solve stops at for a step that ended
    ``step_residual`` (``step_residual``'s measure) from its root."""
    share, floor, ceiling = solve_bounds()
    return min(ceiling, max(floor, share * step_residual))


def solve_adjoint(
    op: StepOperator, mass_dt2: np.ndarray, rhs: np.ndarray, tolerance: float = SOLVE_TOLERANCE
) -> tuple[np.ndarray, int, float]:
    """``H^T lam = rhs`` over the free nodes (after ``op.forces()``) by BiCGStab,
    preconditioned by VBD's vertex blocks, to ``tolerance`` (``solve_tolerance``); the
    solution, the products it took and its residual relative to ``rhs`` (at most
    ``tolerance``, or ``SOLVE_ACCEPT`` where the products' noise stops it short).
    FloatingPointError where not even that is reached."""
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
        return lam, 0, 0.0
    r = rhs.copy()
    shadow = r.copy()
    rho = alpha = omega = 1.0
    v = p = np.zeros_like(rhs)
    products = 0
    best, best_residual, best_at, iterations = lam, 1.0, 0, 0
    while products < SOLVE_MAX_ITERATIONS and products - best_at < SOLVE_STALL:
        iterations += 1
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
        if np.linalg.norm(s) <= tolerance * norm:
            return lam + alpha * y, products, float(np.linalg.norm(s)) / norm
        z = precondition(s)
        t = apply(z)
        products += 1
        omega = float(np.sum(t * s)) / float(np.sum(t * t))
        lam = lam + alpha * y + omega * z
        r = s - omega * t
        if iterations % SOLVE_CHECK == 0:
            r = rhs - apply(lam)  # the true residual (the recursive one drifts from it)
            products += 1
            if float(np.linalg.norm(r)) / norm < best_residual:
                best, best_residual, best_at = lam, float(np.linalg.norm(r)) / norm, products
        if np.linalg.norm(r) <= tolerance * norm:
            return lam, products, float(np.linalg.norm(r)) / norm
    if best_residual <= SOLVE_ACCEPT:
        return best, products, best_residual
    raise not_converged(products, best_residual)


def not_converged(products: int, best_residual: float) -> FloatingPointError:
    """The error of an adjoint solve (this module's, ``adjoint_solve``'s) that ends above
    ``SOLVE_ACCEPT``: a FloatingPointError, which the fit's optimizers take as a point that
    cannot be evaluated (as a rollout that diverges) and step back from, not one that stops
    the fit."""
    return FloatingPointError(
        f"the soft-body adjoint solve did not converge in {products} products "
        f"(its best residual {best_residual:.1e} of the right-hand side: the float32 forces are "
        "too coarse for a body this stiff)"
    )
