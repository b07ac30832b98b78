"""Targets made by Blender's own cloth: the fitted values, set on Blender's modifier and
re-simulated by Blender, reproduce the target frames."""

from __future__ import annotations

import numpy as np
from blender_ref import addon_package, export_from_blender, grid_mesh, make_cloth_object, run_blender_cloth


def test_fit_transfers_back_to_blender() -> None:
    warp_core = addon_package().warp_core
    fit_module = warp_core.fit
    mesh = grid_mesh(8, 8, 1.0, 1.0)
    y = mesh.vertices[:, 1]
    pins = (y >= np.unique(y)[-2] - 1e-9).astype(float)  # clamped: tension and bending both show
    truth = {"tension_stiffness": 40.0, "bending_stiffness": 2.0}
    frames = [10, 20]
    ob = make_cloth_object(mesh, pin_weights=pins, settings=truth, frame_end=max(frames))
    reference = run_blender_cloth(ob, max(frames))
    targets = [fit_module.Target(f, reference[f - 1]) for f in frames]

    cloth_mesh, params = export_from_blender(ob)
    start = params.replace(tension_stiffness=15.0, bending_stiffness=0.6)
    problem = fit_module.FitProblem(cloth_mesh, start, targets, fit=list(truth))
    result = fit_module.fit(problem, fit_module.FitSettings())
    assert result.rmse_m < 1e-3
    assert result.outcome == "converged", result.outcome_reason
    assert result.tolerance_m == min(1e-3, 1e-3 * result.motion_m)

    settings = ob.modifiers["Cloth"].settings
    for name, value in result.params.items():
        setattr(settings, name, value)
    replay = run_blender_cloth(ob, max(frames))
    error = np.concatenate([replay[f - 1] - reference[f - 1] for f in frames])
    rmse = float(np.sqrt(np.mean(np.sum(error**2, axis=1))))
    assert rmse <= 1e-3, rmse
    for name, value in truth.items():
        assert abs(result.params[name] / value - 1) < 0.05, (name, result.params[name])
