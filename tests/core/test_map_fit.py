"""A free weight map (``warp_core.fit.free_map``, through ``fit``): one stiffness per vertex
by box L-BFGS on the tape gradient with a smoothness prior, recovering a hidden smooth
structural map from a model-made hanging sheet; the box L-BFGS on its own; what a free map
refuses.

Measured on the sheet below (10 x 10, top row pinned, curved, tension 4 to 32 in a bump,
targets at frames 5, 10 and 15; 1.14 mm RMS off at the best uniform 8.2, 0.32 mm after the
coarse stage of 9 soft regions), 150 steps at most: with smoothness 3e-2 (the default) the
fitted stiffness correlates 0.9988 with the hidden one over the 90 vertices the targets
determine (RMSE 0.0075 mm, 173 steps in all); without the smoothing preconditioner 0.998
(0.011 mm, 183 steps). Before the coarse stage the per-vertex stage started at the uniform
value: 0.9985, and with 1e-2, 0.996; with 1e-1, 0.998.
"""

from __future__ import annotations

import numpy as np
import pytest

from warp_core import ClothParams, grid_mesh
from warp_core.fit import FitError, FitProblem, FitSettings, Target, fit
from warp_core.fit.coarse_map import COARSE_REGIONS, soft_regions
from warp_core.fit.mesh_smoothing import MeshSmoother
from warp_core.fit.optimizers.box_lbfgs import minimize_box
from warp_core.fit.problem.maps import MapSpec
from warp_core.models.blender_cloth.simulator import ClothSimulator

FRAMES = [5, 10, 15]
STRUCTURAL = ("tension_stiffness", "compression_stiffness")


def hidden_map_problem(n: int = 10, air: float = 1.0) -> tuple[FitProblem, np.ndarray]:
    """A curved n x n sheet hanging from its top row whose structural stiffness is a smooth
    bump from 4 to 32; the targets are its own rollout, and the problem's mesh has no group."""
    mesh = grid_mesh(n, n, 1.0, 1.0)
    x, y = mesh.vertices[:, 0], mesh.vertices[:, 1]
    mesh.vertices[:, 2] = 0.2 * y**2
    mesh.pin_weights = (y >= y.max() - 1e-9).astype(float)
    truth = 4.0 + 28.0 * np.exp(-((x - 0.2) ** 2 + (y + 0.1) ** 2) / 0.1)
    lo, hi = truth.min(), truth.max()
    ranges = {**dict.fromkeys(STRUCTURAL, lo), **{f"{n}_max": hi for n in STRUCTURAL}}
    mesh.structural_stiffness_weight = (truth - lo) / (hi - lo)
    params = ClothParams(**ranges, air_damping=air)
    positions = ClothSimulator(mesh, params, precision="float64").simulate(max(FRAMES), FRAMES)
    mesh.structural_stiffness_weight = None
    start = ClothParams(**{k: 15.0 for k in ranges})
    targets = [Target(f, p) for f, p in zip(FRAMES, positions, strict=True)]
    return FitProblem(mesh, start, targets, [], maps=[MapSpec("structural")]), truth


def fitted_stiffness(result) -> np.ndarray:
    s = result.model_settings
    return s.tension_stiffness + result.maps["structural"] * (s.tension_stiffness_max - s.tension_stiffness)


def test_a_hidden_smooth_structural_map_is_recovered() -> None:
    problem, truth = hidden_map_problem()
    result = fit(problem, FitSettings(max_iterations=150))
    stiffness = fitted_stiffness(result)
    entry = result.summary()["maps"]["structural"]
    determined = np.setdiff1d(np.arange(len(truth)), entry["undetermined_vertex_indices"])
    correlation = float(np.corrcoef(stiffness[determined], truth[determined])[0, 1])
    print(
        f"\nfree map: {result.iterations} steps, stop {result.stop_reason}, RMSE {result.rmse * 1e3:.4f} mm "
        f"from {result.initial_rmse * 1e3:.3f} mm; correlation {correlation:.4f} over {len(determined)} "
        f"determined vertices; range {stiffness.min():.2f}-{stiffness.max():.2f}"
    )
    assert result.outcome == "converged", result.outcome_reason
    assert result.rmse < 0.02e-3
    assert correlation > 0.995 and len(determined) >= 80
    # the range spans the fitted values: weights exactly 0 and 1 at its ends
    assert entry["weights"]["min"] == 0.0 and entry["weights"]["max"] == pytest.approx(1.0)
    assert entry["base"] == pytest.approx(stiffness.min()) and entry["top"] == pytest.approx(stiffness.max())
    assert result.model_settings.compression_stiffness_max == pytest.approx(entry["top"])
    assert len(entry["vertex_weights"]) == len(truth) and entry["mode"] == "free"
    # the start RMSE is the problem's start (tension 15 everywhere), not a stage's
    sim = ClothSimulator(problem.mesh, problem.model_settings, precision="float64")
    off = sim.simulate(max(FRAMES), FRAMES) - np.stack([t.positions for t in problem.targets])
    assert result.initial_rmse == pytest.approx(np.sqrt(np.mean(np.sum(off**2, axis=-1))), rel=1e-6)


