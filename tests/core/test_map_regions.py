"""Region maps in the fit engine (``warp_core.fit.problem.maps``): one stiffness per painted
region as a fit parameter, blended as painted, written as weights that span [0, 1].

The sheet: 8 x 8, 1 m, curved, hanging from its top row; its left half (region A) has
tension 4, its right half (B) 30, a model-made hidden map. From a uniform 15 the engine's
Levenberg–Marquardt finds both within 1e-4 relative (about 0.5 s here); the region tape
gradient agrees with central differences of the loss to 1e-6 relative.
"""

from __future__ import annotations

import numpy as np
import pytest

from warp_core import ClothParams, grid_mesh
from warp_core.fit import FitError, FitObjective, FitProblem, FitSettings, Target, fit
from warp_core.fit.problem.maps import MapSpec
from warp_core.models.blender_cloth.simulator import ClothSimulator

FRAMES = [5, 10, 15]
TRUTH = {"A": 4.0, "B": 30.0}
STRUCTURAL = ("tension_stiffness", "compression_stiffness")
STRUCTURAL += tuple(f"{n}_max" for n in STRUCTURAL)


def two_region_problem(blend: float = 0.0) -> tuple[FitProblem, dict[str, np.ndarray]]:
    """The sheet with regions A (left) and B (right); ``blend`` > 0 paints a soft border of
    that width, so the middle vertices share both regions."""
    mesh = grid_mesh(8, 8, 1.0, 1.0)
    x, y = mesh.vertices[:, 0], mesh.vertices[:, 1]
    mesh.vertices[:, 2] = 0.2 * y**2
    mesh.pin_weights = (y >= y.max() - 1e-9).astype(float)
    a = np.clip(0.5 - x / blend, 0.0, 1.0) if blend else (x < 0).astype(float)
    regions = {"A": a, "B": 1.0 - a}
    s = TRUTH["A"] * a + TRUTH["B"] * (1.0 - a)
    lo, hi = s.min(), s.max()
    params = ClothParams(
        tension_stiffness=lo, compression_stiffness=lo, tension_stiffness_max=hi, compression_stiffness_max=hi
    )
    mesh.structural_stiffness_weight = (s - lo) / (hi - lo)
    positions = ClothSimulator(mesh, params, precision="float64").simulate(max(FRAMES), FRAMES)
    mesh.structural_stiffness_weight = None
    start = ClothParams(**dict.fromkeys(STRUCTURAL, 15.0))
    targets = [Target(f, p) for f, p in zip(FRAMES, positions, strict=True)]
    return FitProblem(mesh, start, targets, [], maps=[MapSpec("structural", regions)]), regions


@pytest.mark.parametrize("blend", [0.0, 0.4])
def test_hidden_region_values_are_found(blend: float) -> None:
    problem, regions = two_region_problem(blend)
    result = fit(problem, FitSettings())
    assert result.outcome == "converged", result.outcome_reason
    for name, value in TRUTH.items():
        assert result.params[f"structural:{name}"] == pytest.approx(value, rel=1e-3)
    # the range spans the regions' values; the weights reproduce the painted blend
    settings = result.model_settings
    assert settings.tension_stiffness == pytest.approx(4.0, rel=1e-3)
    assert settings.tension_stiffness_max == pytest.approx(30.0, rel=1e-3)
    assert settings.compression_stiffness_max == pytest.approx(settings.tension_stiffness_max)
    np.testing.assert_allclose(result.maps["structural"], regions["B"], atol=1e-3)
    entry = result.summary()["maps"]["structural"]
    assert entry["mode"] == "regions" and entry["regions"]["B"]["determined"]
    assert entry["regions"]["A"]["value"] == pytest.approx(4.0, rel=1e-3)
    # how closely the motion pins each region: the factors that still match the targets
    for name, region in entry["regions"].items():
        low, high = region["matched_range"]
        assert 0.5 < low < 1.0 < high < 2.0, name
        found = next(e for e in result.identifiability if e["name"] == f"structural:{name}")
        assert region["matched_range"] == pytest.approx(found["matched_range"])
    assert entry["weights"]["min"] == 0.0 and entry["weights"]["max"] == pytest.approx(1.0)


def test_the_region_tape_gradient_agrees_with_central_differences() -> None:
    problem, _ = two_region_problem(0.4)
    names = ["structural:A", "structural:B"]
    objective = FitObjective(problem, FitSettings(gradient="exact"), names)
    values = {"structural:A": 6.0, "structural:B": 20.0}
    _, grad = objective.gradient(values)
    h = 1e-4
    for name in names:
        up, down = dict(values), dict(values)
        up[name] *= 1 + h
        down[name] *= 1 - h
        loss = [0.5 * float(np.sum(objective.residuals(v) ** 2)) for v in (up, down)]
        slope = (loss[0] - loss[1]) / (2 * h * values[name])
        assert grad[name] == pytest.approx(slope, rel=1e-5), name


def test_what_a_region_fit_refuses() -> None:
    problem, regions = two_region_problem()
    problem.free_parameters = ["tension_stiffness_max"]
    with pytest.raises(FitError, match="tension_stiffness_max is set by the fitted map"):
        fit(problem, FitSettings())
    problem.free_parameters = []
    problem.maps = [MapSpec("shrink", regions)]
    with pytest.raises(FitError, match="cannot fit a 'shrink' map"):
        fit(problem, FitSettings())
    problem.maps = [MapSpec("structural", {"A": regions["A"] * 0.0})]
    with pytest.raises(FitError, match="holds no vertex"):
        fit(problem, FitSettings())
    problem.maps = [MapSpec("structural", {"A": regions["A"][:5]})]
    with pytest.raises(FitError, match="one weight in"):
        fit(problem, FitSettings())
