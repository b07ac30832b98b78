"""Gradients of the blender_cloth rollout against central finite differences (float64)."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from tape_check import GradientCase, curved_sheet, start_off_rest, vec3d

from warp_core import ClothMesh, ClothParams, grid_mesh
from warp_core.models.blender_cloth.params import PARAMETER_NAMES
from warp_core.models.blender_cloth.schedule import CG_TOLERANCE
from warp_core.models.blender_cloth.simulator import ClothSimulator

FRAME_END = 20
FRAMES = [5, 12, 20]


@pytest.fixture(scope="module")
def problem():
    """36 vertices, quads and triangles, a curved sheet, a pinned row and one soft goal vertex.

    The start state is moved off the rest shape: at exact rest every spring sits on the
    tension/compression switch, where the loss has a kink and finite differences mean nothing.
    """
    vertices, polygons = curved_sheet(0.3)
    pins = np.where(vertices[:, 1] >= vertices[:, 1].max() - 1e-9, 1.0, 0.0)
    pins[3] = 0.8
    mesh = ClothMesh.from_polygons(vertices, polygons, pin_weights=pins)
    params = ClothParams(air_damping=1.5, pin_stiffness=2.0, goal_friction=3.0, bending_stiffness=2.0)
    sim = ClothSimulator(mesh, params, precision="float64")
    rng = np.random.default_rng(0)
    x0, v0, target = start_off_rest(sim, rng, 0.002, FRAME_END, FRAMES)
    return sim, x0, v0, target, rng


def _tape_gradients(sim, x0, v0, target):
    return GradientCase(sim, FRAME_END, FRAMES, target).tape_gradients(x0, v0)


def _loss(sim, x0, v0, target, iterations, values=None) -> float:
    return GradientCase(sim, FRAME_END, FRAMES, target).loss(x0, v0, iterations, values)


def test_loss_kernel_on_tape_matches_forward(problem) -> None:
    sim, x0, v0, target, _ = problem
    loss, iterations, _ = _tape_gradients(sim, x0, v0, target)
    assert loss == pytest.approx(_loss(sim, x0, v0, target, iterations), rel=1e-12)
    assert iterations.min() >= 1 and iterations.max() < 100


def test_parameter_gradients_match_finite_differences(problem) -> None:
    sim, x0, v0, target, _ = problem
    _, iterations, (param_grad, _, _) = _tape_gradients(sim, x0, v0, target)
    base = sim.param_values()
    for k, name in enumerate(PARAMETER_NAMES):
        step = 1e-6 * base[name] if base[name] else 1e-6
        plus = _loss(sim, x0, v0, target, iterations, {name: base[name] + step})
        minus = _loss(sim, x0, v0, target, iterations, {name: max(base[name] - step, 0.0)})
        fd = (plus - minus) / (step + min(step, base[name]))
        assert fd != 0.0, name
        assert param_grad[k] != 0.0, name
        assert abs(param_grad[k] - fd) <= 1e-3 * abs(fd), f"{name}: adjoint {param_grad[k]:.9e} fd {fd:.9e}"


def test_initial_state_gradients_match_finite_differences(problem) -> None:
    sim, x0, v0, target, rng = problem
    _, iterations, (_, x0_grad, v0_grad) = _tape_gradients(sim, x0, v0, target)
    free = (sim.topology.pinned == 0)[:, None]
    direction = rng.standard_normal(x0.shape)
    step = 1e-6
    fd_v = (
        _loss(sim, x0, v0 + step * direction, target, iterations)
        - _loss(sim, x0, v0 - step * direction, target, iterations)
    ) / (2 * step)
    adj_v = float((v0_grad * direction).sum())
    assert fd_v != 0.0
    assert abs(adj_v - fd_v) <= 1e-3 * abs(fd_v)
    # positions: spring switches lie within ~1e-6 of this state, so a smaller step
    direction = direction * free
    step = 1e-8
    fd_x = (
        _loss(sim, x0 + step * direction, v0, target, iterations)
        - _loss(sim, x0 - step * direction, v0, target, iterations)
    ) / (2 * step)
    adj_x = float((x0_grad * direction).sum())
    assert abs(adj_x - fd_x) <= 1e-3 * abs(fd_x)


def test_gradients_accumulate_like_warp_arrays(problem) -> None:
    """Two backward passes without zeroing add up, as Warp's own kernels do."""
    sim, x0, v0, target, _ = problem
    _, _, (g1, _, _) = _tape_gradients(sim, x0, v0, target)
    x0_wp = wp.array(x0, dtype=vec3d)
    v0_wp = wp.array(v0, dtype=vec3d)
    case = GradientCase(sim, FRAME_END, FRAMES, target)
    sim.params.grad.zero_()
    for _ in range(2):
        loss = wp.zeros(1, dtype=wp.float64, requires_grad=True)
        tape = wp.Tape()
        with tape:
            rollout = sim.rollout(FRAME_END, FRAMES, x0=x0_wp, v0=v0_wp)
            case.launch_loss(rollout.positions, loss)
        tape.backward(loss)
    np.testing.assert_allclose(sim.params.grad.numpy(), 2 * g1, rtol=1e-10)
    sim.params.grad.zero_()


