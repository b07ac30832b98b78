"""Blender's sewing springs against Blender's own cloth, every vertex at every frame; a fit of
a sewn cloth replayed by Blender.

Two panels side by side with a gap between them; loose edges (in no face) join the inner
edge of one to the inner edge of the other. With sewing on, each is a spring of rest length
0 and the tension stiffness that pulls the panels together, its force capped at
``sewing_force_max`` when that is above 0.
"""

from __future__ import annotations

import numpy as np
import pytest
from blender_ref import (
    ClothMesh,
    export_from_blender,
    fit_tension_bending,
    grid_mesh,
    make_cloth_object,
    model_deviation,
    run_blender_cloth,
)

N = 6  # vertices per panel side
SIZE = 0.5  # panel side (m)
GAP = 0.2  # between the panels (m)


def panels() -> tuple[ClothMesh, np.ndarray]:
    """Two N x N panels, GAP apart along x, joined by N loose edges; the left panel's outer
    column pinned."""
    left = grid_mesh(N, N, SIZE, SIZE)
    right = grid_mesh(N, N, SIZE, SIZE)
    shift = np.array([(SIZE + GAP) / 2, 0.0, 0.0])
    vertices = np.vstack([left.vertices - shift, right.vertices + shift])
    polygons = [list(p) for p in left.polygons()] + [[v + N * N for v in p] for p in right.polygons()]
    inner_left = [r * N + (N - 1) for r in range(N)]
    inner_right = [N * N + r * N for r in range(N)]
    mesh = ClothMesh.from_polygons(vertices, polygons)
    edges = np.vstack([mesh.edges, np.array(list(zip(inner_left, inner_right, strict=True)))])
    mesh = ClothMesh(mesh.vertices, mesh.polygon_vertices, mesh.polygon_offsets, edges)
    x = vertices[:, 0]
    pins = (x <= x.min() + 1e-9).astype(float)
    return mesh, pins


def sewn_cloth(settings: dict, frames: int):
    mesh, pins = panels()
    return make_cloth_object(
        mesh, pin_weights=pins, settings={"use_sewing_springs": True, **settings}, frame_end=frames
    )


def deviation(settings: dict, frames: int, change: dict | None = None) -> tuple[float, float]:
    ob = sewn_cloth(settings, frames)
    reference = run_blender_cloth(ob, frames)
    mesh, params = export_from_blender(ob)
    assert params.use_sewing_springs and params.sewing_force_max == pytest.approx(
        settings.get("sewing_force_max", 0.0)
    )
    if change:
        params = params.replace(**change)
    return model_deviation(mesh, params, reference)


# Limits about 10 times the deviation measured (max over vertices and frames / largest
# displacement, 60 frames). With a tension maximum above the tension (which Blender keeps
# after the tension is lowered) the sewing springs still take the plain tension: Blender
# resets their group weight to 0 before every step.
@pytest.mark.parametrize(
    ("settings", "tolerance"),
    [
        ({}, 4.5e-4),  # measured 4.5e-5
        ({"sewing_force_max": 2.0}, 1.0e-4),  # measured 1.0e-5
        # measured 2.0e-4; with the maximum in the sewing springs (the weight Blender's build
        # gives them) the model ended 19 mm RMS off at frame 30
        ({"tension_stiffness": 30.0, "tension_stiffness_max": 40.0}, 1.0e-3),
    ],
)
def test_matches_blender(settings: dict, tolerance: float) -> None:
    dev, displacement = deviation(settings, 60)
    assert displacement > 0.2  # the panels really move
    assert dev <= tolerance, f"{settings}: {dev:.2e}"


def test_the_cap_and_the_sewing_matter() -> None:
    """The same comparison with our model ignoring the cap (measured 0.11), or the sewing
    (0.24: the loose edges become plain structural springs): far off."""
    capped = {"sewing_force_max": 2.0}
    assert deviation(capped, 60, {"sewing_force_max": 0.0})[0] > 0.05
    assert deviation(capped, 60, {"use_sewing_springs": False})[0] > 0.1


def test_fit_of_a_sewn_cloth_replays_in_blender() -> None:
    """Tension (compression tied) and bending fitted from Blender's defaults on targets made
    by Blender's cloth with capped sewing; the fitted values re-simulated by Blender hit the
    targets."""
    truth = {"tension_stiffness": 40.0, "compression_stiffness": 40.0, "bending_stiffness": 2.0}
    frames = [10, 20, 30]
    result, rmse = fit_tension_bending(sewn_cloth({"sewing_force_max": 2.0, **truth}, max(frames)), frames)
    # measured: tension 39.994, bending 1.908 (weakly determined here), model RMSE 0.17 mm,
    # Blender's replay 0.24 mm
    assert result.outcome == "converged", result.outcome_reason
    assert result.params["tension_stiffness"] == pytest.approx(40.0, rel=0.01)
    assert rmse <= 1e-3, rmse
