"""The blender_cloth model against Blender's own cloth solver (bpy), every vertex at every frame."""

from __future__ import annotations

import numpy as np
import pytest
from blender_ref import (
    addon_package,
    corner_pin_weights,
    export_from_blender,
    grid_mesh,
    make_cloth_object,
    pin_row_weights,
    run_blender_cloth,
)

FRAMES = 60


def _case(name: str):
    if name == "d":
        mesh = grid_mesh(21, 21, 2.0, 2.0)
        pins = corner_pin_weights(mesh)
        settings = dict(tension_stiffness=15.0, shear_stiffness=5.0, bending_stiffness=0.5, air_damping=1.0,
                        quality=7)
        return mesh, pins, settings
    mesh = grid_mesh(10, 10, 1.0, 1.0, triangulate=(name == "c"))
    pins = pin_row_weights(mesh, rows=2 if name == "b" else 1)
    settings: dict = {"quality": 5}
    if name == "b":
        settings["bending_stiffness"] = 50.0
    if name == "g":
        settings["quality"] = 12
    return mesh, pins, settings


# (a) one pinned edge, defaults; (b) clamped, stiff bending; (c) triangulated;
# (d) 2 m plane, corner pins; (g) quality 12 runs 13 substeps per frame
@pytest.mark.parametrize(
    ("name", "tolerance"), [("a", 1e-3), ("b", 5e-3), ("c", 1e-3), ("d", 1e-3), ("g", 1e-3)]
)
def test_matches_blender(name: str, tolerance: float) -> None:
    mesh, pins, settings = _case(name)
    ob = make_cloth_object(mesh, pin_weights=pins, settings=settings, frame_end=FRAMES)
    reference = run_blender_cloth(ob, FRAMES)
    exported_mesh, params = export_from_blender(ob)
    sim = addon_package().warp_core.simulation.ClothSimulator(exported_mesh, params, device="cpu")
    ours = sim.simulate(FRAMES)
    assert ours.shape == reference.shape
    displacement = np.abs(reference - reference[0]).max()
    deviation = np.abs(ours - reference).max()
    assert displacement > 0.1  # the scene really moves
    assert deviation / displacement <= tolerance, f"case {name}: {deviation / displacement:.2e}"


def test_substep_count_follows_float32_loop() -> None:
    from warp_core.integrators import substep_schedule

    for quality, expected in ((5, 5), (12, 13), (19, 20), (20, 20)):
        _, starts = substep_schedule(quality, 1.0)
        assert len(starts) == expected, quality
