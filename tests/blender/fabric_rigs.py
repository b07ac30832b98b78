"""The virtual fabric rigs (``warp_core.rigs``) run by Blender's own cloth solver (real bpy).

The strip and its settings come from the rig's own functions (``cantilever_strip``,
``rig_settings``) and the reading from its own window rule (``settle_reading``), so the only
thing that differs from the rig run in this project's model is the solver. The drape
rig's and the strip rigs' (``strip_rigs``) objects are built and stepped by the same two
functions (``rig_object``, ``blender_windows``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import bpy
import numpy as np
from blender_ref import _PACKAGE, ClothMesh, ClothParams, cloth_scene, make_cloth_object, world_positions

rigs = importlib.import_module(f"{_PACKAGE.__name__}.warp_core.rigs")
_params_module = importlib.import_module(f"{_PACKAGE.__name__}.warp_core.models.blender_cloth.params")
CantileverReading = rigs.CantileverReading
CantileverRig = rigs.CantileverRig
PIN_GROUP = "Pin"


def cantilever_object(
    settings: ClothParams, rig: CantileverRig, shift_m: float = 0.0
) -> tuple[bpy.types.Object, np.ndarray]:
    """The strip of ``rig`` as a mesh object with a Cloth modifier set to the rig's settings
    (``rig_settings`` of the fabric's ``settings``: every ClothSettings field of it, and the
    scene's gravity and frame rate), its platform part in the "Pin" group, cached from frame
    1 (the flat strip) over the rig's frame limit; and the strip's vertex grid. ``shift_m``
    lifts the whole rig (the pins with it) along z: the same problem, rounded differently in
    the solver's float32."""
    mesh, grid = rigs.cantilever_strip(rig)
    ob = rig_object(mesh, rigs.rig_settings(settings, rig), "CantileverStrip", rig.frame_limit, shift_m)
    return ob, grid


def rig_object(
    mesh: ClothMesh, params: ClothParams, name: str, frame_limit: int, shift_m: float = 0.0
) -> bpy.types.Object:
    """A rig's cloth as a mesh object with a Cloth modifier set to the rig's ``params``
    (every ClothSettings field of them, and the scene's gravity and frame rate), its pinned
    vertices in the "Pin" group, cached from frame 1 (the cloth at rest) over the rig's
    ``frame_limit``; ``shift_m`` lifts the whole rig (the pins with it) along z."""
    ob = make_cloth_object(mesh, name=name, location=(0.0, 0.0, shift_m), frame_end=1 + frame_limit)
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


def blender_windows(ob: bpy.types.Object, shift_m: float = 0.0) -> Callable[[int], np.ndarray]:
    """Blender's own cloth on ``ob`` as the rigs' window rules take it: ``next_window(n)``
    steps it frame by frame (as ``blender_ref.run_blender_cloth``: a skipped frame would be
    one big step) from frame 1 and gives its positions over the ``n`` frames, (n, N, 3),
    lowered by the rig's ``shift_m``."""
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

    return next_window


def run_blender_cantilever(
    settings: ClothParams, rig: CantileverRig | None = None, shift_m: float = 0.0
) -> CantileverReading:
    """Blender's own cloth hanging the strip of ``rig`` with the fabric's ``settings``, stepped
    frame by frame from the flat strip (as ``blender_ref.run_blender_cloth``: a skipped frame
    would be one big step) and read by the rig's window rule, as ``run_cantilever`` reads
    this project's model. Leaves the strip in the scene."""
    rig = rig or CantileverRig()
    ob, grid = cantilever_object(settings, rig, shift_m)
    positions = blender_windows(ob, shift_m)
    return rigs.settle_reading(lambda count: rigs.strip_centreline(positions(count), grid), rig)


DrapeRig = rigs.DrapeRig
DrapeRunReading = rigs.DrapeRunReading


def drape_object(settings: ClothParams, rig: DrapeRig, shift_m: float = 0.0) -> bpy.types.Object:
    """The specimen of ``rig`` (``drape_specimen``) as a mesh object with a Cloth modifier set
    to the rig's settings (``drape_settings`` of the fabric's ``settings``, every
    ClothSettings field of it, and the scene's gravity and frame rate), the clamped part in
    the "Pin" group, cached from frame 1 (the flat specimen) over the rig's frame limit.
    ``shift_m`` lifts the whole rig along z, as ``cantilever_object``'s does."""
    mesh = rigs.drape_specimen(rig)
    return rig_object(mesh, rigs.drape_settings(settings, rig), "DrapeSpecimen", rig.frame_limit, shift_m)


def run_blender_drape(
    settings: ClothParams, rig: DrapeRig | None = None, shift_m: float = 0.0
) -> DrapeRunReading:
    """Blender's own cloth draping the specimen of ``rig`` with the fabric's ``settings``,
    stepped frame by frame from the flat specimen and read by the rig's window rule
    (``drape_settle``), as ``run_drape`` reads this project's model. Leaves the specimen in
    the scene."""
    rig = rig or DrapeRig()
    ob = drape_object(settings, rig, shift_m)
    next_window = blender_windows(ob, shift_m)
    return rigs.drape_settle(next_window, rigs.drape_specimen(rig), rig, rigs.drape_scale(settings, rig))
