"""The strip tensile rigs (``warp_core.rigs.tensile``) run by Blender's own cloth (real bpy).

The strip and its settings come from the rig's own functions (``strip_mesh``,
``strip_settings``) and the reading from its own window rule (``strip_reading``), so the
only thing that differs from the rig run in this project's model is the solver.
"""

from __future__ import annotations

import importlib

import bpy
import numpy as np
from blender_ref import _PACKAGE, ClothParams, cloth_scene, make_cloth_object, world_positions

tensile = importlib.import_module(f"{_PACKAGE.__name__}.warp_core.rigs.tensile")
_params_module = importlib.import_module(f"{_PACKAGE.__name__}.warp_core.models.blender_cloth.params")
StripReading = tensile.StripReading
StripRig = tensile.StripRig
PIN_GROUP = "Pin"


def strip_object(settings: ClothParams, rig: StripRig, shift_m: float = 0.0) -> bpy.types.Object:
    """The strip of ``rig`` as a mesh object with a Cloth modifier set to the rig's settings
    (``strip_settings`` of the fabric's ``settings``: every ClothSettings field of it, and
    the scene's gravity and frame rate), its clamped vertices in the "Pin" group, cached from
    frame 1 (the strip at rest) over the rig's frame limit. ``shift_m`` lifts the whole rig
    (the pins with it) along z: the same problem, rounded differently in Blender's float32."""
    mesh, _ = tensile.strip_mesh(rig)
    params = tensile.strip_settings(settings, rig)
    ob = make_cloth_object(
        mesh, name="TensileStrip", location=(0.0, 0.0, shift_m), frame_end=1 + rig.frame_limit
    )
    # the group is named as an artist would; make_cloth_object calls it "pin"
    ob.vertex_groups["pin"].name = PIN_GROUP
    mod = cloth_scene.find_cloth_modifier(ob)
    mod.settings.vertex_group_mass = PIN_GROUP
    cloth_scene.set_modifier_values(
        mod, {name: getattr(params, name) for name in _params_module.CLOTH_SETTINGS_FIELDS}
    )
    scene = bpy.context.scene
    scene.use_gravity = True
    scene.gravity = params.gravity
    mod.settings.effector_weights.gravity = 1.0
    scene.render.fps = round(params.fps)
    scene.render.fps_base = 1.0
    return ob


def run_blender_strip(
    settings: ClothParams, rig: StripRig | None = None, shift_m: float = 0.0
) -> StripReading:
    """Blender's own cloth hanging the strip of ``rig`` with the fabric's ``settings``, stepped
    frame by frame from rest (a skipped frame would be one big step) and read by the rig's
    window rule, as ``run_strip`` reads this project's model. Leaves the strip in the scene."""
    rig = rig or StripRig()
    ob = strip_object(settings, rig, shift_m)
    scene = bpy.context.scene
    scene.frame_set(1)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    shift = np.array([0.0, 0.0, shift_m])
    frame = [1]

    def next_window(count: int) -> np.ndarray:
        positions = []
        for _ in range(count):
            frame[0] += 1
            scene.frame_set(frame[0])
            positions.append(world_positions(ob, depsgraph) - shift)
        return np.stack(positions)

    return tensile.strip_reading(next_window, rig)
