"""Wind and Force fields in the model: the tape's gradients through their face forces against
central finite differences (float64). Blender's own fields are compared in
tests/blender/test_force_fields.py."""

from __future__ import annotations

import numpy as np
from tape_check import GradientCase, assert_parameter_gradients, curved_sheet, start_off_rest

from warp_core import ClothMesh, ClothParams
from warp_core.models.blender_cloth.fields import FIELD_COLUMNS, FORCE, PLANE, POINT, WIND
from warp_core.models.blender_cloth.simulator import ClothSimulator

FRAME_END = 10
FRAMES = [4, 7, 10]


def field(**values: float) -> tuple[float, ...]:
    row = dict.fromkeys(FIELD_COLUMNS, 0.0)
    row.update(weight=1.0, apply_to_location=1.0, **values)
    return tuple(row[c] for c in FIELD_COLUMNS)


WIND_ROW = field(
    type=WIND,
    shape=PLANE,
    origin_y=-1.5,
    normal_y=0.5,
    normal_z=0.866,
    strength=20.0,
    flow=1.0,
    wind_factor=1.0,
)
PUSH_ROW = field(type=FORCE, shape=POINT, origin_z=0.3, strength=30.0, power=2.0, wind_factor=0.3)


def sheet(fields: tuple) -> ClothSimulator:
    vertices, polygons = curved_sheet(0.3)
    y = vertices[:, 1]
    mesh = ClothMesh.from_polygons(vertices, polygons, pin_weights=(y >= y.max() - 1e-9).astype(float))
    return ClothSimulator(mesh, ClothParams(force_fields=fields), precision="float64")


def test_fields_move_the_cloth_and_gradients_match_finite_differences() -> None:
    still = sheet(()).simulate(FRAME_END, [FRAME_END])
    sim = sheet((WIND_ROW, PUSH_ROW))
    blown = sim.simulate(FRAME_END, [FRAME_END])
    assert np.abs(blown - still).max() > 1e-3

    rng = np.random.default_rng(4)
    x0, v0, target = start_off_rest(sim, rng, 0.002, FRAME_END, FRAMES)
    case = GradientCase(sim, FRAME_END, FRAMES, target)
    assert_parameter_gradients(
        case, x0, v0, ["tension_stiffness", "bending_stiffness", "air_damping", "mass"]
    )
