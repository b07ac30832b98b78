"""The blender_cloth model against Blender's own cloth solver (bpy), every vertex at every frame."""

from __future__ import annotations

import numpy as np
import pytest
from blender_ref import (
    addon_package,
    cloth_scene,
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
        settings = dict(
            tension_stiffness=15.0, shear_stiffness=5.0, bending_stiffness=0.5, air_damping=1.0, quality=7
        )
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
    sim = addon_package().warp_core.ClothSimulator(exported_mesh, params, device="cpu")
    ours = sim.simulate(FRAMES)
    assert ours.shape == reference.shape
    displacement = np.abs(reference - reference[0]).max()
    deviation = np.abs(ours - reference).max()
    assert displacement > 0.1  # the scene really moves
    assert deviation / displacement <= tolerance, f"case {name}: {deviation / displacement:.2e}"


def test_pins_follow_an_animated_object() -> None:
    """Pinned vertices follow the keyframed object each frame; the free cloth trails behind."""
    import bpy

    mesh = grid_mesh(10, 10, 1.0, 1.0)
    frames = 30
    ob = make_cloth_object(mesh, pin_weights=pin_row_weights(mesh), settings={"quality": 5}, frame_end=frames)
    ob.keyframe_insert("location", frame=1)
    ob.keyframe_insert("rotation_euler", frame=1)
    ob.location = (0.6, 0.0, 0.3)
    ob.rotation_euler = (0.0, 0.0, 0.8)
    ob.keyframe_insert("location", frame=20)
    ob.keyframe_insert("rotation_euler", frame=20)
    scene = bpy.context.scene
    scene.frame_set(1)
    reference = run_blender_cloth(ob, frames)
    scene.frame_set(1)
    exported_mesh, params = export_from_blender(ob)
    goals = cloth_scene.sample_pin_goals(
        ob, bpy.context.evaluated_depsgraph_get(), scene, list(range(1, frames + 1))
    )
    sim = addon_package().warp_core.ClothSimulator(exported_mesh, params, device="cpu")
    ours = sim.simulate(frames, goals=goals)
    displacement = np.abs(reference - reference[0]).max()
    assert displacement > 0.5
    pinned = pin_row_weights(mesh) > 0
    np.testing.assert_allclose(ours[:, pinned], goals[:, pinned], atol=1e-5)
    deviation = np.abs(ours - reference).max() / displacement
    print(f"animated pins: deviation/displacement {deviation:.2e}")
    assert deviation <= 1e-3
