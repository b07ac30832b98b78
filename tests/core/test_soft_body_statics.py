"""The soft body against an analytic solution of linear elasticity (Poisson ratio 0, small
strain): a bar hanging under its own weight. (The clamped cantilever against
Euler-Bernoulli needs 60,000 tets and runs in ``bench/soft_body_gpu.py`` on a GPU.)"""

from __future__ import annotations

import numpy as np
from soft_body_meshes import box_mesh

from warp_core.models.soft_body import SoftBodyParams, SoftBodySimulator

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
