"""The soft-body adjoint's linear solve on a small body (``adjoint``): the substep's matrix
``H^T`` assembled whole and solved directly, instead of BiCGStab's products.

Each tet's force depends on its own four nodes only, each contact's on its own node: so
the tet kernel run on a copy of every tet's corners (a local array in which no two tets share
a node) gives, from one reverse launch per local coordinate (12), every tet's 12 x 12 block
of ``df/dx'`` at once; the contact kernel likewise gives every contact's 3 x 3 block from 3.
The blocks are summed into a dense matrix over the free nodes' coordinates and solved by
LU. Below :data:`DIRECT_MAX_UNKNOWNS` that takes less time than the 20-40 products a
substep's BiCGStab takes to 1e-6 (each a reverse launch of every force), and it is exact
to float64 rounding of the float32 blocks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from .adjoint_kernels import contact_forces, tet_forces_only
from .adjoint_step import StepOperator

__all__ = ["DIRECT_MAX_UNKNOWNS", "DirectSolve"]

# free coordinates up to which the adjoint solves directly. Measured on a cube dropped on the
# ground (2-core CPU, 24 frames; gradient seconds, direct against BiCGStab): 192 unknowns
# 0.34 / 0.52, 375 0.72 / 0.75, 648 1.78 / 1.37, 1029 9.6 / 2.2 (the LU grows as the cube)
DIRECT_MAX_UNKNOWNS = 400


class DirectSolve:
    """``H^T lam = rhs`` for one substep at a time, ``H`` assembled from the forces' blocks:
    made by ``adjoint.backward`` for a body with at most :data:`DIRECT_MAX_UNKNOWNS` free
    coordinates. ``sim``: a SoftBodySimulator."""

    def __init__(self, sim: Any, dt: float) -> None:
        model, d = sim.scene.model, sim.device
        self.device, self.dt = d, dt
        self.tets = sim.lattice.tets.astype(np.int64)  # (T, 4) global node of each corner
        t = len(self.tets)
        local_tets = wp.array(np.arange(4 * t, dtype=np.int32).reshape(t, 4), dtype=wp.int32, device=d)
        self.x_end, self.x_start, out, grad_start = (
            wp.zeros(4 * t, dtype=wp.vec3, device=d) for _ in range(4)
        )
        grad_materials = wp.zeros_like(model.tet_materials)
        inputs = [self.x_end, self.x_start, local_tets, model.tet_poses, model.tet_materials, dt]
        # one reverse launch per local coordinate j: its seed picks coordinate j of every tet's
        # force, its gradient is row j of every tet's block
        self.grads, self.launches = [], []
        for j in range(12):
            unit = np.zeros((t, 4, 3), np.float32)
            unit[:, j // 3, j % 3] = 1.0
            seed = wp.array(unit.reshape(-1, 3), dtype=wp.vec3, device=d)
            grad = wp.zeros(4 * t, dtype=wp.vec3, device=d)
            self.grads.append(grad)
            self.launches.append(
                wp.launch(
                    tet_forces_only,
                    dim=t,
                    inputs=inputs,
                    outputs=[out],
                    adj_inputs=[grad, grad_start, None, None, grad_materials, 0.0],
                    adj_outputs=[seed],
                    adjoint=True,
                    device=d,
                    record_cmd=True,
                )
            )
        self.radius = model.particle_radius.numpy()
        free = ~sim.pinned_nodes
        self.free_dofs = np.flatnonzero(np.repeat(free, 3))
        self.dofs = 3 * len(free)
        # where each entry of each tet's block goes in the flattened global matrix
        corner_dofs = (3 * self.tets[:, :, None] + np.arange(3)).reshape(t, 12)
        self.tet_entries = (corner_dofs[:, :, None] * self.dofs + corner_dofs[:, None, :]).ravel()

    def _tet_blocks(self, x_end: np.ndarray, x_start: np.ndarray) -> np.ndarray:
        """(T, 12, 12): row j of tet t's block is d (its force's coordinate j) / d (its corners)."""
        t = len(self.tets)
        self.x_end.assign(x_end[self.tets].reshape(-1, 3).astype(np.float32))
        self.x_start.assign(x_start[self.tets].reshape(-1, 3).astype(np.float32))
        for grad, launch in zip(self.grads, self.launches, strict=True):
            grad.zero_()
            launch.launch()
        return np.stack([grad.numpy().reshape(t, 12) for grad in self.grads], axis=1)

    def _contact_blocks(self, op: StepOperator, x_end: np.ndarray, x_start: np.ndarray) -> np.ndarray:
        """(C, 3, 3): each contact's d (its force) / d (its node's end position), the contact
        records as ``op`` (at this substep) holds them."""
        d, n = self.device, len(op.contact_grads[0])
        nodes = op.contacts[1].numpy()
        x = wp.array(x_end[nodes].astype(np.float32), dtype=wp.vec3, device=d)
        x_prev = wp.array(x_start[nodes].astype(np.float32), dtype=wp.vec3, device=d)
        local = wp.array(np.arange(n, dtype=np.int32), dtype=int, device=d)
        radius = wp.array(self.radius[nodes], dtype=float, device=d)
        # op.contacts: count, nodes, shapes, body_pos, body_vel, normals, ke, kd, mu, radius, ...
        inputs = [x, x_prev, op.contacts[0], local, *op.contacts[2:9], radius, *op.contacts[10:]]
        outputs = [wp.zeros(n, dtype=wp.vec3, device=d), wp.zeros(n, dtype=wp.mat33, device=d)]
        seed, grad = wp.zeros(n, dtype=wp.vec3, device=d), wp.zeros(n, dtype=wp.vec3, device=d)
        blocks = np.empty((n, 3, 3))
        for k in range(3):
            unit = np.zeros((n, 3), np.float32)
            unit[:, k] = 1.0
            seed.assign(unit)
            grad.zero_()
            wp.launch(
                contact_forces,
                dim=n,
                inputs=inputs,
                outputs=outputs,
                adj_inputs=[grad, *[None] * 14],
                adj_outputs=[seed, None],
                adjoint=True,
                device=d,
            )
            blocks[:, k, :] = grad.numpy()
        return blocks

    def solve(
        self, op: StepOperator, x_end: np.ndarray, x_start: np.ndarray, mass_dt2: np.ndarray, rhs: np.ndarray
    ) -> np.ndarray:
        """``lam`` with ``H^T lam = rhs`` on the free nodes (0 on the pinned), ``H = M / dt^2 -
        df/dx'`` at the substep's end positions ``x_end`` from ``x_start``, with the contacts
        ``op`` was placed at (:meth:`StepOperator.at`)."""
        size = self.dofs * self.dofs
        blocks = self._tet_blocks(x_end, x_start).ravel()
        jacobian = np.bincount(self.tet_entries, weights=blocks, minlength=size)  # df/dx', flat
        if op.contacts is not None:
            node_dofs = 3 * op.contacts[1].numpy().astype(np.int64)[:, None] + np.arange(3)
            entries = (node_dofs[:, :, None] * self.dofs + node_dofs[:, None, :]).ravel()
            contact = self._contact_blocks(op, x_end, x_start).ravel()
            jacobian += np.bincount(entries, weights=contact, minlength=size)
        jacobian = jacobian.reshape(self.dofs, self.dofs)
        free = self.free_dofs
        matrix = np.diag(np.repeat(mass_dt2, 3)[free]) - jacobian[np.ix_(free, free)].T
        lam = np.zeros(self.dofs)
        lam[free] = np.linalg.solve(matrix, rhs.reshape(-1)[free])
        return lam.reshape(-1, 3)
