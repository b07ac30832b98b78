"""Fitting one weight map (``warp_core.fit.maps.fit_map``): L-BFGS in the box [0, 1] on the
tape gradient with a smoothness penalty, recovering a hidden smooth structural map from a
model-made hanging sheet; the box L-BFGS on its own; what a map fit refuses.

Measured on the sheet below (6 x 6, top row pinned, tension 1 to 20, targets at frames 5,
10 and 15), from 0.5 everywhere (RMS 0.214 off the truth), exact gradient, 100 steps at
most: with smoothness 1e-7 the weights end 0.019 RMS (0.044 at most) off the truth after 98
steps and 214 rollouts on a tape (about 5 s), the loss from 1.4e-4 to 1.8e-9 (6 micrometres
RMS). Without the penalty the fit stopped at 0.038 RMS (0.091 at most): the structural
springs see only the mean of two neighbours' weights. With 1e-6 the penalty pulls the peak
down (0.043 RMS). The stable gradient gave the same weights (0.043 at 1e-6) in 2.7x the time.
"""

from __future__ import annotations

import numpy as np
import pytest

from warp_core import ClothParams, grid_mesh
from warp_core.fit import FitError, FitProblem, FitSettings, Target
from warp_core.fit.maps import fit_map, smoothness_penalty
from warp_core.fit.optimizers.box_lbfgs import minimize_box
from warp_core.models.blender_cloth.simulator import ClothSimulator

FRAMES = [5, 10, 15]


def hidden_map_problem() -> tuple[FitProblem, np.ndarray]:
    """A curved sheet hanging from its top row whose structural group holds a smooth bump;
    the targets are its own rollout, and the problem's mesh has no group (the map to find)."""
    mesh = grid_mesh(6, 6, 1.0, 1.0)
    x, y = mesh.vertices[:, 0], mesh.vertices[:, 1]
    mesh.vertices[:, 2] = 0.2 * y**2
    mesh.pin_weights = (y >= y.max() - 1e-9).astype(float)
    truth = 0.15 + 0.7 * np.exp(-((x - 0.2) ** 2 + (y + 0.1) ** 2) / 0.2)
    params = ClothParams(tension_stiffness=1.0, tension_stiffness_max=20.0, mass=1.0)
    mesh.structural_stiffness_weight = truth
    positions = ClothSimulator(mesh, params, precision="float64").simulate(max(FRAMES), FRAMES)
    mesh.structural_stiffness_weight = None
    targets = [Target(f, p) for f, p in zip(FRAMES, positions, strict=True)]
    return FitProblem(mesh, params, targets, ["tension_stiffness"]), truth


def test_a_hidden_smooth_structural_map_is_recovered() -> None:
    problem, truth = hidden_map_problem()
    settings = FitSettings(gradient="exact")
    result = fit_map(problem, settings, "structural", smoothness=1e-7, max_iterations=100)
    error = result.weights - truth
    rms = float(np.sqrt(np.mean(error**2)))
    print(
        f"\nmap fit: {result.iterations} steps, {result.evaluations} rollouts, stop {result.stop}; "
        f"loss {result.start_loss:.2e} -> {result.loss:.2e}; weights {rms:.4f} RMS "
        f"({np.abs(error).max():.3f} at most) off the truth, from {np.sqrt(np.mean((0.5 - truth) ** 2)):.4f}"
    )
    assert np.all((result.weights >= 0.0) & (result.weights <= 1.0))
    assert result.loss < 1e-3 * result.start_loss
    assert rms < 0.03 and np.abs(error).max() < 0.08
    assert result.penalty == pytest.approx(smoothness_penalty(problem.mesh, result.weights, 1e-7)[0])


def test_box_lbfgs_finds_a_box_corner_and_an_inner_minimum() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 8))
    hessian = a @ a.T + 0.1 * np.eye(8)
    centre = rng.uniform(-1.0, 2.0, 8)  # some coordinates outside [0, 1]

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        d = x - centre
        return 0.5 * d @ hessian @ d, hessian @ d

    found = minimize_box(fun, np.full(8, 0.5), (np.zeros(8), np.ones(8)), max_iterations=200, rel_tol=1e-15)
    # the box's optimum: the projected gradient vanishes there
    assert np.abs(found.x - np.clip(found.x - found.gradient, 0.0, 1.0)).max() < 1e-6
    inner = minimize_box(
        lambda x: (0.5 * (x - 0.3) @ (x - 0.3), x - 0.3), np.zeros(8), (np.zeros(8), np.ones(8))
    )
    np.testing.assert_allclose(inner.x, 0.3, atol=1e-8)


def test_what_a_map_fit_refuses() -> None:
    problem, _ = hidden_map_problem()
    with pytest.raises(FitError, match="rest lengths"):
        fit_map(problem, FitSettings(), "shrink", smoothness=0.0, max_iterations=1)
    with pytest.raises(FitError, match="no 'pressure' map"):
        fit_map(problem, FitSettings(), "pressure", smoothness=0.0, max_iterations=1)
