"""A shared fit: one material for several objects, each with its own mesh, pins and targets.

Targets come from this model (fast, exact); the Blender-made case with the panel and the
batch command is tests/blender/test_selected_objects.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_fit import clamped_sheet

from warp_core import ClothMesh, ClothParams, ClothSimulator, grid_mesh
from warp_core.fit import FitError, FitProblem, FitSettings, Target, fit_shared
from warp_core.fit.problem.maps import MapSpec

TIE = {"compression_stiffness": "tension_stiffness"}


def hanging(n: int = 8) -> ClothMesh:
    """A vertical sheet held along its top edge: it only stretches under gravity."""
    mesh = grid_mesh(n, n, 1.0, 1.0)
    v = mesh.vertices
    mesh.vertices = np.stack([v[:, 0], np.zeros(len(v)), v[:, 1]], axis=1)
    mesh.pin_weights = (mesh.vertices[:, 2] >= mesh.vertices[:, 2].max() - 1e-9).astype(float)
    return mesh


def problem(mesh: ClothMesh, tension: float, frames: list[int]) -> FitProblem:
    truth = ClothParams(tension_stiffness=tension, compression_stiffness=tension, tension_damping=25.0)
    x = ClothSimulator(mesh, truth, precision="float64").simulate(max(frames), frames)
    start = truth.replace(tension_stiffness=15.0, compression_stiffness=15.0)
    targets = [Target(f, x[k]) for k, f in enumerate(frames)]
    return FitProblem(mesh, start, targets, free_parameters=["tension_stiffness"], ties=dict(TIE))


def test_one_object_the_shared_values_do_not_fit_is_not_hidden_by_the_others() -> None:
    """Two materials fitted as one: the large cantilever dominates the pooled RMSE, which
    alone would call the fit matched; the small hanging sheet is off by half its motion."""
    big = problem(clamped_sheet(8), 40.0, [10, 20])
    small = problem(hanging(), 80.0, [20, 30])
    result = fit_shared([big, small], FitSettings(), names=["Cantilever", "Hanging"])
    joint, (a, b) = result.joint, result.members
    assert joint.params["tension_stiffness"] == pytest.approx(40.0, rel=0.02)
    assert joint.rmse <= joint.tolerance  # the pooled RMSE alone would say matched
    assert a.outcome == "converged" and a.rmse <= a.tolerance
    assert b.rmse > 100 * b.tolerance and b.outcome == "misfit"
    assert "Hanging is not matched by the shared values" in b.outcome_reason
    assert joint.outcome == "misfit" and "Hanging" in joint.outcome_reason


def test_objects_that_fit_different_parameters_are_refused_by_name() -> None:
    a = problem(clamped_sheet(8), 40.0, [10])
    b = problem(hanging(), 40.0, [10])
    b.free_parameters, b.ties = ["tension_stiffness", "bending_stiffness"], dict(TIE)
    with pytest.raises(
        FitError, match="Hanging fits tension_stiffness, bending_stiffness, Flag tension_stiffness"
    ):
        fit_shared([a, b], FitSettings(), names=["Flag", "Hanging"])
    c = problem(hanging(), 40.0, [10])
    tris = np.array([(q[0], q[k], q[k + 1]) for q in c.mesh.polygons() for k in (1, 2)])
    c.targets = [Target(t.frame, t.positions, tris) for t in c.targets]
    c.loss = "surface"
    with pytest.raises(FitError, match=r"one loss for every object \(surface: Hanging; vertex: Flag\)"):
        fit_shared([a, c], FitSettings(), names=["Flag", "Hanging"])
    with pytest.raises(FitError, match="at least two objects"):
        fit_shared([a], FitSettings(), names=["Flag"])
    d = problem(hanging(), 40.0, [10])
    d.maps = [MapSpec("structural")]
    with pytest.raises(FitError, match="Hanging fit a weight map, which belongs to one object's mesh"):
        fit_shared([a, d], FitSettings(), names=["Flag", "Hanging"])
