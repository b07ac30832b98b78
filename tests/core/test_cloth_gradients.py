"""Gradients of the blender_cloth rollout against central finite differences (float64)."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from tape_check import GradientCase, curved_sheet, start_off_rest, vec3d

from warp_core import ClothMesh, ClothParams, grid_mesh
from warp_core.models.blender_cloth.params import PARAMETER_NAMES
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
