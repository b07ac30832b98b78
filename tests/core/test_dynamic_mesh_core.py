"""Dynamic mesh in the model: the rest shape measured again on the input mesh every frame;
the tape's gradients through it against central finite differences (float64). Blender's own
dynamic mesh is compared in tests/blender/test_dynamic_mesh.py."""

from __future__ import annotations

import numpy as np
from tape_check import GradientCase, assert_parameter_gradients, curved_sheet, start_off_rest

from warp_core import ClothMesh, ClothParams
from warp_core.models.blender_cloth.simulator import ClothSimulator

FRAME_END = 12
FRAMES = [4, 8, 12]


def growing(dynamic: bool) -> tuple[ClothSimulator, np.ndarray]:
    """A curved sheet pinned along one row whose input mesh grows 3 % a frame away from it."""
    vertices, polygons = curved_sheet(0.3)
    y = vertices[:, 1]
    mesh = ClothMesh.from_polygons(vertices, polygons, pin_weights=(y >= y.max() - 1e-9).astype(float))
    scale = 1.0 + 0.03 * np.arange(FRAME_END)  # frames 1 to FRAME_END
    goals = np.stack(
        [np.column_stack([vertices[:, 0] * s, y.max() - (y.max() - y) * s, vertices[:, 2]]) for s in scale]
    )
    params = ClothParams(use_dynamic_mesh=dynamic, bending_stiffness=2.0, shrink_min=0.05)
    return ClothSimulator(mesh, params, precision="float64"), goals


def test_the_rest_shape_follows_the_input_mesh() -> None:
    dynamic, goals = growing(True)
    static, _ = growing(False)
    a = dynamic.simulate(FRAME_END, [FRAME_END], goals)
    b = static.simulate(FRAME_END, [FRAME_END], goals)
    # a cloth whose rest shape grew by 33 % has its edges about that much longer
    edges = dynamic.topology.spring_vertices[dynamic.topology.structural_mask]

    def mean_edge(x: np.ndarray) -> float:
        return float(np.linalg.norm(x[edges[:, 1]] - x[edges[:, 0]], axis=1).mean())

    assert mean_edge(a[-1]) > 1.25 * mean_edge(b[-1])
    # and the rest lengths it ended with are the last input mesh's, shrunk
    rest = dynamic.solver.arrays.spring_rest_length.numpy()
    springs = dynamic.topology.spring_vertices
    expected = np.linalg.norm(goals[-1][springs[:, 1]] - goals[-1][springs[:, 0]], axis=1) * 0.95
    np.testing.assert_allclose(rest, expected, rtol=1e-12)


def test_tape_gradients_with_a_dynamic_mesh_match_finite_differences() -> None:
    sim, goals = growing(True)
    rng = np.random.default_rng(2)
    x0, v0, target = start_off_rest(sim, rng, 0.002, FRAME_END, FRAMES, goals)
    case = GradientCase(sim, FRAME_END, FRAMES, target, goals)
    assert_parameter_gradients(
        case, x0, v0, ["tension_stiffness", "bending_stiffness", "tension_damping", "air_damping"]
    )
