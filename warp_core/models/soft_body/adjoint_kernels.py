"""Warp kernels of the soft-body adjoint (``adjoint``): the tet and ground-contact forces
Newton's VBD balances in a substep, evaluated by the very functions its solve calls (Newton
1.8: its contact law is a private name, so the version is pinned), so that their reverse-mode
products (the step's Hessian times a vector, and the forces' derivatives by the previous
positions and by the tets' materials) come from Warp's adjoint of the same code."""

import warp as wp

# the per-tet elastic and damping force (and the vertex's 3x3 block) VBD's solve evaluates
from newton._src.solvers.vbd.particle_vbd_kernels import (
    evaluate_volumetric_neo_hookean_force_and_hessian as tet_force_and_hessian,
)

# the body-particle contact's force law (penalty, damping, friction) VBD's gather evaluates
from newton._src.solvers.vbd.rigid_vbd_kernels import (
    _compute_body_particle_contact_force as contact_force_and_hessian,
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
    blocks: wp.array(dtype=wp.mat33),
):
    """Elastic plus damping force of tet t on its corner's node, and that node's 3x3 block of
    the force Jacobian VBD's vertex solve uses (exact for the elasticity, Gauss-Newton for
    the damping: the adjoint's preconditioner), accumulated per node."""
    t, corner = wp.tid()
    force, block = tet_force_and_hessian(
        t, corner, x_prev, x, tets, poses[t], materials[t, 0], materials[t, 1], materials[t, 2], dt
    )
    wp.atomic_add(forces, tets[t, corner], force)
    wp.atomic_add(blocks, tets[t, corner], block)


@wp.kernel
def contact_forces(
    x: wp.array(dtype=wp.vec3),
    x_prev: wp.array(dtype=wp.vec3),
    count: wp.array(dtype=int),
    particles: wp.array(dtype=int),
    shapes: wp.array(dtype=int),
    body_pos: wp.array(dtype=wp.vec3),
    body_vel: wp.array(dtype=wp.vec3),
    normals: wp.array(dtype=wp.vec3),
    ke: wp.array(dtype=float),
    kd: wp.array(dtype=float),
    mu: wp.array(dtype=float),
    radius: wp.array(dtype=float),
    margin: wp.array(dtype=float),
    friction_epsilon: float,
    dt: float,
    forces: wp.array(dtype=wp.vec3),
    blocks: wp.array(dtype=wp.mat33),
):
    """Force (and 3x3 block) of contact c on its node, as VBD's contact gather evaluates it:
    a quadratic penalty on the penetration of the node's radius past the contact plane
    (through ``body_pos``, the surface point found at the substep's start placed at its
    body's end pose), damping while approaching, smoothed Coulomb friction on the slip
    relative to the surface (``body_vel``: its velocity over the substep)."""
    c = wp.tid()
    if c >= count[0]:
        return
    i = particles[c]
    n = normals[c]
    distance = wp.dot(n, x[i] - body_pos[c])
    collision_radius = radius[i] + margin[shapes[c]]
    if collision_radius - distance > 0.0:
        slip = (x[i] - x_prev[i]) - body_vel[c] * dt
        force, block = contact_force_and_hessian(
            distance, collision_radius, n, slip, ke[c], kd[c], mu[c], friction_epsilon, dt, False
        )
        wp.atomic_add(forces, i, force)
        wp.atomic_add(blocks, i, block)
