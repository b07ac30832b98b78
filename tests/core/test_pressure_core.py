"""Pressure in the model: Blender's triangles of a closed mesh, the volume it returns to, and
the tape's gradients through the pressure force against central finite differences
(float64). Blender's own pressure is compared in tests/blender/test_pressure.py."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from tape_check import GradientCase, assert_parameter_gradients, start_off_rest

from warp_core import ClothMesh, ClothParams
from warp_core.models.blender_cloth.pressure import pressure_kernels, pressure_tables
from warp_core.models.blender_cloth.simulator import ClothSimulator

FRAME_END = 10
FRAMES = [4, 7, 10]


def box(n: int = 3, size: float = 0.5) -> ClothMesh:
    """A closed box of quads, outward normals, n quads along each edge; the top face pinned."""
    points: dict[tuple, int] = {}
    polygons = []
    grid = np.linspace(-size / 2, size / 2, n + 1)
    for axis in range(3):
        for side in (-1.0, 1.0):
            u, w = (axis + 1) % 3, (axis + 2) % 3  # e_u x e_w = e_axis
            if side < 0:
                u, w = w, u  # keep the normal pointing out
            for i in range(n):
                for j in range(n):
                    quad = []
                    for di, dj in ((0, 0), (1, 0), (1, 1), (0, 1)):
                        p = [0.0, 0.0, 0.0]
                        p[axis], p[u], p[w] = side * size / 2, grid[i + di], grid[j + dj]
                        key = tuple(np.round(p, 9))
                        quad.append(points.setdefault(key, len(points)))
                    polygons.append(quad)
    vertices = np.array(list(points), dtype=np.float64)
    pins = (vertices[:, 2] >= size / 2 - 1e-9).astype(float)
    return ClothMesh.from_polygons(vertices, polygons, pin_weights=pins)


def test_triangles_and_rest_volume_are_blenders() -> None:
    mesh = box()
    tris, offsets, ids = pressure_tables(mesh)
    assert len(tris) == 2 * len(mesh.polygons())  # quads split along their first diagonal
    assert tris[1].tolist() == [mesh.polygons()[0][k] for k in (0, 2, 3)]
    assert offsets[-1] == 3 * len(tris) and len(ids) == 3 * len(tris)
    sim = ClothSimulator(mesh, ClothParams(use_pressure=True), precision="float64")
    # the signed volume of the closed box, outward normals: its volume
    assert sim.solver.arrays.initial_volume.numpy()[0] == pytest.approx(0.5**3, rel=1e-12)
    target = ClothSimulator(mesh, ClothParams(use_pressure=True, use_pressure_volume=True, target_volume=0.2))
    assert target.solver.arrays.initial_volume.numpy()[0] == pytest.approx(0.2)
    x = wp.array(mesh.vertices * 1.1, dtype=wp.types.vector(3, wp.float64))
    volume = wp.zeros(1, dtype=wp.float64)
    wp.launch(
        pressure_kernels(wp.float64).mesh_volume,
        dim=1,
        inputs=[x, sim.solver.arrays.pressure_tris],
        outputs=[volume],
    )
    assert volume.numpy()[0] == pytest.approx(1.1**3 * 0.5**3, rel=1e-12)


def test_pressure_inflates_and_its_gradients_match_finite_differences() -> None:
    params = ClothParams(use_pressure=True, uniform_pressure_force=3.0, pressure_factor=1.5)
    sim = ClothSimulator(box(), params, precision="float64")
    plain = ClothSimulator(box(), params.replace(use_pressure=False), precision="float64")
    inflated, hanging = sim.simulate(FRAME_END, [FRAME_END]), plain.simulate(FRAME_END, [FRAME_END])
    centre = box().vertices.mean(axis=0)
    assert (
        np.linalg.norm(inflated[-1] - centre, axis=1).mean()
        > np.linalg.norm(hanging[-1] - centre, axis=1).mean()
    )

    rng = np.random.default_rng(3)
    x0, v0, target = start_off_rest(sim, rng, 0.002, FRAME_END, FRAMES)
    case = GradientCase(sim, FRAME_END, FRAMES, target)
    assert_parameter_gradients(
        case, x0, v0, ["tension_stiffness", "bending_stiffness", "air_damping", "mass"]
    )
