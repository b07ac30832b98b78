"""The soft body against analytic solutions of linear elasticity and of Kelvin-Voigt damping:
a bar hanging under its own weight and a block relaxing under it (Poisson ratio 0, small
strain), and the stress of a block strained uniformly (Poisson ratio 0.3). (The clamped
cantilever against Euler-Bernoulli needs 60,000 tets and runs in ``bench/soft_body_gpu.py``
on a GPU.)"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from soft_body_meshes import box_mesh

from warp_core.models.soft_body import SoftBodyParams, SoftBodySimulator

# the tet forces VBD's solve evaluates (its own function), on a uniformly strained lattice
from warp_core.models.soft_body.adjoint_kernels import tet_forces

RHO, G = 1000.0, 9.81


def test_a_hanging_bar_stretches_as_linear_elasticity_says() -> None:
    """A 1 m bar of 20 x 20 cm, pinned at its top face, stretches under its own weight by
    rho g L^2 / (2 E) = 4.905 mm (E = 1 MPa: at most 1 % strain, at the top).

    Lattice: 10 cells along the bar (10 cm cells, 2 x 2 across: 99 nodes, 240 tets), the
    top face's 9 nodes pinned. 10 substeps of 30 iterations per frame at 24 fps, 30
    frames, damping 1 ms: the bar is let go at rest, overshoots and settles within about
    20 frames (its first mode, 50 rad/s, is damped by the implicit steps and the damping).
    Measured: every one of the last 6 frames within 0.3 % of the analytic stretch, nodes
    below 1 mm/s. About 4 s on 2 CPU cores. At Poisson ratio 0, E = 2 mu: the 0.5 %
    tolerance fails a 1 % error in the shear modulus either way.
    """
    length, side = 1.0, 0.2
    mesh = box_mesh((0.0, 0.0, -length), (side, side, 0.0), (2, 2, 10), pin=lambda v: v[:, 2] > -1e-9)
    params = SoftBodyParams(
        young_modulus=1e6,
        poisson_ratio=0.0,
        damping=1e-3,
        density=RHO,
        substeps=10,
        iterations=30,
        lattice_cells=10,
        gravity=(0.0, 0.0, -G),
    )
    sim = SoftBodySimulator(mesh, params)
    assert sim.pinned_nodes.sum() == 9 and sim.tet_count == 240
    rollout = sim.rollout(1 + 30, keep_nodes=True)
    x = rollout.numpy()
    bottom = np.abs(mesh.vertices[:, 2] + length) < 1e-9
    stretch = -(x[:, bottom, 2].mean(axis=1) + length)
    analytic = RHO * G * length**2 / (2.0 * params.young_modulus)
    last = stretch[-6:]
    np.testing.assert_allclose(last, analytic, rtol=0.005)
    # static: the last frames agree and nothing moves (falling 1 frame from rest: 0.4 m/s)
    assert np.ptp(last) < 0.01 * analytic
    assert np.abs(rollout.node_velocities.numpy()[-1]).max() < 1e-3
    # the top stays where it was pinned
    top = mesh.vertices[:, 2] > -1e-9
    np.testing.assert_allclose(x[-1, top], mesh.vertices[top], atol=1e-6)


def test_an_overdamped_block_relaxes_at_the_rate_its_damping_time_gives() -> None:
    """The model's damping is stiffness-proportional: its viscous stress is ``tau`` times the
    rate of the elastic stress (a Kelvin-Voigt solid), so a body let go under a constant
    load creeps towards its rest shape as exp(-t / tau) whatever its stiffness or shape;
    every mode's slow rate is 1 / tau up to 1 / (tau omega)^2, here 3e-4 (omega = 248 rad/s,
    the block's first mode). Implicit Euler steps h make that exactly (1 + h / tau)^-1 a
    substep, which the reading undoes.

    A 20 cm block (2 x 2 x 2 cells, 48 tets), its top pinned, E = 1 MPa, tau = 0.25 s, let
    go at rest under gravity: the bottom's height y_k at frame k follows
    y_{k+1} = z y_k + c once the fast modes are gone (after frame 6). Measured: the damping
    time read from z is 0.07-0.11 % over tau, whichever frame the fit starts from (3, 6 or
    12); with tau 1 % higher given to Newton's k_damp, it reads 1.09 % over. About 5 s on 2
    CPU cores (100 iterations a substep: at 30, the heavily damped steps do not converge
    and the block creeps 6 times too far).
    """
    side, tau, substeps, fps = 0.2, 0.25, 4, 24.0
    mesh = box_mesh((0.0, 0.0, -side), (side, side, 0.0), (2, 2, 2), pin=lambda v: v[:, 2] > -1e-9)
    params = SoftBodyParams(
        young_modulus=1e6,
        poisson_ratio=0.0,
        damping=tau,
        density=RHO,
        substeps=substeps,
        iterations=100,
        lattice_cells=2,
        gravity=(0.0, 0.0, -G),
        fps=fps,
    )
    sim = SoftBodySimulator(mesh, params)
    x = sim.rollout(1 + 36).numpy().astype(np.float64)
    bottom = np.abs(mesh.vertices[:, 2] + side) < 1e-9
    height = x[6:, bottom, 2].mean(axis=1)
    a = np.stack([height[:-1], np.ones(len(height) - 1)], axis=1)
    z_frame = np.linalg.lstsq(a, height[1:], rcond=None)[0][0]
    substep_s = 1.0 / (fps * substeps)
    tau_read = substep_s / (z_frame ** (-1.0 / substeps) - 1.0)
    np.testing.assert_allclose(tau_read, tau, rtol=0.005)
    # it crept most of the way: 1.5 s is 6 tau
    stretch = -(x[-1, bottom, 2].mean() + side)
    np.testing.assert_allclose(stretch, RHO * G * side**2 / (2.0 * params.young_modulus), rtol=0.03)


@pytest.mark.parametrize("built_with", [0.3, 0.45])
def test_a_uniformly_strained_block_carries_the_lame_stresses(built_with: float) -> None:
    """Uniaxial strain e along z (the block's nodes moved as x + e z-hat (z - z0)): linear
    elasticity gives sigma_xx = lambda e and sigma_zz = (lambda + 2 mu) e, with
    lambda = E nu / ((1 + nu)(1 - 2 nu)) and mu = E / (2 (1 + nu)). A uniform strain is
    exact in linear tets, so the elastic forces VBD's solve evaluates for the simulator's
    tets and materials, summed over a face's nodes, are that face's traction times its area.
    Central differences over e = +-1e-3 leave the stable Neo-Hookean energy's small-strain
    limit. Measured: lambda within 2.5e-5, mu within 5e-6 (float32); a 1 % error in either
    fails the 0.1 % tolerance tenfold. ``built_with``: the Poisson ratio the simulator was
    built with before ``set_params`` set 0.3 (0.3: built so)."""
    side, strain = 0.2, 1e-3
    mesh = box_mesh((0.0, 0.0, 0.0), (side, side, side), (2, 2, 2))
    params = SoftBodyParams(young_modulus=1e6, poisson_ratio=0.3, lattice_cells=2, gravity=(0.0, 0.0, 0.0))
    sim = SoftBodySimulator(mesh, params.replace(poisson_ratio=built_with))
    sim.set_params({"poisson_ratio": 0.3})
    model = sim.scene.model
    rest = model.particle_q.numpy().astype(np.float64)
    lo, hi = rest.min(axis=0), rest.max(axis=0)
    np.testing.assert_allclose(hi - lo, side, rtol=1e-6)  # the lattice is the block
    top = np.abs(rest[:, 2] - hi[2]) < 1e-6
    x_face = np.abs(rest[:, 0] - hi[0]) < 1e-6

    def face_stresses(e: float) -> np.ndarray:
        moved = rest.copy()
        moved[:, 2] += e * (rest[:, 2] - lo[2])
        forces = wp.zeros(len(rest), dtype=wp.vec3)
        positions = wp.array(moved.astype(np.float32), dtype=wp.vec3)
        # the positions a substep started from are these too: no damping force
        wp.launch(
            tet_forces,
            dim=(model.tet_count, 4),
            inputs=[positions, positions, model.tet_indices, model.tet_poses, model.tet_materials, 1.0],
            outputs=[forces, wp.zeros(len(rest), dtype=wp.mat33)],
        )
        f = forces.numpy().astype(np.float64)
        # the elastic force on a face's nodes pulls them back: the traction is its negative
        return -np.array([f[x_face, 0].sum(), f[top, 2].sum()]) / side**2

    sigma_xx, sigma_zz = (face_stresses(strain) - face_stresses(-strain)) / (2.0 * strain)
    e_mod, nu = params.young_modulus, params.poisson_ratio
    lam = e_mod * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))
    mu = e_mod / (2.0 * (1.0 + nu))
    np.testing.assert_allclose(sigma_xx, lam, rtol=1e-3)
    np.testing.assert_allclose((sigma_zz - sigma_xx) / 2.0, mu, rtol=1e-3)
