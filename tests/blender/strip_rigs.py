"""The strip tensile rigs (``warp_core.rigs.tensile``) run by Blender's own cloth (real bpy).

The strip and its settings come from the rig's own functions (``strip_mesh``,
``strip_settings``) and the reading from its own window rule (``strip_reading``), so the
only thing that differs from the rig run in this project's model is the solver.
"""

from __future__ import annotations

import importlib

import bpy
from blender_ref import _PACKAGE, ClothParams
from fabric_rigs import PIN_GROUP, blender_windows, rig_object

tensile = importlib.import_module(f"{_PACKAGE.__name__}.warp_core.rigs.tensile")
StripReading = tensile.StripReading
StripRig = tensile.StripRig
__all__ = ["PIN_GROUP", "StripReading", "StripRig", "run_blender_strip", "strip_object"]


def strip_object(settings: ClothParams, rig: StripRig, shift_m: float = 0.0) -> bpy.types.Object:
    """The strip of ``rig`` as a mesh object with a Cloth modifier set to the rig's settings
    (``strip_settings`` of the fabric's ``settings``: every ClothSettings field of it, and
    the scene's gravity and frame rate), its clamped vertices in the "Pin" group, cached from
    frame 1 (the strip at rest) over the rig's frame limit. ``shift_m`` lifts the whole rig
    (the pins with it) along z: the same problem, rounded differently in Blender's float32."""
    mesh, _ = tensile.strip_mesh(rig)
    return rig_object(mesh, tensile.strip_settings(settings, rig), "TensileStrip", rig.frame_limit, shift_m)


def run_blender_strip(
    settings: ClothParams, rig: StripRig | None = None, shift_m: float = 0.0
) -> StripReading:
    """Blender's own cloth hanging the strip of ``rig`` with the fabric's ``settings``, stepped
    frame by frame from rest (a skipped frame would be one big step) and read by the rig's
    window rule, as ``run_strip`` reads this project's model. Leaves the strip in the scene."""
    rig = rig or StripRig()
    ob = strip_object(settings, rig, shift_m)
    return tensile.strip_reading(blender_windows(ob, shift_m), rig)
