"""One substep of the soft body's forward tangents (``tangent``): the step's force Jacobians
as numbers, and the linear solve ``H dx' = b`` for every direction at once.

The tets' Jacobians are read, exactly, from reverse-mode products of the float64 force
written one tet a row (``adjoint_kernels.tet_row_forces64``): each tet takes twelve rows,
each a copy of its corners seeded with one of its twelve force components, so one launch
gives every tet's ``df/dx'``, ``df/dx`` (12 x 12) and ``df/dmaterials`` (12 x 3). The
contacts' come from ``StepOperator.contact_jacobians``. With the blocks at hand a product
``H p`` is a gather, a batched 12 x 12 product and a sum per node, in numpy: on the CPU,
where a body of a few hundred tets is bound by kernel launches, no launch per product.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import warp as wp

from .adjoint_kernels import tet_row_forces64
from .adjoint_step import (
    SOLVE_ACCEPT,
    SOLVE_CHECK,
    SOLVE_MAX_ITERATIONS,
    SOLVE_TOLERANCE,
    fill_array,
    inverse_3x3,
    not_converged,
)

__all__ = ["StepJacobians", "TetJacobians", "solve_tangents"]

ROWS = 12  # a tet's force components: 4 corners x 3 axes


@dataclass
class StepJacobians:
    """The forces' derivatives in one substep, around its end positions: made by
    :meth:`TetJacobians.at` (and the contacts' by ``StepOperator.contact_jacobians``), read
    by :func:`solve_tangents` and ``tangent``. Rows are force components, columns what
    they are derived by."""

    tets: np.ndarray  # (T, 4) corner nodes
    end: np.ndarray  # (T, 12, 12) df/dx' of each tet's corners
    start: np.ndarray  # (T, 12, 12) df/dx (the damping's rate)
    materials: np.ndarray  # (T, 12, 3) df/d(k_mu, k_lambda, k_damp)
    # the contacts' per node: df/dx', df/dx ((N, 3, 3)) and df/dlog ke ((N, 3)); None: none
    contacts: tuple[np.ndarray, np.ndarray, np.ndarray] | None

    def gather(self, p: np.ndarray) -> np.ndarray:
        """(N, 3, D) node vectors -> (T, 12, D) each tet's corners."""
        return p[self.tets].reshape(len(self.tets), ROWS, -1)


class TetJacobians:
    """Every tet's force Jacobians at a substep's positions, by one reverse launch over
    twelve rows a tet; its arrays are reused from substep to substep. ``sim``: a
    SoftBodySimulator."""

    def __init__(self, sim: Any, dt: float) -> None:
        model = sim.scene.model
        d = self.device = sim.device
        self.tets = model.tet_indices.numpy().astype(np.int64)
        count = len(self.tets)
        rows = count * ROWS
        self.x_end, self.x_start, out, self.grad_end, self.grad_start = (
            wp.zeros((rows, 4), dtype=wp.vec3d, device=d) for _ in range(5)
        )
        self.materials = wp.zeros((rows, 3), dtype=wp.float64, device=d)
        self.grad_materials = wp.zeros_like(self.materials)
        # row 12 t + 3 k + a of tet t seeds its corner k's force along axis a
        seed = np.zeros((count, ROWS, 4, 3))
        for j in range(ROWS):
            seed[:, j, j // 3, j % 3] = 1.0
        seed_rows = wp.array(seed.reshape(rows, 4, 3), dtype=wp.vec3d, device=d)
        tet_of_row = wp.array(np.repeat(np.arange(count), ROWS).astype(np.int32), dtype=wp.int32, device=d)
        poses = wp.array(model.tet_poses.numpy().astype(np.float64), dtype=wp.mat33d, device=d)
        self.launch = wp.launch(
            tet_row_forces64,
            dim=rows,
            inputs=[self.x_end, self.x_start, tet_of_row, poses, self.materials, float(dt)],
            outputs=[out],
            adj_inputs=[self.grad_end, self.grad_start, None, None, self.grad_materials, 0.0],
            adj_outputs=[seed_rows],
            adjoint=True,
            device=d,
            record_cmd=True,
        )

    def at(self, x_end: np.ndarray, x_start: np.ndarray, materials: np.ndarray) -> StepJacobians:
        """The tets' Jacobians at end and start positions ((N, 3)) and materials ((T, 3));
        the contacts' are the caller's to add."""
        for array, values in ((self.x_end, x_end), (self.x_start, x_start)):
            fill_array(array, np.repeat(values[self.tets], ROWS, axis=0))
        fill_array(self.materials, np.repeat(materials, ROWS, axis=0))
        for a in (self.grad_end, self.grad_start, self.grad_materials):
            a.zero_()
        self.launch.launch()
        count = len(self.tets)
        return StepJacobians(
            self.tets,
            self.grad_end.numpy().reshape(count, ROWS, ROWS),
            self.grad_start.numpy().reshape(count, ROWS, ROWS),
            self.grad_materials.numpy().reshape(count, ROWS, 3),
            None,
        )


class NodeSums:
    """Sums of the tets' corner rows per node: the transpose of ``StepJacobians.gather``."""

    def __init__(self, tets: np.ndarray, nodes: int) -> None:
        corners = tets.ravel()
        self.order = np.argsort(corners, kind="stable")
        self.nodes, self.starts = np.unique(corners[self.order], return_index=True)
        self.count = nodes

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        """(T, 12, D) -> (N, 3, D)."""
        d = rows.shape[-1]
        flat = rows.reshape(-1, 3 * d)[self.order]
        out = np.zeros((self.count, 3 * d))
        out[self.nodes] = np.add.reduceat(flat, self.starts, axis=0)
        return out.reshape(self.count, 3, d)


def force_product(jac: StepJacobians, sums: NodeSums, p: np.ndarray, start: bool = False) -> np.ndarray:
    """``df/dx' p`` (or ``df/dx p`` with ``start``) of (N, 3, D) node vectors."""
    blocks = jac.start if start else jac.end
    out = sums(np.matmul(blocks, jac.gather(p)))  # batched matmul: einsum takes 20x as long here
    if jac.contacts is not None:
        out += np.matmul(jac.contacts[1 if start else 0], p)
    return out


def diagonal_blocks(jac: StepJacobians, nodes: int) -> np.ndarray:
    """The 3 x 3 blocks of ``df/dx'`` on the diagonal ((N, 3, 3)): each tet's corner blocks
    and the contacts'."""
    out = np.zeros((nodes, 3, 3))
    for k in range(4):
        block = jac.end[:, 3 * k : 3 * k + 3, 3 * k : 3 * k + 3]
        np.add.at(out, jac.tets[:, k], block)
    if jac.contacts is not None:
        out += jac.contacts[0]
    return out


def solve_tangents(
    jac: StepJacobians, sums: NodeSums, mass_dt2: np.ndarray, free: np.ndarray, rhs: np.ndarray
) -> tuple[np.ndarray, int]:
    """``H dx' = rhs`` over the free nodes for every column of ``rhs`` ((N, 3, D)), ``H = M /
    dt^2 - df/dx'``, by BiCGStab (friction and the damping's rate make ``H`` unsymmetric)
    preconditioned by its diagonal 3 x 3 blocks; each column its own scalars. The solution
    and the products it took; FloatingPointError where a column ends above ``SOLVE_ACCEPT``."""
    nodes = len(mass_dt2)
    mask = free[:, None, None]
    blocks = mass_dt2[:, None, None] * np.eye(3) - diagonal_blocks(jac, nodes)
    blocks[~free] = np.eye(3)
    inverse = inverse_3x3(blocks)

    def apply(p: np.ndarray) -> np.ndarray:
        p = np.where(mask, p, 0.0)
        return np.where(mask, mass_dt2[:, None, None] * p - force_product(jac, sums, p), 0.0)

    def precondition(r: np.ndarray) -> np.ndarray:
        return np.matmul(inverse, r)

    def dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.einsum("nkd,nkd->d", a, b)

    rhs = np.where(mask, rhs, 0.0)
    norm = np.sqrt(dot(rhs, rhs))
    scale = np.where(norm > 0.0, norm, 1.0)
    x = np.zeros_like(rhs)
    r = rhs.copy()
    shadow = r.copy()
    d = rhs.shape[-1]
    rho, alpha, omega = np.ones(d), np.ones(d), np.ones(d)
    v = p = np.zeros_like(rhs)
    products = iterations = 0
    while products < SOLVE_MAX_ITERATIONS:
        iterations += 1
        residual = np.sqrt(dot(r, r)) / scale
        if (residual <= SOLVE_TOLERANCE).all():
            return x, products
        rho_next = dot(shadow, r)
        safe = np.where(rho_next == 0.0, 1.0, rho_next)
        p = r + (safe / rho * alpha / omega) * (p - omega * v)
        rho = safe
        y = precondition(p)
        v = apply(y)
        shadow_v = dot(shadow, v)
        alpha = rho / np.where(shadow_v == 0.0, 1.0, shadow_v)
        s = r - alpha * v
        z = precondition(s)
        t = apply(z)
        products += 2
        tt = dot(t, t)
        omega = np.where(tt > 0.0, dot(t, s) / np.where(tt > 0.0, tt, 1.0), 1.0)
        done = residual <= SOLVE_TOLERANCE  # converged columns stay as they are
        x = np.where(done, x, x + alpha * y + omega * z)
        r = np.where(done, r, s - omega * t)
        if iterations % SOLVE_CHECK == 0:
            r = np.where(done, r, rhs - apply(x))  # the true residual (the recursive one drifts)
            products += 1
    r = rhs - apply(x)
    residual = float((np.sqrt(dot(r, r)) / scale).max())
    if residual <= SOLVE_ACCEPT:
        return x, products
    raise not_converged(products, residual)
