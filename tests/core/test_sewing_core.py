"""Sewing springs in the model: rest length 0, the plain tension stiffness, a capped force;
the tape's gradients through them against central finite differences (float64). Blender's
own sewing is compared in tests/blender/test_sewing.py."""

from __future__ import annotations

import numpy as np
import pytest
from tape_check import GradientCase, assert_parameter_gradients, start_off_rest

from warp_core import ClothMesh, ClothParams, grid_mesh
from warp_core.models.blender_cloth.simulator import ClothSimulator
from warp_core.models.blender_cloth.topology import SPRING_SEWING

N = 4
FRAME_END = 12
FRAMES = [4, 8, 12]


def sewn_mesh() -> ClothMesh:
    """Two N x N panels 0.2 m apart joined by N loose edges; the left panel's outer column pinned."""
    panel = grid_mesh(N, N, 0.4, 0.4)
    shift = np.array([0.3, 0.0, 0.0])
    vertices = np.vstack([panel.vertices - shift, panel.vertices + shift])
    polygons = [list(p) for p in panel.polygons()] + [[v + N * N for v in p] for p in panel.polygons()]
    mesh = ClothMesh.from_polygons(vertices, polygons)
    seams = [(r * N + N - 1, N * N + r * N) for r in range(N)]
    x = vertices[:, 0]
    pins = (x <= x.min() + 1e-9).astype(float)
    return ClothMesh(
        vertices, mesh.polygon_vertices, mesh.polygon_offsets, np.vstack([mesh.edges, seams]), pins
    )


def test_sewing_springs_are_built_from_loose_edges_only() -> None:
    mesh = sewn_mesh()
    sewn = ClothSimulator(mesh, ClothParams(use_sewing_springs=True)).topology
    plain = ClothSimulator(mesh, ClothParams()).topology
    assert int((sewn.spring_kind == SPRING_SEWING).sum()) == N
    assert not (plain.spring_kind == SPRING_SEWING).any()
    seam = sewn.spring_kind == SPRING_SEWING
    assert (sewn.spring_shrink[seam] == 0.0).all() and (sewn.spring_lin_stiffness[seam] == 0.0).all()
    with pytest.raises(ValueError, match="linear bending model"):
        ClothSimulator(mesh, ClothParams(use_sewing_springs=True, bending_model="LINEAR"))


@pytest.mark.parametrize("cap", [0.0, 0.5])
def test_tape_gradients_through_sewing_match_finite_differences(cap: float) -> None:
    # the cap 0.5 holds every seam at it (their uncapped pull starts near 22)
    params = ClothParams(use_sewing_springs=True, sewing_force_max=cap, tension_stiffness_max=30.0)
    sim = ClothSimulator(sewn_mesh(), params, precision="float64")
    rng = np.random.default_rng(1)
    x0, v0, target = start_off_rest(sim, rng, 0.002, FRAME_END, FRAMES)
    case = GradientCase(sim, FRAME_END, FRAMES, target)
    assert_parameter_gradients(case, x0, v0, ["tension_stiffness", "tension_damping", "bending_stiffness"])
    # no stiffness group, and sewing springs take no maximum: the maximum moves nothing
    _, iterations, (param_grad, _, _) = case.tape_gradients(x0, v0)
    base = sim.param_values()
    moved = case.loss(x0, v0, iterations, {"tension_stiffness_max": 2 * base["tension_stiffness_max"]})
    assert moved == case.loss(x0, v0, iterations)
    assert param_grad[list(base).index("tension_stiffness_max")] == 0.0
