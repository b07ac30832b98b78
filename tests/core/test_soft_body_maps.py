"""The soft body's painted material maps (``warp_core.models.soft_body.materials``): what a
weight does to the tets, the maps' gradient against central differences of whole rollouts,
and a body of three regions of hidden stiffness fitted back."""

from __future__ import annotations

import numpy as np
import pytest
from soft_body_meshes import box_mesh, swinging_goals

from warp_core.fit import FitProblem, FitSettings, Target, fit
from warp_core.fit.problem.maps import MapSpec
from warp_core.models.soft_body import SoftBodyParams, SoftBodySimulator
from warp_core.models.soft_body.adjoint import soft_body_gradient
from warp_core.models.soft_body.materials import TetBlend

FRAMES = 30
LOSS_FRAMES = [11, 21, 31]


def test_a_uniform_weight_is_the_blended_material() -> None:
    """Every vertex at weight 0.5 between E = 1e4 and 3e4 (and damping 0.01 to 0.03) moves
    the body as E = 2e4, damping 0.02 without maps, to float32 rounding (measured: the same
    bits); interior tets, far from any painted vertex, take the weight too."""
    mesh = box_mesh((0.0, 0.0, 0.05), (0.2, 0.2, 0.25), (2, 2, 2))
    plain = SoftBodyParams(young_modulus=2e4, damping=0.02, lattice_cells=3, ground=True)
    uniform = SoftBodySimulator(mesh, plain)
    expected = uniform.rollout(13, [5, 9, 13]).numpy()
    mesh.young_modulus_weight = np.full(mesh.vertex_count, 0.5)
    mesh.damping_weight = np.full(mesh.vertex_count, 0.5)
    blended = plain.replace(young_modulus=1e4, young_modulus_max=3e4, damping=0.01, damping_max=0.03)
    sim = SoftBodySimulator(mesh, blended)
    np.testing.assert_allclose(sim.rollout(13, [5, 9, 13]).numpy(), expected, rtol=0.0, atol=1e-6)
    expected = uniform.scene.model.tet_materials.numpy()
    np.testing.assert_allclose(sim.scene.model.tet_materials.numpy(), expected, rtol=1e-6)