def test_a_free_map_fits_a_global_parameter_with_it() -> None:
    problem, truth = hidden_map_problem(n=8, air=3.0)
    problem.free_parameters = ["air_damping"]
    result = fit(problem, FitSettings(max_iterations=150))
    assert result.outcome == "converged", result.outcome_reason
    assert result.params["air_damping"] == pytest.approx(3.0, rel=0.05)
    # damped 3x, the 8 x 8 sheet shows little of its map: the best uniform stiffness already
    # leaves only 0.45 mm (the tolerance 0.32 mm), and the map that matches correlates 0.59
    # with the hidden one (0.77 at smoothness 3e-3): the motion does not determine it better
    assert np.corrcoef(fitted_stiffness(result), truth)[0, 1] > 0.5


def test_a_free_map_keeps_its_time_budget_with_the_verdict_in_it() -> None:
    """The per-vertex stage stops while the verdict (curvature probes, errors, rounding) still
    fits in the budget; the whole fit ends within it (5 % for the clock's own noise), with an
    honest outcome and the undetermined vertices measured."""
    problem, _ = hidden_map_problem()
    budget = 12.0
    result = fit(problem, FitSettings(max_iterations=150, time_budget_s=budget))
    entry = result.summary()["maps"]["structural"]
    print(
        f"\nbudget {budget} s: {result.seconds:.2f} s, {result.outcome}, RMSE {result.rmse * 1e3:.4f} mm, "
        f"{entry['undetermined_vertices']} undetermined"
    )
    assert result.stop_reason == "time_budget"
    # (without the verdict's reserve this fit ends 1.8 s past the budget)
    assert result.seconds <= 1.05 * budget
    # the stop ends the search, not the verdict: the outcome, and the vertices the targets do
    # not determine (the full fit reports 10 of 100; this one 6)
    assert result.outcome in ("converged", "stalled")
    assert (result.outcome == "converged") == (result.rmse <= result.tolerance)
    assert 0 < entry["undetermined_vertices"] < 30


def test_a_free_map_in_batches_equals_one_rollout_after_another() -> None:
    """The uniform and coarse stages' Jacobians and the curvature probes as batches (a GPU
    runs them so; each member paints its own map): the same fit, bit for bit."""
    problem, _ = hidden_map_problem(n=7)
    runs = {mode: fit(problem, FitSettings(max_iterations=8, batch_rollouts=mode)) for mode in ("off", "on")}
    one, batched = runs["off"], runs["on"]
    assert np.array_equal(one.maps["structural"], batched.maps["structural"])
    assert one.rmse == batched.rmse and one.n_forward == batched.n_forward
    assert one.loss_history == batched.loss_history
    one_entry, batched_entry = (r.summary()["maps"]["structural"] for r in (one, batched))
    assert one_entry["undetermined_vertex_indices"] == batched_entry["undetermined_vertex_indices"]
    assert one_entry["coarse"] == batched_entry["coarse"]


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


