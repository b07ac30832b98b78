"""The soft body's implicit-function adjoint (``warp_core.models.soft_body.adjoint``) against
central differences of whole rollouts, with VBD run until each step converges."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import warp as wp
from soft_body_meshes import box_mesh, sphere_mesh

from warp_core.fit import FitProblem, FitSettings, Target, fit
from warp_core.fit.optimizers.base import EVALUATION_ERRORS
from warp_core.models.soft_body import Collider, SoftBodyParams, SoftBodySimulator, adjoint_step
from warp_core.models.soft_body.adjoint import soft_body_gradient
from warp_core.models.soft_body.adjoint_kernels import (
    tet_end_products64,
    tet_forces,
    tet_forces_only,
    tet_forces_only64,
)

FRAMES = 30
LOSS_FRAMES = [11, 21, 31]  # frames 10, 20 and 30 after the start


def hanging_block() -> tuple[SoftBodySimulator, np.ndarray, np.ndarray]:
    """A 20 x 20 x 30 cm block (2 x 2 x 3 cells, 72 tets) held by its top face, the hold
    swinging 5 cm sideways over 30 frames; targets made at other values."""
    mesh = box_mesh((0.0, 0.0, -0.3), (0.2, 0.2, 0.0), (2, 2, 3), pin=lambda v: v[:, 2] > -1e-9)
    truth = SoftBodyParams(
        young_modulus=2e4, poisson_ratio=0.3, damping=0.02, density=1000.0, lattice_cells=3, iterations=60
    )
    goals = np.repeat(mesh.vertices[None], FRAMES + 1, axis=0)
    goals[:, :, 0] += 0.05 * np.sin(np.linspace(0.0, 3.0, FRAMES + 1))[:, None]
    sim = SoftBodySimulator(mesh, truth)
    targets = sim.rollout(1 + FRAMES, LOSS_FRAMES, goals).numpy()
    sim.set_params({"young_modulus": 1.3e4, "poisson_ratio": 0.25, "damping": 0.03, "density": 1200.0})
    return sim, goals, targets


def central_slopes(loss: Callable[[dict[str, float]], float], start: dict[str, float]) -> dict[str, float]:
    """d loss / d each parameter of ``start`` by central differences at +-1 % of its value."""
    slopes = {}
    for name, value in start.items():
        h = 0.01 * value
        slopes[name] = (loss({**start, name: value + h}) - loss({**start, name: value - h})) / (2.0 * h)
    return slopes


def test_the_adjoint_matches_central_differences_of_the_rollout() -> None:
    """Loss 0.5 |x - target|^2 over three frames of 30; central differences at +-1 % of each
    parameter. 60 VBD iterations a substep bring every step's residual to the float32 floor
    (7e-5 of its inertia term; 300 iterations leave the same). Measured: E, nu, damping
    time and density within 4.5e-4 of the differences; 13 CG iterations a substep. The
    per-tet materials' gradient, summed over the lower half, gives that region's stiffness within
    1.8e-4."""
    sim, goals, targets = hanging_block()
    start = sim.param_values()

    def loss(values: dict[str, float]) -> tuple[float, np.ndarray]:
        sim.set_params(values)
        x = sim.rollout(1 + FRAMES, LOSS_FRAMES, goals).numpy()
        return 0.5 * float(np.sum((x - targets) ** 2)), x

    _, x = loss(start)
    gradient = soft_body_gradient(sim, 1 + FRAMES, LOSS_FRAMES, x - targets, goals)
    assert gradient.residual < 2e-4
    assert 0 < gradient.solve_products < 100
    for name, slope in central_slopes(lambda values: loss(values)[0], start).items():
        assert gradient.parameters[name] == pytest.approx(slope, rel=1e-3), name

    sim.set_params(start)
    assert_region_slope(sim, gradient.tet_materials, lambda: loss(start)[0])


def assert_region_slope(
    sim: SoftBodySimulator, tet_materials_bar: np.ndarray, loss: Callable[[], float]
) -> None:
    """A region's stiffness: the lower half's tets, their (k_mu, k_lambda, k_damp) scaled by
    1 +- 1 % (as its Young's modulus would), against the per-tet gradient's sum, within 1e-3.
    Measured: 1.2e-4 hanging, 5.6e-4 on the ground, 4.9e-4 on the moving collider."""
    materials = sim.scene.model.tet_materials
    rest = materials.numpy().astype(np.float64)
    centres = sim.lattice.nodes[sim.lattice.tets].mean(axis=1)
    lower = centres[:, 2] < np.median(centres[:, 2])
    assert 0 < lower.sum() < sim.tet_count

    def region_loss(scale: float) -> float:
        scaled = rest.copy()
        scaled[lower] *= scale
        materials.assign(scaled.astype(np.float32))
        return loss()

    slope = (region_loss(1.01) - region_loss(0.99)) / 0.02
    materials.assign(rest.astype(np.float32))
    adjoint = float(np.sum(tet_materials_bar[lower] * rest[lower]))
    assert adjoint == pytest.approx(slope, rel=1e-3)


def assert_dropped_block_gradient(sim: SoftBodySimulator, frames: int, loss_frames: list[int]) -> None:
    """Targets from ``sim`` at its values, then from E, nu, damping and density off: the
    steps converged (residual < 2e-4), the adjoint of the loss over ``loss_frames`` within
    1e-3 of central differences at +-1 % of each, and a region's E (``assert_region_slope``)."""
    targets = sim.rollout(1 + frames, loss_frames).numpy()
    start = {"young_modulus": 1.3e4, "poisson_ratio": 0.25, "damping": 0.03, "density": 1200.0}

    def loss(values: dict[str, float]) -> tuple[float, np.ndarray]:
        sim.set_params(values)
        x = sim.rollout(1 + frames, loss_frames).numpy()
        return 0.5 * float(np.sum((x - targets) ** 2)), x

    _, x = loss(start)
    gradient = soft_body_gradient(sim, 1 + frames, loss_frames, x - targets)
    assert gradient.residual < 2e-4
    for name, slope in central_slopes(lambda values: loss(values)[0], start).items():
        assert gradient.parameters[name] == pytest.approx(slope, rel=1e-3), name
    sim.set_params(start)
    assert_region_slope(sim, gradient.tet_materials, lambda: loss(start)[0])


def test_the_adjoint_through_ground_contact_matches_central_differences() -> None:
    """A 20 cm block (2 x 2 x 2 cells of the mesh, 2 lattice cells) dropped 5 cm onto the
    ground (friction 0.5), landing by frame 4: the loss over frames 7, 13 and 19, central
    differences at +-1 %. The contacts are frozen where the solver found them, with its
    stiffness, damping and friction. Measured: within 7.3e-4 (E), 1.8e-4, 8e-6 and 8e-6;
    steps converged to 4e-5 of their forces (40 iterations); on 3 cells over 30 frames at 60
    iterations all four within 1.6e-4."""
    frames, loss_frames = 18, [7, 13, 19]
    mesh = box_mesh((0.0, 0.0, 0.05), (0.2, 0.2, 0.25), (2, 2, 2))
    truth = SoftBodyParams(young_modulus=2e4, damping=0.02, lattice_cells=2, iterations=40, ground=True)
    sim = SoftBodySimulator(mesh, truth)
    assert_dropped_block_gradient(sim, frames, loss_frames)


def test_the_adjoint_on_a_moving_collider_matches_central_differences() -> None:
    """A 20 cm block (2 lattice cells) dropped onto a 1 m plate that rises 3 mm and slides
    2 mm a frame (a collider's mesh, its body moved by its object's transform), landing by
    frame 4; the loss over frames 7, 13 and 19, central differences at +-1 %. The contacts
    are frozen where the solver found them, each on the plate's surface at the substep's end
    pose and moving with it. Measured: within 6.7e-4 (E), 4.9e-4, 2.1e-4 and 1.7e-4, steps
    converged to 7.8e-5 of their forces (40 iterations); 3 cells, 30 frames, 60 iterations:
    within 8e-4. Without the plate's velocity in the contacts' friction and damping the
    steps miss by 0.92 and density's slope by a factor 4."""
    frames, loss_frames = 18, [7, 13, 19]
    cube = box_mesh((-0.1, -0.1, 0.08), (0.1, 0.1, 0.28), (2, 2, 2))
    plate = box_mesh((-0.5, -0.5, -0.2), (0.5, 0.5, 0.0))
    lift = np.repeat(np.eye(4)[None], frames + 1, axis=0)
    lift[:, 2, 3] = 0.05 + 0.003 * np.arange(frames + 1)
    lift[:, 0, 3] = 0.002 * np.arange(frames + 1)
    collider = Collider("lift", plate.vertices, plate.triangles(), lift)
    truth = SoftBodyParams(young_modulus=2e4, damping=0.02, lattice_cells=2, iterations=40)
    truth = truth.replace(colliders=(collider,))
    sim = SoftBodySimulator(cube, truth)
    assert_dropped_block_gradient(sim, frames, loss_frames)


def test_gradients_of_the_wrong_shape_are_refused() -> None:
    sim, goals, _ = hanging_block()
    with pytest.raises(ValueError, match="position_grads must have shape"):
        soft_body_gradient(sim, 1 + FRAMES, LOSS_FRAMES, np.zeros((2, sim.vertex_count, 3)), goals)


def test_lbfgs_fits_a_hanging_block_on_the_adjoint() -> None:
    """The fit engine's L-BFGS on the model's gradient (a rollout on a tape records the
    adjoint): Young's modulus and the damping time from 3x off, 12 frames, 30 VBD
    iterations. Measured: converged in 8 steps (21 rollouts, 9 on a tape, 10.8 s; LM's
    finite differences: 32 rollouts, 12.8 s), both values to 4 digits."""
    frames_n = 12
    mesh = box_mesh((0.0, 0.0, -0.3), (0.2, 0.2, 0.0), (2, 2, 3), pin=lambda v: v[:, 2] > -1e-9)
    truth = SoftBodyParams(young_modulus=2e4, damping=0.02, lattice_cells=3, iterations=30)
    goals = np.repeat(mesh.vertices[None], frames_n + 1, axis=0)
    goals[:, :, 0] += 0.05 * np.sin(np.linspace(0.0, 3.0, frames_n + 1))[:, None]
    frames = list(range(3, frames_n + 2, 3))
    x = SoftBodySimulator(mesh, truth).rollout(1 + frames_n, frames, goals).numpy()
    start = truth.replace(young_modulus=2e4 / 3, damping=0.06)
    targets = [Target(f, x[k]) for k, f in enumerate(frames)]
    problem = FitProblem(mesh, start, targets, ["young_modulus", "damping"], model="soft_body", goals=goals)
    result = fit(problem, FitSettings(precision="float32", optimizer="lbfgs"))
    assert result.outcome == "converged" and result.gradient == "implicit"
    assert result.n_backward > 0
    assert not any("converged solver steps" in w for w in result.warnings)
    assert result.params["young_modulus"] == pytest.approx(2e4, rel=0.01)
    assert result.params["damping"] == pytest.approx(0.02, rel=0.01)


def test_a_fit_that_stops_short_on_an_unconverged_solver_says_so() -> None:
    """A block dropped on the ground at 5 VBD iterations: its steps end up to 0.9 of their
    forces from the implicit steps the adjoint differentiates. L-BFGS held to one step ends
    short of the targets, and the result says why its gradient may not point downhill."""
    mesh = box_mesh((0.0, 0.0, 0.05), (0.2, 0.2, 0.25), (2, 2, 2))
    truth = SoftBodyParams(young_modulus=2e4, damping=0.02, lattice_cells=3, iterations=5, ground=True)
    frames = [5, 9, 13]
    x = SoftBodySimulator(mesh, truth).rollout(13, frames).numpy()
    start = truth.replace(young_modulus=6e4)
    targets = [Target(f, x[k]) for k, f in enumerate(frames)]
    problem = FitProblem(mesh, start, targets, ["young_modulus"], model="soft_body")
    result = fit(problem, FitSettings(precision="float32", optimizer="lbfgs", max_iterations=1))
    assert result.outcome != "converged"
    assert any("the gradient assumes converged solver steps" in w for w in result.warnings), result.warnings


def test_the_products_force_is_the_force_vbd_balances() -> None:
    """The adjoint's products differentiate ``tet_forces_only`` (one stress per tet, no 3 x 3
    blocks), the steps' residual Newton's own per-corner function (``tet_forces``): at a
    deformed, moving state the two forces agree to float32 rounding, and so do their reverse
    products by the end positions, the start positions and the materials. Measured: 8e-8 and
    3e-7 of the largest entry."""
    sim, _, _ = hanging_block()
    model, n = sim.scene.model, sim.node_count
    rng = np.random.default_rng(3)
    rest = model.particle_q.numpy()
    x_end, x_start, seed = (
        wp.array((rest + 0.01 * rng.standard_normal(rest.shape)).astype(np.float32), dtype=wp.vec3)
        for _ in range(3)
    )
    dt = 1.0 / 96.0
    inputs = [x_end, x_start, model.tet_indices, model.tet_poses, model.tet_materials, dt]

    def run(kernel, dim, outputs: list, reverse: bool) -> list[np.ndarray]:
        grads = [wp.zeros(n, dtype=wp.vec3), wp.zeros(n, dtype=wp.vec3), wp.zeros_like(model.tet_materials)]
        adjoint = {}
        if reverse:
            adjoint = dict(
                adj_inputs=[grads[0], grads[1], None, None, grads[2], 0.0],
                adj_outputs=[seed] + [None] * (len(outputs) - 1),
                adjoint=True,
            )
        wp.launch(kernel, dim=dim, inputs=inputs, outputs=outputs, **adjoint)
        return [outputs[0].numpy()] if not reverse else [g.numpy() for g in grads]

    def newton(reverse: bool) -> list[np.ndarray]:
        outputs = [wp.zeros(n, dtype=wp.vec3), wp.zeros(n, dtype=wp.mat33)]
        return run(tet_forces, (sim.tet_count, 4), outputs, reverse)

    def ours(reverse: bool) -> list[np.ndarray]:
        return run(tet_forces_only, sim.tet_count, [wp.zeros(n, dtype=wp.vec3)], reverse)

    assert sim.settings.damping > 0.0  # the damping term is compared too
    for reverse in (False, True):
        for theirs, mine in zip(newton(reverse), ours(reverse), strict=True):
            scale = np.abs(theirs).max()
            assert scale > 0.0
            assert np.abs(theirs - mine).max() <= 2e-6 * scale


def test_the_written_out_product_is_the_reverse_pass_of_the_force() -> None:
    """The solve's product of the tets (``tet_end_products64``, written out) equals Warp's
    reverse pass of ``tet_forces_only64`` by the end positions, at a deformed, moving state
    with damping and at a compressed one: float64 rounding apart (measured 3e-16 of the
    largest entry)."""
    sim, _, _ = hanging_block()
    model, n = sim.scene.model, sim.node_count
    rng = np.random.default_rng(5)
    rest = model.particle_q.numpy().astype(np.float64)
    poses = wp.array(model.tet_poses.numpy().astype(np.float64), dtype=wp.mat33d)
    materials = wp.array(model.tet_materials.numpy().astype(np.float64), dtype=wp.float64)
    assert materials.numpy()[:, 2].min() > 0.0  # the damping term is compared too
    for squeeze in (1.0, 0.6):
        x_end, x_start, seed = (
            wp.array(squeeze * rest + scale * rng.standard_normal(rest.shape), dtype=wp.vec3d)
            for scale in (0.02, 0.02, 1.0)
        )
        inputs = [x_end, x_start, model.tet_indices, poses, materials, 1.0 / 96.0]
        reverse, written = wp.zeros(n, dtype=wp.vec3d), wp.zeros(n, dtype=wp.vec3d)
        unused = [wp.zeros(n, dtype=wp.vec3d), wp.zeros_like(materials)]
        wp.launch(
            tet_forces_only64,
            dim=sim.tet_count,
            inputs=inputs,
            outputs=[wp.zeros(n, dtype=wp.vec3d)],
            adj_inputs=[reverse, unused[0], None, None, unused[1], 0.0],
            adj_outputs=[seed],
            adjoint=True,
        )
        wp.launch(tet_end_products64, dim=sim.tet_count, inputs=[*inputs, seed], outputs=[written])
        expected = reverse.numpy()
        assert np.abs(written.numpy() - expected).max() <= 1e-12 * np.abs(expected).max()


def test_a_captured_recording_gives_the_gradient_kernel_launches_give() -> None:
    """The recorded rollout replays as captured graphs that also write its history: its
    gradient equals, bit for bit, the one of a rollout launched kernel by kernel, again when
    the history and its graphs are reused, and after a new Young's modulus (new graphs). Both
    backward passes on the host: the device loop's sums run in another order
    (``test_soft_body_adjoint_device``)."""
    sim, goals, targets = hanging_block()
    plain, _, _ = hanging_block()
    plain.graphs_enabled = False

    def gradient(s: SoftBodySimulator) -> np.ndarray:
        x = s.rollout(1 + FRAMES, LOSS_FRAMES, goals).numpy()
        found = soft_body_gradient(s, 1 + FRAMES, LOSS_FRAMES, x - targets, goals, device_resident=False)
        return np.array([found.parameters[n] for n in sorted(found.parameters)])

    first = gradient(sim)
    assert np.all(np.isfinite(first)) and np.any(first != 0.0)
    assert np.array_equal(first, gradient(plain))
    assert np.array_equal(first, gradient(sim))  # the kept history, its graphs replayed
    for s in (sim, plain):
        s.set_params({"young_modulus": 1.7e4})
    moved = gradient(sim)
    assert not np.array_equal(moved, first)
    assert np.array_equal(moved, gradient(plain))


def test_a_stiff_body_is_solved_to_the_tolerance_or_its_best_or_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 16 cm sphere dropped on the ground, its gradient taken at stiff values an L-BFGS fit
    of a softer sphere stepped to: the eigenvalues of a substep's H then span four to seven
    decades. With float32 tet products BiCGStab stalled near 1e-4 of the right-hand side from
    about 3e5 Pa and raised after 500 products, and the fit stopped on an unexpected error.
    With float64 tet products, at 2.2e6 Pa and a 0.12 s damping time every solve reaches 1e-6
    (measured: 175 products at most); at 2e7 Pa the float32 contacts leave 1.9e-4, and the
    gradient is given from the best iterates, their residual reported; at 1e9 Pa and 0.3 s
    (best 7.8e-3) the point is refused with an error the fit's optimizers take as a point they
    cannot evaluate (they step back from it), not one that stops the fit. Every solve is asked
    for SOLVE_TOLERANCE here (no share of its step's residual), as a converged step asks."""
    monkeypatch.setattr(adjoint_step, "SOLVE_SHARE", 0.0)
    mesh = sphere_mesh(0.08, 8, 12, centre=(0.0, 0.0, 0.18))
    frames = [8, 16, 24]
    truth = SoftBodyParams(young_modulus=2.78e4, damping=0.0444, lattice_cells=3, ground=True)
    targets = SoftBodySimulator(mesh, truth).rollout(frames[-1], frames).numpy()

    def gradient(young_modulus: float, damping: float):
        sim = SoftBodySimulator(mesh, truth.replace(young_modulus=young_modulus, damping=damping))
        x = sim.rollout(frames[-1], frames).numpy()
        return soft_body_gradient(sim, frames[-1], frames, x - targets)

    assert gradient(2.2e6, 0.12).solve_residual <= 1e-6
    stiff = gradient(2e7, 0.12)
    assert 1e-6 < stiff.solve_residual <= 1e-3
    assert all(np.isfinite(v) for v in stiff.parameters.values())
    assert stiff.parameters["young_modulus"] != 0.0
    with pytest.raises(EVALUATION_ERRORS, match="too coarse for a body this stiff"):
        gradient(1e9, 0.3)


def test_an_unconverged_step_is_solved_only_as_far_as_it_was_stepped(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 20 cm block dropped 5 cm on the ground at VBD's 10 iterations, its steps up to 2.5e-2
    from their roots: each adjoint solve stops at a tenth of its step's residual (1e-3 here)
    instead of 1e-6, in fewer products, and what that leaves in each derivative is small
    beside what the steps' truncation already puts between the adjoint and central
    differences of the rollouts (measured: 30 products against 38; at most 0.04 of it)."""
    mesh = box_mesh((0.0, 0.0, 0.05), (0.2, 0.2, 0.25), (2, 2, 2))
    truth = SoftBodyParams(young_modulus=2e4, damping=0.02, lattice_cells=3, iterations=10, ground=True)
    frames = [8, 16, 24]
    targets = SoftBodySimulator(mesh, truth).rollout(24, frames).numpy()
    start = truth.replace(young_modulus=3e4, damping=0.012)
    sim = SoftBodySimulator(mesh, start)
    pull = sim.rollout(24, frames).numpy() - targets
    shared = soft_body_gradient(sim, 24, frames, pull)
    assert shared.residual > 1e-2
    assert 1e-4 < shared.solve_residual <= adjoint_step.solve_tolerance(shared.residual)
    monkeypatch.setattr(adjoint_step, "SOLVE_SHARE", 0.0)
    exact = soft_body_gradient(sim, 24, frames, pull)
    assert exact.solve_residual <= adjoint_step.SOLVE_TOLERANCE
    assert shared.solve_products < exact.solve_products

    def loss(values: dict[str, float]) -> float:
        x = SoftBodySimulator(mesh, start.replace(**values)).rollout(24, frames).numpy()
        return 0.5 * float(np.sum((x - targets) ** 2))

    names = ("young_modulus", "damping", "poisson_ratio", "density")
    for name, slope in central_slopes(loss, {n: start.values()[n] for n in names}).items():
        bias = abs(exact.parameters[name] - slope)
        assert abs(shared.parameters[name] - exact.parameters[name]) <= 0.1 * bias, name