def test_tets_take_the_weights_of_the_vertices_nearest_them() -> None:
    """A tet's weight blends its four nearest vertices by inverse distance: a centroid on a
    vertex takes that vertex's weight; the transpose carries a gradient back."""
    vertices = np.array([[0.0, 0, 0], [1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [5.0, 5, 5]])
    blend = TetBlend.nearest(np.array([[1.0, 0, 0], [0.25, 0.25, 0.25]]), vertices)
    weights = np.array([0.0, 1.0, 0.2, 0.4, 0.9])
    tets = blend.tets(weights)
    assert tets[0] == pytest.approx(1.0, abs=1e-6)
    d = np.array([0.433, 0.829, 0.829, 0.829])  # distances of the second centroid's four
    inverse = 1.0 / d
    assert tets[1] == pytest.approx(inverse @ weights[:4] / inverse.sum(), rel=1e-3)
    g = np.array([2.0, 3.0])
    assert blend.vertices(g, 5) @ weights == pytest.approx(g @ tets, rel=1e-12)


def test_the_map_gradient_matches_central_differences_of_the_rollout() -> None:
    """The hanging block of ``test_soft_body_adjoint`` with a stiffness map (weight 0.2 at
    the top to 0.8 at the bottom, E 1.3e4 to 4e4) and a damping map (0.2 to 0.8 across x,
    damping 0.03 to 0.04), VBD converged (60 iterations). Against central differences of
    the loss over three frames: the two maxima at +-1 % (measured within 2.2e-4 and 4.6e-4),
    the stiffness map along a random direction (weights +-0.01 per vertex; measured within
    1.6e-4, 1.7e-4 along another) and the damping map along a smooth one (+-0.1, where a
    damping change moves the body by more than float32's noise; measured within 3.5e-3, 4.0e-3
    along another; random directions of +-0.01 come out within 0.2-1.3, the noise's)."""
    mesh = box_mesh((0.0, 0.0, -0.3), (0.2, 0.2, 0.0), (2, 2, 3), pin=lambda v: v[:, 2] > -1e-9)
    x_, z = mesh.vertices[:, 0], mesh.vertices[:, 2]
    mesh.young_modulus_weight = 0.2 + 0.6 * np.clip(-z / 0.3, 0.0, 1.0)
    mesh.damping_weight = 0.2 + 0.6 * np.clip(x_ / 0.2, 0.0, 1.0)
    truth = SoftBodyParams(
        young_modulus=2e4,
        young_modulus_max=6e4,
        damping=0.02,
        damping_max=0.05,
        lattice_cells=3,
        iterations=60,
    )
    goals = swinging_goals(mesh, FRAMES, 0.05, 3.0)
    sim = SoftBodySimulator(mesh, truth)
    targets = sim.rollout(1 + FRAMES, LOSS_FRAMES, goals).numpy()
    start = {"young_modulus": 1.3e4, "young_modulus_max": 4e4, "damping": 0.03, "damping_max": 0.04}
    sim.set_params(start)
    painted = {kind: w.copy() for kind, w in sim.materials.weights.items()}

    def loss(values: dict[str, float] | None = None, maps: dict | None = None) -> float:
        sim.set_params(values or start)
        sim.set_maps(maps or painted)
        return 0.5 * float(np.sum((sim.rollout(1 + FRAMES, LOSS_FRAMES, goals).numpy() - targets) ** 2))

    sim.record_maps(["stiffness", "damping"])
    x = sim.rollout(1 + FRAMES, LOSS_FRAMES, goals).numpy()
    gradient = soft_body_gradient(sim, 1 + FRAMES, LOSS_FRAMES, x - targets, goals)
    by_weight = sim.map_gradients()
    assert gradient.residual < 2e-4
    for name, tolerance in (("young_modulus_max", 1e-3), ("damping_max", 1e-3)):
        h = 0.01 * start[name]
        slope = (loss({**start, name: start[name] + h}) - loss({**start, name: start[name] - h})) / (2.0 * h)
        assert gradient.parameters[name] == pytest.approx(slope, rel=tolerance), name
    rng = np.random.default_rng(0)
    d = 0.01 * rng.normal(size=mesh.vertex_count)
    s = painted["stiffness"]
    slope = (loss(maps={"stiffness": s + d}) - loss(maps={"stiffness": s - d})) / 2.0
    assert by_weight["stiffness"] @ d == pytest.approx(slope, rel=1e-3)
    d = 0.1 * np.sin(7.0 * mesh.vertices[:, 1])
    s = painted["damping"]
    slope = (loss(maps={"damping": s + d}) - loss(maps={"damping": s - d})) / 2.0
    assert by_weight["damping"] @ d == pytest.approx(slope, rel=1e-2)


def test_three_regions_of_hidden_stiffness_are_fitted_back() -> None:
    """A 10 x 10 x 30 cm bar hanging from its top face, swung 8 cm sideways, in three
    painted thirds of Young's modulus 1e4, 5e4 and 2.5e4 Pa (5x contrast); from the
    default 1e5 everywhere, Levenberg-Marquardt (VBD's default 10 iterations, 12 frames).
    Measured: converged in 10 s here, every region within 2.4e-5 and reported determined;
    the weights written span [0, 1] between the softest and the stiffest region."""
    frames_n = 12
    mesh = box_mesh((0.0, 0.0, -0.3), (0.1, 0.1, 0.0), (1, 1, 6), pin=lambda v: v[:, 2] > -1e-9)
    depth = -mesh.vertices[:, 2]
    regions = {
        "top": (depth < 0.1 - 1e-9) * 1.0,
        "middle": ((depth > 0.1 - 1e-9) & (depth < 0.2 - 1e-9)) * 1.0,
    }
    regions["bottom"] = 1.0 - regions["top"] - regions["middle"]
    truth = {"top": 1e4, "middle": 5e4, "bottom": 2.5e4}
    stiffness = sum(truth[k] * g for k, g in regions.items())
    mesh.young_modulus_weight = (stiffness - 1e4) / 4e4
    hidden = SoftBodyParams(young_modulus=1e4, young_modulus_max=5e4, damping=0.02, lattice_cells=6)
    goals = swinging_goals(mesh, frames_n, 0.08, 4.0)
    frames = list(range(3, frames_n + 2, 2))
    x = SoftBodySimulator(mesh, hidden).rollout(1 + frames_n, frames, goals).numpy()
    mesh.young_modulus_weight = None
    problem = FitProblem(
        mesh,
        SoftBodyParams(damping=0.02, lattice_cells=6),
        [Target(f, x[k]) for k, f in enumerate(frames)],
        [],
        model="soft_body",
        goals=goals,
        maps=[MapSpec("stiffness", regions)],
    )
    result = fit(problem, FitSettings(precision="float32"))
    assert result.outcome == "converged", result.outcome_reason
    entry = result.summary()["maps"]["stiffness"]
    for name, value in truth.items():
        assert result.params[f"stiffness:{name}"] == pytest.approx(value, rel=1e-3), name
        assert entry["regions"][name]["determined"], name
    assert result.model_settings.young_modulus == pytest.approx(1e4, rel=1e-3)
    assert result.model_settings.young_modulus_max == pytest.approx(5e4, rel=1e-3)
    np.testing.assert_allclose(result.maps["stiffness"], (stiffness - 1e4) / 4e4, atol=1e-3)