def test_graph_and_kernel_by_kernel_backward_agree(problem) -> None:
    sim, x0, v0, target, _ = problem
    _, _, graph_grads = _tape_gradients(sim, x0, v0, target)
    sim.graphs_enabled = False
    try:
        _, _, plain_grads = _tape_gradients(sim, x0, v0, target)
    finally:
        sim.graphs_enabled = True
    for a, b in zip(graph_grads, plain_grads, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_tape_memory_is_x_and_v_per_substep(precision: str) -> None:
    from warp_core.models.blender_cloth.adjoint import tape_bytes_per_vertex_substep

    sim = ClothSimulator(grid_mesh(5, 5), ClothParams(quality=3), precision=precision)
    tape = wp.Tape()
    with tape:
        rollout = sim.rollout(6, [6])
    states = rollout.state_x.capacity + rollout.state_v.capacity
    per_vertex_substep = states / (sim.vertex_count * (len(rollout.cg_iterations) + 1))
    assert per_vertex_substep == tape_bytes_per_vertex_substep(sim) == (24 if precision == "float32" else 48)


def _gradients_of(kind, sim, x0, v0, target):
    sim.gradient = kind
    try:
        return _tape_gradients(sim, x0, v0, target)
    finally:
        sim.gradient = "exact"


def test_implicit_gradient_is_the_gradient_when_every_solve_is_exact(problem) -> None:
    """Solved to a residual of 1e-12 rather than Blender's 1e-2, the truncated CG is the
    exact solve, so the implicit reverse (which differentiates each solve as exact) must
    give the gradient: central differences of the loss, CG counts held, agree to 1e-3 of
    each component and 1e-6 of the largest (the 1e-12 residual left in every solve is what
    separates them: the tiny damping components are 0.3 % off, the rest 1e-5)."""
    sim, x0, v0, target, rng = problem
    sim.cg_tolerance = 1e-24
    try:
        _, iterations, (param_grad, x0_grad, v0_grad) = _gradients_of("implicit", sim, x0, v0, target)
        assert iterations.max() < 100  # converged, not cut off
        base = sim.param_values()
        fds = []
        for name in PARAMETER_NAMES:
            step = 1e-6 * base[name] if base[name] else 1e-6
            plus = _loss(sim, x0, v0, target, iterations, {name: base[name] + step})
            minus = _loss(sim, x0, v0, target, iterations, {name: max(base[name] - step, 0.0)})
            fds.append((plus - minus) / (step + min(step, base[name])))
        largest = max(abs(fd) for fd in fds)
        for k, (name, fd) in enumerate(zip(PARAMETER_NAMES, fds, strict=True)):
            assert fd != 0.0, name
            bound = 1e-3 * abs(fd) + 1e-6 * largest
            assert abs(param_grad[k] - fd) <= bound, f"{name}: {param_grad[k]:.9e} fd {fd:.9e}"
        direction = rng.standard_normal(x0.shape) * (sim.topology.pinned == 0)[:, None]
        step = 1e-8
        for start, grad in ((0, x0_grad), (1, v0_grad)):
            plus, minus = [x0, v0], [x0, v0]
            plus[start] = plus[start] + step * direction
            minus[start] = minus[start] - step * direction
            fd = (_loss(sim, *plus, target, iterations) - _loss(sim, *minus, target, iterations)) / (2 * step)
            assert abs(float((grad * direction).sum()) - fd) <= 1e-3 * abs(fd)
    finally:
        sim.cg_tolerance = CG_TOLERANCE


def test_stable_gradient_keeps_the_exact_one_where_it_does_not_explode(problem) -> None:
    """On this well-behaved sheet no substep's exact reverse amplifies the adjoint past the
    guard, so the stable gradient is the exact one, and the same with and without graphs;
    the implicit one alone is biased by Blender's 1 % CG residual."""
    sim, x0, v0, target, _ = problem
    _, _, exact = _tape_gradients(sim, x0, v0, target)
    _, _, stable = _gradients_of("stable", sim, x0, v0, target)
    sim.graphs_enabled = False
    try:
        _, _, plain = _gradients_of("stable", sim, x0, v0, target)
    finally:
        sim.graphs_enabled = True
    for a, b, c in zip(exact, stable, plain, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(c, a, rtol=1e-12, atol=1e-300)
    _, _, implicit = _gradients_of("implicit", sim, x0, v0, target)
    assert np.abs(implicit[0] - exact[0]).max() > 1e-3 * np.abs(exact[0]).max()
    # the implicit reverse replayed from captured graphs is the kernel-by-kernel one
    sim.graphs_enabled = False
    try:
        _, _, implicit_plain = _gradients_of("implicit", sim, x0, v0, target)
    finally:
        sim.graphs_enabled = True
    for a, b in zip(implicit, implicit_plain, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-300)


def test_guard_takes_the_implicit_reverse_only_where_the_exact_one_explodes() -> None:
    from warp_core.models.blender_cloth.adjoint_stable import GUARD_FACTOR, SubstepGuard

    mesh = ClothMesh.from_polygons(*curved_sheet(0.0))
    sim = ClothSimulator(mesh, precision="float64")
    n = sim.vertex_count
    guard = SubstepGuard(sim.solver, 3)
    rng = np.random.default_rng(3)
    kept = [rng.standard_normal((n, 3)), rng.standard_normal((n, 3)), rng.standard_normal(3)]
    guard.keep(*(wp.array(a, dtype=vec3d if a.ndim == 2 else wp.float64) for a in kept))
    kept_norm = np.sqrt((kept[0] ** 2).sum() + (kept[1] ** 2).sum())
    for scale, expect_kept in ((0.99 * GUARD_FACTOR, False), (1.01 * GUARD_FACTOR, True), (np.nan, True)):
        exact = [rng.standard_normal((n, 3)), rng.standard_normal((n, 3)), rng.standard_normal(3)]
        norm = np.sqrt((exact[0] ** 2).sum() + (exact[1] ** 2).sum())
        exact = [a * (scale * kept_norm / norm) for a in exact[:2]] + [exact[2]]
        arrays = [wp.array(a, dtype=vec3d if a.ndim == 2 else wp.float64) for a in exact]
        guard.choose(*arrays)
        for got, k, e in zip(arrays, kept, exact, strict=True):
            np.testing.assert_array_equal(got.numpy(), k if expect_kept else e)


@pytest.mark.parametrize("kind", ["exact", "stable"])
def test_backward_graphs_kept_between_passes_follow_a_settings_change(problem, kind: str) -> None:
    """The backward pass keeps its captured graphs on the simulator for the next pass; after
    quality and gravity change, its gradients must be a fresh simulator's."""
    sim, x0, v0, target, _ = problem
    before = sim.settings
    _gradients_of(kind, sim, x0, v0, target)  # captures with the fixture's settings
    changed = before.replace(quality=3, gravity=(0.0, 0.0, -5.0))
    sim.set_params(changed)
    try:
        _, _, kept = _gradients_of(kind, sim, x0, v0, target)
    finally:
        sim.set_params(before)
    fresh = ClothSimulator(sim.mesh, changed, precision="float64")
    _, _, new = _gradients_of(kind, fresh, x0, v0, target)
    for a, b in zip(kept, new, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("kind", ["exact", "stable"])
def test_each_dot_product_order_gives_the_same_rollout_and_gradients(problem, kind: str) -> None:
    """The CG's dot products run in Blender's order (small meshes like this one), in the
    block order (CUDA's tiles, repeated on the CPU), or as Warp tiles on the CPU (the CUDA
    kernels' code, in the CPU's tile order): rollout and gradients agree up to rounding, with
    the same CG iteration counts, and each repeats itself bit for bit with and without graphs."""
    sim, x0, v0, target, _ = problem
    assert sim.solver.dot_mode == "chunks"
    _, counts, chunks = _gradients_of(kind, sim, x0, v0, target)
    for mode in ("blocks", "tiles"):
        other = ClothSimulator(sim.mesh, sim.settings, precision="float64")
        other.solver.dot_mode = mode  # before any buffers exist
        _, other_counts, got = _gradients_of(kind, other, x0, v0, target)
        np.testing.assert_array_equal(other_counts, counts)
        other.graphs_enabled = False
        again = _gradients_of(kind, other, x0, v0, target)[2]
        for a, b, c in zip(got, chunks, again, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12 * np.abs(b).max())
            np.testing.assert_array_equal(a, c)
