"""Stiffness vertex groups without Blender: the per-spring and per-hinge group weights, the
tape gradients of the four maxima against central differences (float64), and problem files
keeping the group weights."""

from __future__ import annotations

import numpy as np
import pytest
from tape_check import GradientCase, start_off_rest

from warp_core import ClothMesh, ClothParams, grid_mesh
from warp_core.fit.problem.files import load_problem, save_problem
from warp_core.fit.problem.problem import FitProblem, Target
from warp_core.models.blender_cloth.params import ALL_PARAMETER_NAMES, GROUP_MAXIMUM_NAMES
from warp_core.models.blender_cloth.simulator import ClothSimulator
from warp_core.models.blender_cloth.topology import (
    SPRING_BENDING_LINEAR,
    SPRING_SHEAR,
    SPRING_STRUCTURAL,
    build_topology,
)

FRAME_END = 12
FRAMES = [4, 12]


def grouped_mesh(n: int = 5) -> ClothMesh:
    """A curved sheet, a pinned row, and three different group weights (some vertices
    outside a group: weight 0)."""
    mesh = grid_mesh(n, n, 1.0, 1.0)
    x, y = mesh.vertices[:, 0], mesh.vertices[:, 1]
    mesh.vertices[:, 2] = 0.3 * y**2 + 0.05 * np.sin(3 * x)
    mesh.pin_weights = (y >= y.max() - 1e-9).astype(float)
    mesh.structural_stiffness_weight = x - x.min()
    mesh.shear_stiffness_weight = 1.0 - (y - y.min())
    bend = 0.5 + 0.5 * np.cos(4 * x + 2 * y)
    bend[::3] = 0.0
    mesh.bending_stiffness_weight = bend
    return mesh


@pytest.mark.parametrize("model", ["ANGULAR", "LINEAR"])
def test_each_spring_and_hinge_takes_the_mean_of_its_group(model: str) -> None:
    mesh = grouped_mesh()
    top = build_topology(mesh, model)
    group = {
        SPRING_STRUCTURAL: mesh.structural_stiffness_weight,
        SPRING_SHEAR: mesh.shear_stiffness_weight,
        SPRING_BENDING_LINEAR: mesh.bending_stiffness_weight,
    }
    for s, (i, j) in enumerate(top.spring_vertices):
        w = group[int(top.spring_kind[s])]
        assert top.spring_lin_stiffness[s] == (w[i] + w[j]) / 2
    w = mesh.bending_stiffness_weight
    for h, (i, j) in enumerate(top.hinge_vertices):
        assert top.hinge_ang_stiffness[h] == (w[i] + w[j]) / 2
    # 5 x 5 quads: 24 inner edges and 32 diagonals bend (ANGULAR), else bending springs do
    assert len(top.hinge_vertices) == (56 if model == "ANGULAR" else 0)
    assert (top.spring_kind == SPRING_BENDING_LINEAR).any() == (model == "LINEAR")
    # no group: every weight 0, the stiffness is the minimum
    plain = build_topology(grid_mesh(5, 5), model)
    assert not plain.spring_lin_stiffness.any() and not plain.hinge_ang_stiffness.any()


def test_group_weights_out_of_range_are_refused() -> None:
    mesh = grouped_mesh()
    mesh.shear_stiffness_weight = mesh.shear_stiffness_weight[:-1]
    with pytest.raises(ValueError, match="shear_stiffness_weight"):
        build_topology(mesh)
    mesh = grouped_mesh()
    mesh.bending_stiffness_weight[2] = 1.5
    with pytest.raises(ValueError, match="bending_stiffness_weight"):
        build_topology(mesh)


@pytest.mark.parametrize("model", ["ANGULAR", "LINEAR"])
def test_maxima_gradients_match_finite_differences(model: str) -> None:
    """Compression's maximum below the compression (the other side of Blender's fabsf).

    Measured |tape - fd| / |fd| at a relative step 1e-6: at most 1.8e-6 (the compression
    maximum, ANGULAR model; 3e-8 to 1.5e-6 for the others).
    """
    mesh = grouped_mesh()
    params = ClothParams(
        tension_stiffness_max=40.0,
        compression_stiffness=15.0,
        compression_stiffness_max=5.0,
        shear_stiffness_max=20.0,
        bending_stiffness=2.0,
        bending_stiffness_max=8.0,
        bending_model=model,
    )
    sim = ClothSimulator(mesh, params, precision="float64")
    x0, v0, target = start_off_rest(sim, np.random.default_rng(1), 0.003, FRAME_END, FRAMES)
    case = GradientCase(sim, FRAME_END, FRAMES, target)
    _, iterations, (param_grad, _, _) = case.tape_gradients(x0, v0)
    base = sim.param_values()
    for name in GROUP_MAXIMUM_NAMES:
        k = ALL_PARAMETER_NAMES.index(name)
        step = 1e-6 * base[name]
        plus = case.loss(x0, v0, iterations, {name: base[name] + step})
        minus = case.loss(x0, v0, iterations, {name: base[name] - step})
        fd = (plus - minus) / (2 * step)
        if model == "LINEAR" and name == "compression_stiffness_max":
            # Blender's LINEAR model has no compression resistance: neither moves the loss
            assert fd == 0.0 and param_grad[k] == 0.0, (fd, param_grad[k])
            continue
        assert fd != 0.0, name
        assert abs(param_grad[k] - fd) <= 2e-5 * abs(fd), f"{name}: tape {param_grad[k]:.9e} fd {fd:.9e}"


def test_problem_files_keep_the_group_weights(tmp_path) -> None:
    mesh = grouped_mesh()
    mesh.shear_stiffness_weight = None
    problem = FitProblem(
        mesh, ClothParams(), [Target(2, mesh.vertices)], free_parameters=["tension_stiffness_max"]
    )
    loaded = load_problem(save_problem(problem, tmp_path / "p.npz"))
    np.testing.assert_array_equal(loaded.mesh.structural_stiffness_weight, mesh.structural_stiffness_weight)
    np.testing.assert_array_equal(loaded.mesh.bending_stiffness_weight, mesh.bending_stiffness_weight)
    assert loaded.mesh.shear_stiffness_weight is None
