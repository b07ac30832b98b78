"""The soft-body adjoint's device-resident path (``adjoint_device``, ``adjoint_solve``) against
its host path, forced on the CPU: the same gradients on the scenes of
``test_soft_body_adjoint`` and on a body with material maps, and the device BiCGStab alone
against ``adjoint_step.solve_adjoint`` on dense systems."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from soft_body_meshes import box_mesh, swinging_goals
from test_soft_body_adjoint import FRAMES, LOSS_FRAMES, hanging_block

from warp_core.models.soft_body import Collider, SoftBodyParams, SoftBodySimulator
from warp_core.models.soft_body.adjoint import soft_body_gradient
from warp_core.models.soft_body.adjoint_dots import DOT_TILE, Dots
from warp_core.models.soft_body.adjoint_solve import DeviceBiCGStab
from warp_core.models.soft_body.adjoint_step import (
    SOLVE_ACCEPT,
    SOLVE_STALL,
    SOLVE_TOLERANCE,
    inverse_3x3,
    solve_adjoint,
    solve_tolerance,
)

# The device path's products are the host path's kernels, but its dot products add in
# another order: 1e-16 apart, grown by BiCGStab's rounding, and where a contact's float32
# seed rounds the other way (6e-8 of that entry) the two solves part within their
# tolerance. Measured, the parameters' and the tets' largest relative differences: hanging
# 1.0e-15 and 1.6e-15, on the ground 1.4e-14 and 3.1e-13, on the moving collider 4.4e-9
# and 2.0e-9, with maps 8.9e-12 and 8.6e-13 (the maps' 1.0e-12); the same products.
AGREEMENT = 1e-7


def assert_paths_agree(sim: SoftBodySimulator, frame_end: int, frames: list[int], grads, goals=None) -> None:
    """Every parameter's derivative, the per-tet materials' and the maps' (where recorded),
    the worst step residual and the most products, host path against the forced device path."""
    found = {}
    for on_device in (False, True):
        gradient = soft_body_gradient(sim, frame_end, frames, grads, goals, device_resident=on_device)
        found[on_device] = gradient, sim.map_gradients()
    (host, host_maps), (device, device_maps) = found[False], found[True]
    assert set(device.parameters) == set(host.parameters)
    assert any(value != 0.0 for value in host.parameters.values())
    for name, value in host.parameters.items():
        assert device.parameters[name] == pytest.approx(value, rel=AGREEMENT, abs=0.0), name
    scale = np.abs(host.tet_materials).max()
    assert scale > 0.0
    assert np.abs(device.tet_materials - host.tet_materials).max() <= AGREEMENT * scale
    assert set(device_maps) == set(host_maps)
    for kind, by_weight in host_maps.items():
        difference = np.abs(device_maps[kind] - by_weight).max()
        assert difference <= AGREEMENT * np.abs(by_weight).max(), kind
    assert device.residual == pytest.approx(host.residual, rel=1e-9)
    # measured the same; where a contact's seed rounds the other way a solve may part by a product
    assert device.solve_products == pytest.approx(host.solve_products, abs=2)
    # each solve stops at its step's tolerance, the worst step's the largest
    assert 0.0 < device.solve_residual <= solve_tolerance(device.residual)


def loss_grads(sim: SoftBodySimulator, frame_end: int, frames: list[int], goals=None) -> np.ndarray:
    """d (0.5 |x - x'|^2) / dx at other values: the rollout at E, nu, damping and density off
    against the targets ``sim`` makes at its own."""
    targets = sim.rollout(frame_end, frames, goals).numpy()
    sim.set_params({"young_modulus": 1.3e4, "poisson_ratio": 0.25, "damping": 0.03, "density": 1200.0})
    return sim.rollout(frame_end, frames, goals).numpy() - targets


def test_the_device_path_agrees_hanging_from_goal_pins() -> None:
    """``test_soft_body_adjoint``'s block held by its top face, swung 5 cm (no contacts)."""
    sim, goals, targets = hanging_block()
    x = sim.rollout(1 + FRAMES, LOSS_FRAMES, goals).numpy()
    assert_paths_agree(sim, 1 + FRAMES, LOSS_FRAMES, x - targets, goals)


def test_the_device_path_agrees_dropped_on_the_ground() -> None:
    """``test_soft_body_adjoint``'s 20 cm cube dropped onto the ground (friction 0.5)."""
    mesh = box_mesh((0.0, 0.0, 0.05), (0.2, 0.2, 0.25), (2, 2, 2))
    truth = SoftBodyParams(young_modulus=2e4, damping=0.02, lattice_cells=2, iterations=40, ground=True)
    sim = SoftBodySimulator(mesh, truth)
    frames = [7, 13, 19]
    assert_paths_agree(sim, 19, frames, loss_grads(sim, 19, frames))


def test_the_device_path_agrees_on_a_moving_collider() -> None:
    """``test_soft_body_adjoint``'s cube dropped onto a plate that rises, slides and tilts:
    the contacts placed on the device at the plate's poses (rotated: a contact's point
    turns with the plate), with its velocity."""
    cube = box_mesh((-0.1, -0.1, 0.08), (0.1, 0.1, 0.28), (2, 2, 2))
    plate = box_mesh((-0.5, -0.5, -0.2), (0.5, 0.5, 0.0))
    lift = np.repeat(np.eye(4)[None], 19, axis=0)
    lift[:, 2, 3] = 0.05 + 0.003 * np.arange(19)
    lift[:, 0, 3] = 0.002 * np.arange(19)
    tilt = 0.004 * np.arange(19)  # radians about x
    lift[:, 1, 1], lift[:, 1, 2] = np.cos(tilt), -np.sin(tilt)
    lift[:, 2, 1], lift[:, 2, 2] = np.sin(tilt), np.cos(tilt)
    truth = SoftBodyParams(young_modulus=2e4, damping=0.02, lattice_cells=2, iterations=40)
    sim = SoftBodySimulator(
        cube, truth.replace(colliders=(Collider("lift", plate.vertices, plate.triangles(), lift),))
    )
    frames = [7, 13, 19]
    assert_paths_agree(sim, 19, frames, loss_grads(sim, 19, frames))


def test_the_device_path_agrees_on_painted_maps() -> None:
    """A block hanging from its top face, painted stiffer towards its bottom and more damped
    across x (12 frames): the maxima's derivatives and the maps' per vertex agree."""
    mesh = box_mesh((0.0, 0.0, -0.3), (0.2, 0.2, 0.0), (2, 2, 3), pin=lambda v: v[:, 2] > -1e-9)
    mesh.young_modulus_weight = 0.2 + 0.6 * np.clip(-mesh.vertices[:, 2] / 0.3, 0.0, 1.0)
    mesh.damping_weight = 0.2 + 0.6 * np.clip(mesh.vertices[:, 0] / 0.2, 0.0, 1.0)
    truth = SoftBodyParams(
        young_modulus=2e4,
        young_modulus_max=6e4,
        damping=0.02,
        damping_max=0.05,
        lattice_cells=3,
        iterations=60,
    )
    goals = swinging_goals(mesh, 12, 0.05, 2.0)
    sim = SoftBodySimulator(mesh, truth)
    sim.record_maps(["stiffness", "damping"])
    frames = [5, 9, 13]
    assert_paths_agree(sim, 13, frames, loss_grads(sim, 13, frames, goals), goals)


@wp.kernel
def _dense_product(
    matrix: wp.array2d(dtype=wp.mat33d), x: wp.array(dtype=wp.vec3d), out: wp.array(dtype=wp.vec3d)
):
    i = wp.tid()
    total = wp.vec3d()
    for j in range(x.shape[0]):
        total = total + matrix[i, j] * x[j]
    out[i] = total


@wp.kernel
def _dense_product32(
    mass_dt2: wp.array(dtype=wp.float64),
    k: wp.array2d(dtype=wp.mat33),
    x: wp.array(dtype=wp.vec3d),
    out: wp.array(dtype=wp.vec3d),
):
    # diag(mass_dt2) x - K x with K x in float32, as the contacts' products are
    i = wp.tid()
    total = wp.vec3()
    for j in range(x.shape[0]):
        total = total + k[i, j] * wp.vec3(x[j])
    out[i] = mass_dt2[i] * x[i] - wp.vec3d(total)


class DenseSystem:
    """``A lam = rhs`` with ``A = diag(mass_dt2) - K`` for both solves: ``solve_adjoint``'s
    operator (``free``, ``blocks``, ``product``: ``K p``) and the device solve's product
    and preconditioner (the same inverses); ``float32``: ``K p`` in float32 on both."""

    def __init__(self, k: np.ndarray, mass_dt2: np.ndarray, float32: bool = False) -> None:
        n = len(mass_dt2)
        self.k, self.mass_dt2, self.free, self.float32 = k, mass_dt2, np.ones(n, dtype=bool), float32
        self.a = np.diag(np.repeat(mass_dt2, 3)) - k
        blocked = lambda m: m.reshape(n, 3, n, 3).transpose(0, 2, 1, 3).copy()  # noqa: E731
        self.matrix = wp.array(blocked(self.a), dtype=wp.mat33d)
        self.k32 = wp.array(blocked(k).astype(np.float32), dtype=wp.mat33)
        self.mass = wp.array(mass_dt2, dtype=wp.float64)
        blocks = mass_dt2[:, None, None] * np.eye(3) + self.blocks()
        self.inverse = wp.array(inverse_3x3(np.transpose(blocks, (0, 2, 1))), dtype=wp.mat33d)

    def blocks(self) -> np.ndarray:
        n = len(self.mass_dt2)
        return -np.stack([self.k[3 * i : 3 * i + 3, 3 * i : 3 * i + 3].T for i in range(n)])

    def product(self, p: np.ndarray) -> np.ndarray:
        if self.float32:
            return (
                (self.k.astype(np.float32) @ p.ravel().astype(np.float32)).astype(np.float64).reshape(-1, 3)
            )
        return (self.k @ p.ravel()).reshape(-1, 3)

    def apply(self, x: wp.array, out: wp.array) -> None:
        if self.float32:
            wp.launch(
                _dense_product32, dim=len(self.mass_dt2), inputs=[self.mass, self.k32, x], outputs=[out]
            )
        else:
            wp.launch(_dense_product, dim=len(self.mass_dt2), inputs=[self.matrix, x], outputs=[out])

    def device_solver(self, graphs: bool = True) -> DeviceBiCGStab:
        return DeviceBiCGStab(self.apply, self.inverse, graphs=graphs)


def test_the_device_solve_is_the_host_solve_on_a_well_conditioned_system() -> None:
    """A random unsymmetric system of 40 nodes: the device solve takes the host solve's
    products, reaches the tolerance and the host's solution to rounding (measured: 14
    products, 1e-15 apart), the same bits with its batches launched one by one as replayed
    from a graph; a zero right-hand side takes none."""
    rng = np.random.default_rng(7)
    n = 40
    system = DenseSystem(0.3 * rng.standard_normal((3 * n, 3 * n)) / np.sqrt(3 * n), 1.0 + rng.random(n))
    rhs = rng.standard_normal((n, 3))
    expected, host_products, host_residual = solve_adjoint(system, system.mass_dt2, rhs)
    solver = system.device_solver()
    lam, products, residual = solver.solve(wp.array(rhs, dtype=wp.vec3d))
    lam = lam.numpy()
    assert products == host_products and products > 4
    assert residual == pytest.approx(host_residual, rel=1e-6)
    true_residual = np.linalg.norm(system.a @ lam.ravel() - rhs.ravel()) / np.linalg.norm(rhs)
    assert true_residual <= SOLVE_TOLERANCE
    assert np.abs(lam - expected).max() <= 1e-12 * np.abs(expected).max()
    launched, _, _ = system.device_solver(graphs=False).solve(wp.array(rhs, dtype=wp.vec3d))
    assert np.array_equal(launched.numpy(), lam)
    lam, products, residual = solver.solve(wp.zeros(n, dtype=wp.vec3d))
    assert (products, residual) == (0, 0.0)
    assert not lam.numpy().any()


def test_the_device_solve_refuses_a_system_it_cannot_solve() -> None:
    """A singular system whose right-hand side leaves its range: no iterate comes within
    SOLVE_ACCEPT, both solves stop once SOLVE_STALL products bring no better one and raise
    (measured: 100 products, best 1.0)."""
    rng = np.random.default_rng(1)
    n = 30
    mass_dt2 = 1.0 + rng.random(n)
    u, _ = np.linalg.qr(rng.standard_normal((3 * n, 3 * n)))
    v, _ = np.linalg.qr(rng.standard_normal((3 * n, 3 * n)))
    singular = np.linspace(1.0, 3.0, 3 * n)
    singular[-1] = 0.0
    a = u @ np.diag(singular) @ v.T
    system = DenseSystem(np.diag(np.repeat(mass_dt2, 3)) - a, mass_dt2)
    rhs = (a @ rng.standard_normal(3 * n) + 2.0 * u[:, -1]).reshape(n, 3)
    with pytest.raises(FloatingPointError, match="did not converge") as host:
        solve_adjoint(system, mass_dt2, rhs)
    with pytest.raises(FloatingPointError, match="did not converge") as device:
        system.device_solver().solve(wp.array(rhs, dtype=wp.vec3d))
    assert str(device.value) == str(host.value)


def test_the_device_solve_takes_its_best_iterate_where_the_products_are_too_coarse() -> None:
    """A system of eigenvalues over three decades whose products are float32: the true
    residual bottoms out between SOLVE_TOLERANCE and SOLVE_ACCEPT, and both solves give their
    best iterate, its residual reported (measured: host 478 products, 1.7e-5; device 501,
    1.4e-5: the float32 rounding parts their paths)."""
    rng = np.random.default_rng(1)
    n = 30
    mass_dt2 = 1.0 + rng.random(n)
    u, _ = np.linalg.qr(rng.standard_normal((3 * n, 3 * n)))
    v, _ = np.linalg.qr(rng.standard_normal((3 * n, 3 * n)))
    spread = np.diag(np.logspace(0.0, 3.0, 3 * n))
    a = u @ spread @ u.T + 0.1 * (u @ spread @ v.T)
    system = DenseSystem(np.diag(np.repeat(mass_dt2, 3)) - a, mass_dt2, float32=True)
    rhs = rng.standard_normal((n, 3))
    for lam, products, residual in (
        solve_adjoint(system, mass_dt2, rhs),
        system.device_solver().solve(wp.array(rhs, dtype=wp.vec3d)),
    ):
        lam = np.asarray(lam.numpy() if isinstance(lam, wp.array) else lam)
        assert SOLVE_TOLERANCE < residual <= SOLVE_ACCEPT
        assert products >= SOLVE_STALL  # it stopped for want of a better iterate
        true_residual = np.linalg.norm(a @ lam.ravel() - rhs.ravel()) / np.linalg.norm(rhs)
        assert true_residual == pytest.approx(residual, rel=0.5)


def test_dot_products_by_tiles_and_in_turn_are_the_sum() -> None:
    """The solve's dot products both ways (tiles on CUDA, one thread in turn on the CPU; here
    both on the CPU), over one block and over several with a partial last one, against numpy's
    to rounding; each into its own slot; a pair ``a . b``, ``a . c`` the same bits as each
    taken alone."""
    rng = np.random.default_rng(3)
    for length in (5, 2 * DOT_TILE + 17):
        a, b, c = (wp.array(rng.standard_normal((length, 3)), dtype=wp.vec3d) for _ in range(3))
        expected = float(np.sum(a.numpy() * b.numpy()))
        for tiles in (True, False):
            dots = Dots(length, 4, "cpu", tiles=tiles)
            assert dots.blocks == -(-length // DOT_TILE)
            dots(a, b, 1)
            values = dots.values.numpy()
            assert values[1] == pytest.approx(expected, rel=1e-12, abs=1e-12)
            assert values[0] == values[2] == values[3] == 0.0
            dots(a, c, 2)
            alone = dots.values.numpy().copy()
            dots.values.zero_()
            dots.pair(a, b, 3, c, 0)
            paired = dots.values.numpy()
            assert (paired[3], paired[0]) == (alone[1], alone[2])
            assert paired[1] == paired[2] == 0.0