def test_box_lbfgs_judges_trial_points_against_the_trial_value_at_the_start() -> None:
    """A simulation's line value (the start's solver counts repeated) can differ from the
    value on the tape by rounding; in float32 that offset is more than a short step gains.
    The line search compares its trial points with the line's own start, so the fit goes on."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, 6))
    hessian = a @ a.T + 0.5 * np.eye(6)
    centre = rng.uniform(0.2, 0.8, 6)

    def value(x: np.ndarray) -> float:
        d = x - centre
        return 0.5 * d @ hessian @ d

    offset = 1e-4 * value(np.zeros(6))  # the trial's rounding, as seen from fun

    found = minimize_box(
        lambda x: (value(x), hessian @ (x - centre)),
        np.zeros(6),
        (np.zeros(6), np.ones(6)),
        max_iterations=200,
        rel_tol=1e-15,
        trial=lambda x: value(x) + offset,
    )
    # judged against fun's start value instead, no step gains the offset once the value is
    # within it of the minimum (measured: stopped 6.5e-3 away)
    np.testing.assert_allclose(found.x, centre, atol=1e-6)


def test_what_a_free_map_refuses() -> None:
    problem, _ = hidden_map_problem(n=4)
    problem.maps = [MapSpec("shrink")]
    with pytest.raises(FitError, match="cannot fit a 'shrink' map"):
        fit(problem, FitSettings())
    problem.maps = [MapSpec("structural"), MapSpec("bending")]
    with pytest.raises(FitError, match="fitted alone"):
        fit(problem, FitSettings())
    problem.maps = [MapSpec("structural", smoothness=-1.0)]
    with pytest.raises(FitError, match="smoothness must be >= 0"):
        fit(problem, FitSettings())
    problem.maps = [MapSpec("structural")]
    problem.free_parameters = ["tension_stiffness_max"]
    with pytest.raises(FitError, match="tension_stiffness_max is set by the fitted map"):
        fit(problem, FitSettings())


def test_the_coarse_stage_regions_share_every_vertex() -> None:
    mesh = grid_mesh(12, 9, 1.2, 0.9)
    regions = soft_regions(mesh.vertices, COARSE_REGIONS)
    weights = np.stack(list(regions.values()), axis=1)
    assert weights.shape == (mesh.vertex_count, COARSE_REGIONS)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-12)
    # each bump peaks where it sits and covers a part of the sheet, not all of it
    assert (weights.max(axis=0) > 0.5).all() and (weights.min(axis=0) < 0.05).all()


def _grid_laplacian(n: int) -> tuple[np.ndarray, np.ndarray]:
    mesh = grid_mesh(n, n, 1.0, 1.0)
    lap = np.zeros((mesh.vertex_count, mesh.vertex_count))
    for i, j in mesh.edges:
        lap[[i, j], [i, j]] += 1.0
        lap[i, j] -= 1.0
        lap[j, i] -= 1.0
    return mesh.edges, lap


def test_the_mesh_smoother_solves_with_the_laplacian_and_leaves_other_unknowns() -> None:
    edges, lap = _grid_laplacian(12)
    n = len(lap)
    smoother = MeshSmoother(edges, n)
    assert smoother.alpha == pytest.approx(4.0)  # a sixth of 12 vertices across, squared
    v = np.random.default_rng(2).standard_normal(n + 3)
    smoothed = smoother(v)
    np.testing.assert_allclose(smoothed[:n], np.linalg.solve(np.eye(n) + 4.0 * lap, v[:n]), atol=1e-8)
    np.testing.assert_array_equal(smoothed[n:], v[n:])


def test_box_lbfgs_with_the_hessian_as_preconditioner_takes_newton_steps() -> None:
    """On 0.5 (x - a)^T M (x - a) with M = I + 30 L (condition number about 240), M^-1 as the
    starting inverse Hessian makes the second step Newton's: the optimum in two steps, where
    the identity needs many."""
    edges, lap = _grid_laplacian(8)
    n = len(lap)
    hessian = np.eye(n) + 30.0 * lap
    centre = np.random.default_rng(3).uniform(-1.0, 1.0, n)

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        d = x - centre
        return 0.5 * d @ hessian @ d, hessian @ d

    box = (np.full(n, -10.0), np.full(n, 10.0))
    smoother = MeshSmoother(edges, n, alpha=30.0)
    found = minimize_box(fun, np.zeros(n), box, max_iterations=2, rel_tol=0.0, precondition=smoother)
    np.testing.assert_allclose(found.x, centre, atol=1e-6)
    plain = minimize_box(fun, np.zeros(n), box, max_iterations=10, rel_tol=0.0)
    assert np.abs(plain.x - centre).max() > 1e-2
