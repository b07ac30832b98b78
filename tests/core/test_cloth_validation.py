"""Bad meshes and parameters give a ValueError naming the problem and the first indices."""

from __future__ import annotations

import numpy as np
import pytest

from warp_core import ClothMesh, ClothParams, ClothSimulator, grid_mesh
from warp_core.models.blender_cloth.schedule import substep_schedule


def _quad_strip() -> tuple[np.ndarray, list[list[int]]]:
    v = np.array([(0, 0, 0), (1, 0, 0), (1, 1, 0), (0, 1, 0), (2, 0, 0), (2, 1, 0)], dtype=float)
    return v, [[0, 1, 2, 3], [1, 4, 5, 2]]


def test_valid_strip_builds() -> None:
    v, polys = _quad_strip()
    sim = ClothSimulator(ClothMesh.from_polygons(v, polys), ClothParams())
    assert np.isfinite(sim.simulate(3)).all()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda v, p: (np.where(np.arange(18).reshape(6, 3) == 4, np.nan, v), p),
            "NaN or infinite at vertices 1",
        ),
        (lambda v, p: (np.where(np.arange(18).reshape(6, 3) == 15, np.inf, v), p), "vertices 5"),
        (lambda v, p: (np.vstack([v, v[2]]), p + [[1, 6, 2]]), "duplicate vertices"),
        (lambda v, p: (np.vstack([v, [(5, 5, 5)]]), p), "loose vertices.*6"),
        (lambda v, p: (np.vstack([v, [(3, 0, 0)]]), p + [[4, 6, 1]]), "zero-area polygon 2"),
        (lambda v, p: (np.vstack([v, [(1, 0.5, 1)]]), p + [[1, 2, 6]]), "three or more faces.*\\(1, 2\\)"),
        (lambda v, p: (v, p + [[0, 1]]), "fewer than 3 corners: 2"),
        (lambda v, p: (v, p + [[0, 1, 9]]), "out of range"),
    ],
)
def test_bad_meshes_are_rejected(change, message: str) -> None:
    v, polys = change(*_quad_strip())
    with pytest.raises(ValueError, match=message):
        ClothSimulator(ClothMesh.from_polygons(v, polys), ClothParams())


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"tension_stiffness": -1.0}, "tension_stiffness = -1.0 is outside"),
        ({"air_damping": 11.0}, "air_damping"),
        ({"mass": 0.0}, "mass must be > 0"),
        ({"bending_damping": float("nan")}, "bending_damping must be a finite number"),
        ({"quality": 0}, "quality"),
        ({"time_scale": 0.0}, "time_scale"),
        ({"bending_model": "CURVED"}, "bending_model"),
    ],
)
def test_bad_parameters_are_rejected(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ClothSimulator(grid_mesh(3, 3), ClothParams().replace(**changes))


def test_bad_pin_goals_are_rejected() -> None:
    sim = ClothSimulator(grid_mesh(3, 3), ClothParams())
    with pytest.raises(ValueError, match="pin goals must have shape"):
        sim.simulate(5, goals=np.zeros((2, 9, 3)))
    goals = np.repeat(sim.mesh.vertices[None], 6, axis=0)
    goals[3, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        sim.simulate(5, goals=goals)


def test_springs_and_hinges_follow_blender() -> None:
    """A quad strip: 7 edges, 2 diagonals per quad; hinges on the shared edge and on each diagonal."""
    v, polys = _quad_strip()
    sim = ClothSimulator(ClothMesh.from_polygons(v, polys), ClothParams())
    top = sim.topology
    assert (top.spring_kind == 0).sum() == 7 and (top.spring_kind == 1).sum() == 4
    assert len(top.hinge_spring) == 1 + 4
    # the first springs are the last polygon's diagonals, (c0, c2) then (c1, c3)
    assert top.spring_vertices[:2].tolist() == [[1, 5], [2, 4]]
    linear = ClothSimulator(ClothMesh.from_polygons(v, polys), ClothParams(bending_model="LINEAR")).topology
    assert len(linear.hinge_spring) == 0 and (linear.spring_kind == 2).sum() > 0
    tri = ClothSimulator(grid_mesh(4, 4, triangulate=True), ClothParams(bending_model="LINEAR")).topology
    assert (tri.spring_kind == 2).sum() == 0  # a triangulated mesh has no linear bending springs
    assert np.isclose(sim.avg_spring_length, np.mean([1, 1, 1, 1, 1, 1, 1]))


def test_substep_count_follows_float32_loop() -> None:
    for quality, expected in ((5, 5), (12, 13), (19, 20), (20, 20)):
        _, starts = substep_schedule(quality, 1.0)
        assert len(starts) == expected, quality


@pytest.mark.parametrize(("n", "settings"), [(6, {"quality": 3}), (16, {"tension_stiffness": 2000.0})])
def test_graph_and_kernel_by_kernel_paths_agree(n: int, settings: dict) -> None:
    """The captured-graph path (CG iterations in blocks, each run only while the CG is
    active, masked past convergence within a block) computes exactly what the
    launch-by-launch path with host convergence checks computes; also with the counts held
    (exactly, or as a tangent holds them)."""
    mesh = grid_mesh(n, n)
    mesh.pin_weights = (mesh.vertices[:, 1] >= mesh.vertices[:, 1].max() - 1e-9).astype(float)
    graphs = ClothSimulator(mesh, ClothParams(**settings))
    plain = ClothSimulator(mesh, ClothParams(**settings))
    plain.graphs_enabled = False
    a, b = graphs.rollout(12, keep_states=False), plain.rollout(12, keep_states=False)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(a.cg_iterations, b.cg_iterations)
    for frozen in (a.cg_iterations, a.frozen):
        np.testing.assert_array_equal(graphs.rollout(12, keep_states=False, frozen=frozen).numpy(), a.numpy())
        np.testing.assert_array_equal(plain.rollout(12, keep_states=False, frozen=frozen).numpy(), a.numpy())
    if n == 16:  # the stiff sheet reaches the later blocks
        assert a.cg_iterations.max() > 32, a.cg_iterations.max()
