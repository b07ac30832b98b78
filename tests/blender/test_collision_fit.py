"""Fits through object collisions, targets made by Blender's own cloth at hidden values
(tension 40, bending 2), fitted from Blender's defaults (15, 0.5) from the add-on's
exported inputs, the fitted values written back and replayed by Blender."""

from __future__ import annotations

import importlib

import numpy as np
from blender_ref import addon_package
from collision_scenes import drape_over_table, drop_on_sphere, export_problem_inputs, run_blender_cloth

fit_module = importlib.import_module(f"{addon_package().__name__}.warp_core.fit")
TRUTH = {"tension_stiffness": 40.0, "bending_stiffness": 2.0}


def fit_scene(build, frames: list[int]):
    """(scene, cloth object, Blender's target positions by frame, the fit's result)."""
    scene, ob = build()
    settings = ob.modifiers["Cloth"].settings
    for name, value in TRUTH.items():
        setattr(settings, name, value)
    blender = run_blender_cloth(scene, ob, max(frames))
    mesh, params, goals = export_problem_inputs(scene, ob, max(frames))
    start = params.replace(tension_stiffness=15.0, bending_stiffness=0.5)
    targets = [fit_module.Target(f, blender[f - 1]) for f in frames]
    problem = fit_module.FitProblem(mesh, start, targets, free_parameters=list(TRUTH), goals=goals)
    result = fit_module.fit(problem, fit_module.FitSettings())
    return scene, ob, {f: blender[f - 1] for f in frames}, result


def replay_rmse(scene, ob, values: dict[str, float], targets: dict[int, np.ndarray]) -> float:
    settings = ob.modifiers["Cloth"].settings
    for name, value in values.items():
        setattr(settings, name, value)
    replay = run_blender_cloth(scene, ob, max(targets))
    errors = np.concatenate([np.linalg.norm(replay[f - 1] - x, axis=1) for f, x in targets.items()])
    return float(np.sqrt(np.mean(errors**2)))


def test_drape_over_table_fit_replays_in_blender_within_a_millimetre() -> None:
    scene, ob, targets, result = fit_scene(drape_over_table, [10, 15, 20])
    # measured: tension 39.71, bending 2.0002, the model 0.18 mm from Blender's target;
    # Blender's replay of the fitted values 0.086 mm RMSE (its own result moves 0.078 mm
    # when the tension changes by one part in a million)
    assert abs(result.params["bending_stiffness"] / TRUTH["bending_stiffness"] - 1) < 0.01, result.params
    assert abs(result.params["tension_stiffness"] / TRUTH["tension_stiffness"] - 1) < 0.05, result.params
    assert result.rmse < 5e-4, result.rmse
    assert replay_rmse(scene, ob, result.params, targets) <= 1e-3


def test_drop_on_sphere_is_not_called_a_match() -> None:
    """The sheet slides off the sphere: Blender's own result moves by 1.1 mm RMS (5 mm at a
    vertex) at these frames when the tension changes by one part in a million, and by 8.7 mm
    RMS over 60 frames when the cloth starts 1 µm higher, so no fit can promise a replay within
    a millimetre; the fit must not say it matched."""
    _, _, _, result = fit_scene(drop_on_sphere, [8, 12, 16])
    assert result.outcome != "converged", (result.outcome, result.outcome_reason)
    assert result.rmse > result.tolerance
