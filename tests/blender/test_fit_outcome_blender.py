"""The fit's outcome on targets made by Blender's own cloth: a fit called converged replays
in Blender within 1 mm of the targets; a scene the model does not reproduce is a misfit."""

from __future__ import annotations

import numpy as np
from blender_ref import (
    addon_package,
    corner_pin_weights,
    export_from_blender,
    grid_mesh,
    make_cloth_object,
    pin_row_weights,
    run_blender_cloth,
)


def _rmse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.sum((a - b) ** 2, axis=-1))))


def test_two_corner_sheet_from_defaults_converges_and_replays() -> None:
    """A triangulated sheet on two diagonal corners, bending and air damping fitted from
    Blender's defaults (0.5, 1): plain Levenberg-Marquardt ended 62 mm off and said ok."""
    fit_module = addon_package().warp_core.fit
    mesh = grid_mesh(12, 12, 1.0, 1.0, triangulate=True)
    corners = corner_pin_weights(mesh)
    diagonal = np.zeros_like(corners)
    on = np.flatnonzero(corners)
    diagonal[[on[0], on[-1]]] = 1.0  # the (-x, -y) and (+x, +y) corners
    truth = {"bending_stiffness": 2.0, "air_damping": 0.25}
    frames = [10, 20, 30]
    ob = make_cloth_object(mesh, pin_weights=diagonal, settings=truth, frame_end=max(frames))
    reference = run_blender_cloth(ob, max(frames))
    targets = [fit_module.Target(f, reference[f - 1]) for f in frames]
    cloth_mesh, params = export_from_blender(ob)
    start = params.replace(bending_stiffness=0.5, air_damping=1.0)
    problem = fit_module.FitProblem(cloth_mesh, start, targets, free_parameters=list(truth))
    result = fit_module.fit(problem, fit_module.FitSettings())
    assert result.outcome == "converged", result.outcome_reason
    assert result.rmse <= result.tolerance <= 1e-3
    for name, value in truth.items():
        assert abs(result.params[name] / value - 1) < 0.01, (name, result.params[name])

    settings = ob.modifiers["Cloth"].settings
    for name, value in result.params.items():
        setattr(settings, name, value)
    replay = run_blender_cloth(ob, max(frames))
    assert (
        _rmse(np.stack([replay[f - 1] for f in frames]), np.stack([reference[f - 1] for f in frames])) <= 1e-3
    )


def test_scene_gravity_the_model_does_not_see_is_a_misfit() -> None:
    """Effector gravity weight 0.5: exported as is, the fit converges; if the simulated
    gravity differed from the scene's, the best stiffness would leave centimetres, and
    the fit says so instead of reporting a stiffer cloth as a success."""
    fit_module = addon_package().warp_core.fit
    mesh = grid_mesh(8, 8, 1.0, 1.0)
    truth = {"tension_stiffness": 40.0, "compression_stiffness": 40.0, "bending_stiffness": 2.0}
    frames = [8, 16, 24]
    ob = make_cloth_object(
        mesh, pin_weights=pin_row_weights(mesh, rows=2), settings=truth, frame_end=max(frames)
    )
    ob.modifiers["Cloth"].settings.effector_weights.gravity = 0.5
    reference = run_blender_cloth(ob, max(frames))
    targets = [fit_module.Target(f, reference[f - 1]) for f in frames]
    cloth_mesh, params = export_from_blender(ob)
    assert abs(params.gravity[2] + 9.81 * 0.5) < 1e-5  # the exporter scales the scene's gravity
    start = params.replace(tension_stiffness=15.0, compression_stiffness=15.0, bending_stiffness=0.5)
    ties = {"compression_stiffness": "tension_stiffness"}
    names = ["tension_stiffness", "bending_stiffness"]

    matched = fit_module.fit(
        fit_module.FitProblem(cloth_mesh, start, targets, free_parameters=names, ties=ties)
    )
    assert matched.outcome == "converged", matched.outcome_reason
    assert abs(matched.params["tension_stiffness"] / 40.0 - 1) < 0.01

    wrong = start.replace(gravity=(0.0, 0.0, -9.81))
    result = fit_module.fit(
        fit_module.FitProblem(cloth_mesh, wrong, targets, free_parameters=names, ties=ties)
    )
    assert result.outcome == "misfit", result.outcome_reason
    assert result.rmse > 10 * result.tolerance
    assert "check the scene settings (gravity" in result.outcome_reason
