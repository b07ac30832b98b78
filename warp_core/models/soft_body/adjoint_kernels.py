"""Warp kernels of the soft-body adjoint (``adjoint``): the tet forces Newton's VBD balances
in a substep, evaluated by the very function its solve calls, so that their reverse-mode
products (the step's Hessian times a vector, and the forces' derivatives by the previous
positions and by the tets' materials) come from Warp's adjoint of the same code."""

import warp as wp

# the per-tet elastic and damping force (and the vertex's 3x3 block) VBD's solve evaluates
from newton._src.solvers.vbd.particle_vbd_kernels import (
    evaluate_volumetric_neo_hookean_force_and_hessian as tet_force_and_hessian,
)


@wp.kernel
def tet_forces(
    x: wp.array(dtype=wp.vec3),
    x_prev: wp.array(dtype=wp.vec3),
    tets: wp.array2d(dtype=wp.int32),
    poses: wp.array(dtype=wp.mat33),
    materials: wp.array2d(dtype=float),
    dt: float,
    forces: wp.array(dtype=wp.vec3),
):
    """Elastic plus damping force of tet t on its corner's node (accumulated per node)."""
    t, corner = wp.tid()
    force, _block = tet_force_and_hessian(
        t, corner, x_prev, x, tets, poses[t], materials[t, 0], materials[t, 1], materials[t, 2], dt
    )
    wp.atomic_add(forces, tets[t, corner], force)


@wp.kernel
def tet_blocks(
    x: wp.array(dtype=wp.vec3),
    x_prev: wp.array(dtype=wp.vec3),
    tets: wp.array2d(dtype=wp.int32),
    poses: wp.array(dtype=wp.mat33),
    materials: wp.array2d(dtype=float),
    dt: float,
    blocks: wp.array(dtype=wp.mat33),
):
    """The 3x3 diagonal blocks of the tets' force Jacobian VBD's vertex solve uses (exact
    for the elasticity, Gauss-Newton for the damping): the adjoint's preconditioner."""
    t, corner = wp.tid()
    _force, block = tet_force_and_hessian(
        t, corner, x_prev, x, tets, poses[t], materials[t, 0], materials[t, 1], materials[t, 2], dt
    )
    wp.atomic_add(blocks, tets[t, corner], block)
