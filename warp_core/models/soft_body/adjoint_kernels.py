"""Warp kernels of the soft-body adjoint (``adjoint``): the tet and ground-contact forces
Newton's VBD balances in a substep, evaluated by the very functions its solve calls (Newton
1.8: its contact law is a private name, so the version is pinned), so that their reverse-mode
products (the step's Hessian times a vector, and the forces' derivatives by the previous
positions and by the tets' materials) come from Warp's adjoint of the same code.

The tets' products come from the same force written per tet without the 3 x 3 blocks
(:func:`tet_forces_only`, in float64 ``tet_forces_only64``): Warp's reverse of Newton's
function also runs back through the 9 x 9 Hessian it builds for the blocks, six times the work
(0.40 ms against 0.065 ms a product on a 162-tet body on the CPU). In float32 the two forces
agree to rounding (a test holds them to it); the products are taken in float64, whose rounding
stays below the adjoint solve's tolerance on bodies up to about 2e7 Pa. The solve's products
by the end positions are that force's derivative written out (``tet_end_products64``, held
to Warp's reverse pass by a test): the reverse pass also replays the force and takes the
derivatives by the start positions and the materials, which only the substep's pullback
reads; on an H100 a product of a 47k-tet slab took 18.7 us written out, 38.4 us reversed."""

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


def _tet_forces_only(scalar: type, vec3: type, mat33: type) -> tuple:  # Warp kernels
    """Elastic plus damping force of a tet on its four nodes, as :func:`tet_forces` (Newton's
    stable Neo-Hookean with its Lame-to-Neo-Hookean shift and cofactor, and its damping on the
    rate of ``F^T F``), in the precision of ``scalar``: a kernel accumulating them per node,
    one writing each row's tet apart (``tangent_kernels``: rows of gathered corners, whose
    reverse products are the tets' own Jacobians), and the force's derivative by the end
    positions written out (the solve's products). Written as one first Piola stress ``P``:
    the force on corner k (1-3) is ``-P`` times row k - 1 of ``Dm^-1``, corner 0's the others'
    negated sum; Newton's damping force on a corner, summed term by term, is ``2 F S`` times
    that row, with ``S`` the rate of ``F^T F``."""

    @wp.func
    def cofactor_of(F: mat33) -> mat33:
        # Newton's compute_cofactor, entry by entry, in this precision
        return mat33(
            F[1, 1] * F[2, 2] - F[1, 2] * F[2, 1],
            F[1, 2] * F[2, 0] - F[1, 0] * F[2, 2],
            F[1, 0] * F[2, 1] - F[1, 1] * F[2, 0],
            F[0, 2] * F[2, 1] - F[0, 1] * F[2, 2],
            F[0, 0] * F[2, 2] - F[0, 2] * F[2, 0],
            F[0, 1] * F[2, 0] - F[0, 0] * F[2, 1],
            F[0, 1] * F[1, 2] - F[0, 2] * F[1, 1],
            F[0, 2] * F[1, 0] - F[0, 0] * F[1, 2],
            F[0, 0] * F[1, 1] - F[0, 1] * F[1, 0],
        )

    @wp.func
    def cofactor_polar(F: mat33, G: mat33) -> mat33:
        # the derivative of ``cofactor_of`` at F along G: each minor a b - c d of F's entries
        # gives a B + A b - c D - C d (capitals: G's), which is also its transpose map (the
        # Hessian of det F is symmetric)
        return mat33(
            F[1, 1] * G[2, 2] + G[1, 1] * F[2, 2] - F[1, 2] * G[2, 1] - G[1, 2] * F[2, 1],
            F[1, 2] * G[2, 0] + G[1, 2] * F[2, 0] - F[1, 0] * G[2, 2] - G[1, 0] * F[2, 2],
            F[1, 0] * G[2, 1] + G[1, 0] * F[2, 1] - F[1, 1] * G[2, 0] - G[1, 1] * F[2, 0],
            F[0, 2] * G[2, 1] + G[0, 2] * F[2, 1] - F[0, 1] * G[2, 2] - G[0, 1] * F[2, 2],
            F[0, 0] * G[2, 2] + G[0, 0] * F[2, 2] - F[0, 2] * G[2, 0] - G[0, 2] * F[2, 0],
            F[0, 1] * G[2, 0] + G[0, 1] * F[2, 0] - F[0, 0] * G[2, 1] - G[0, 0] * F[2, 1],
            F[0, 1] * G[1, 2] + G[0, 1] * F[1, 2] - F[0, 2] * G[1, 1] - G[0, 2] * F[1, 1],
            F[0, 2] * G[1, 0] + G[0, 2] * F[1, 0] - F[0, 0] * G[1, 2] - G[0, 0] * F[1, 2],
            F[0, 0] * G[1, 1] + G[0, 0] * F[1, 1] - F[0, 1] * G[1, 0] - G[0, 1] * F[1, 0],
        )

    @wp.func
    def deformation(v0: vec3, v1: vec3, v2: vec3, v3: vec3, dm_inv: mat33) -> mat33:
        # the corners' edges from corner 0 through Dm^-1: F of positions, G of seeds
        return wp.matrix_from_cols(v1 - v0, v2 - v0, v3 - v0) * dm_inv

    @wp.func
    def shifted_lame(mu: scalar, lmbd: scalar):
        """Newton's Neo-Hookean lambda (the Lame lambda plus mu) and its rest-stable alpha."""
        lmbd_nh = lmbd + mu
        lmbd_safe = wp.sign(lmbd_nh) * wp.max(wp.abs(lmbd_nh), scalar(1e-6))
        return lmbd_nh, scalar(1.0) + mu / lmbd_safe

    @wp.func
    def corners_of(corner: mat33):
        """The forces on corners 0-3 from ``-P Dm^-T`` (column k - 1: corner k)."""
        f1 = vec3(corner[0, 0], corner[1, 0], corner[2, 0])
        f2 = vec3(corner[0, 1], corner[1, 1], corner[2, 1])
        f3 = vec3(corner[0, 2], corner[1, 2], corner[2, 2])
        return -(f1 + f2 + f3), f1, f2, f3

    @wp.func
    def corner_forces(
        v0: vec3,
        v1: vec3,
        v2: vec3,
        v3: vec3,
        p0: vec3,
        p1: vec3,
        p2: vec3,
        p3: vec3,
        dm_inv: mat33,
        mu: scalar,
        lmbd: scalar,
        damping: scalar,
        dt: scalar,
    ):
        """The forces on corners 0-3."""
        rest_volume = scalar(1.0) / (wp.determinant(dm_inv) * scalar(6.0))
        F = deformation(v0, v1, v2, v3, dm_inv)
        lmbd_nh, alpha = shifted_lame(mu, lmbd)
        stress = rest_volume * (mu * F + lmbd_nh * (wp.determinant(F) - alpha) * cofactor_of(F))
        if damping > scalar(0.0):
            f_prev = deformation(p0, p1, p2, p3, dm_inv)
            rate = (wp.transpose(F) * F - wp.transpose(f_prev) * f_prev) / dt
            stress = stress + rest_volume * damping * scalar(2.0) * F * rate
        return corners_of(-(stress * wp.transpose(dm_inv)))

    @wp.kernel(module="unique")
    def kernel(
        x: wp.array(dtype=vec3),
        x_prev: wp.array(dtype=vec3),
        tets: wp.array2d(dtype=wp.int32),
        poses: wp.array(dtype=mat33),
        materials: wp.array2d(dtype=scalar),
        dt: scalar,
        forces: wp.array(dtype=vec3),
    ):
        t = wp.tid()
        i0, i1, i2, i3 = tets[t, 0], tets[t, 1], tets[t, 2], tets[t, 3]
        f0, f1, f2, f3 = corner_forces(
            x[i0],
            x[i1],
            x[i2],
            x[i3],
            x_prev[i0],
            x_prev[i1],
            x_prev[i2],
            x_prev[i3],
            poses[t],
            materials[t, 0],
            materials[t, 1],
            materials[t, 2],
            dt,
        )
        wp.atomic_add(forces, i0, f0)
        wp.atomic_add(forces, i1, f1)
        wp.atomic_add(forces, i2, f2)
        wp.atomic_add(forces, i3, f3)

    @wp.kernel(module="unique")
    def rows(
        x: wp.array2d(dtype=vec3),
        x_prev: wp.array2d(dtype=vec3),
        tet_of_row: wp.array(dtype=wp.int32),
        poses: wp.array(dtype=mat33),
        materials: wp.array2d(dtype=scalar),
        dt: scalar,
        forces: wp.array2d(dtype=vec3),
    ):
        r = wp.tid()
        f0, f1, f2, f3 = corner_forces(
            x[r, 0],
            x[r, 1],
            x[r, 2],
            x[r, 3],
            x_prev[r, 0],
            x_prev[r, 1],
            x_prev[r, 2],
            x_prev[r, 3],
            poses[tet_of_row[r]],
            materials[r, 0],
            materials[r, 1],
            materials[r, 2],
            dt,
        )
        forces[r, 0] = f0
        forces[r, 1] = f1
        forces[r, 2] = f2
        forces[r, 3] = f3

    @wp.kernel(module="unique")
    def end_products(
        x: wp.array(dtype=vec3),
        x_prev: wp.array(dtype=vec3),
        tets: wp.array2d(dtype=wp.int32),
        poses: wp.array(dtype=mat33),
        materials: wp.array2d(dtype=scalar),
        dt: scalar,
        seed: wp.array(dtype=vec3),
        grad: wp.array(dtype=vec3),
    ):
        """``(df/dx)^T seed`` of ``kernel`` into ``grad`` (accumulated per node), the
        derivative by the end positions only, written out instead of taken by Warp's reverse
        pass: the solve's product. With the corners' seeds as ``G = [s1 - s0, s2 - s0, s3 -
        s0] Dm^-1``, the product is the force that the stress ``(dP/dF)^T G`` would give; the
        reverse pass also replays the force and writes the start positions' and the
        materials' derivatives, which a product discards."""
        t = wp.tid()
        i0, i1, i2, i3 = tets[t, 0], tets[t, 1], tets[t, 2], tets[t, 3]
        dm_inv = poses[t]
        rest_volume = scalar(1.0) / (wp.determinant(dm_inv) * scalar(6.0))
        F = deformation(x[i0], x[i1], x[i2], x[i3], dm_inv)
        G = deformation(seed[i0], seed[i1], seed[i2], seed[i3], dm_inv)
        mu, damping = materials[t, 0], materials[t, 2]
        lmbd_nh, alpha = shifted_lame(mu, materials[t, 1])
        cofactor = cofactor_of(F)
        stress = mu * G + lmbd_nh * (
            wp.ddot(G, cofactor) * cofactor + (wp.determinant(F) - alpha) * cofactor_polar(F, G)
        )
        if damping > scalar(0.0):
            f_prev = deformation(x_prev[i0], x_prev[i1], x_prev[i2], x_prev[i3], dm_inv)
            rate = (wp.transpose(F) * F - wp.transpose(f_prev) * f_prev) / dt
            pulled = wp.transpose(F) * G
            stress = stress + damping * scalar(2.0) * (G * rate + F * (pulled + wp.transpose(pulled)) / dt)
        g0, g1, g2, g3 = corners_of(-(rest_volume * stress * wp.transpose(dm_inv)))
        wp.atomic_add(grad, i0, g0)
        wp.atomic_add(grad, i1, g1)
        wp.atomic_add(grad, i2, g2)
        wp.atomic_add(grad, i3, g3)

    return kernel, rows, end_products


# in Newton's float32, to compare with its own function; and in float64 for the adjoint's
# products: on a stiff body (eigenvalues of H over five decades) float32 products leave a
# noise above 1e-6 of the solve's right-hand side, float64 ones do not
tet_forces_only, _, _ = _tet_forces_only(wp.float32, wp.vec3, wp.mat33)
tet_forces_only64, tet_row_forces64, tet_end_products64 = _tet_forces_only(wp.float64, wp.vec3d, wp.mat33d)


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
