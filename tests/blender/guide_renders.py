"""The artist guide's fit and its renders: the guide scene (``guide_scene.py``) fitted with the
panel's operator, and the cloth coloured by *Show Fit Error* rendered by Cycles on the CPU,
once with the modifier's start values and once with the fitted ones (*Revert*, then *Apply*),
from the same camera, with the target shape as a grey wire.

Used by ``tools/guide_pictures.py``; slow (a fit and two renders), so no test runs it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import bpy  # noqa: I001  (guide_scene set up the Blender profile)
import mathutils
import numpy as np

RENDER_PX = (480, 300)
SAMPLES = 16
THREADS = 2
CAMERA_AT = (1.45, -0.75, 1.3)
LOOK_AT = (0.0, 0.68, 0.63)
LENS_MM = 42.0
BACKGROUND_RGB = (0.18, 0.18, 0.18)
WIRE_RGB = (0.85, 0.85, 0.85)


def fit(ob: bpy.types.Object) -> dict[str, Any]:
    """Fit ``ob`` with ``object.fit_to_target`` (from a script it runs to the end before it
    returns) and return its result record."""
    for other in bpy.context.view_layer.objects:
        other.select_set(other == ob)
    bpy.context.view_layer.objects.active = ob
    if bpy.ops.object.fit_to_target() != {"FINISHED"}:
        raise RuntimeError(f"the fit of '{ob.name}' did not finish")
    return json.loads(ob.fit_to_target.result_json)


def error_pictures(ob: bpy.types.Object, frame: int, folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """RGB (height, width, 3) uint8 renders, top row first, of ``ob`` coloured by its fit error
    at target ``frame``: with the start values (*Revert*), then the fitted ones (*Apply*).
    Leaves the fitted values applied and their error shown."""
    scene = bpy.context.scene
    target = next(t.object for t in ob.fit_to_target.targets if int(t.frame) == frame)
    _stage(scene, ob, target)
    pictures = []
    for operator in (bpy.ops.object.fit_to_target_revert, bpy.ops.object.fit_to_target_apply):
        if operator() != {"FINISHED"}:
            raise RuntimeError(f"{operator.idname_py()} did not finish on '{ob.name}'")
        pictures.append(_error_render(scene, ob, frame, folder / f"error-{len(pictures)}.png"))
    return pictures[0], pictures[1]


def _error_render(scene: bpy.types.Scene, ob: bpy.types.Object, frame: int, path: Path) -> np.ndarray:
    scene.frame_set(frame)
    if bpy.ops.object.fit_to_target_show_error() != {"FINISHED"}:
        raise RuntimeError(f"Show Fit Error did not finish on '{ob.name}'")
    # the colours changed the mesh, which empties the cloth's cache: Blender's cloth simulates
    # frame after frame from the cache start, so the render finds the frame in the cache
    start = int(ob.modifiers["Cloth"].point_cache.frame_start)
    for f in range(start, frame + 1):
        scene.frame_set(f)
    scene.render.filepath = str(path)
    bpy.ops.render.render(write_still=True)
    image = bpy.data.images.load(str(path))
    try:
        width, height = image.size
        pixels = np.empty(width * height * 4, dtype=np.float32)
        image.pixels.foreach_get(pixels)
    finally:
        bpy.data.images.remove(image)
    # an 8-bit file's pixels are its bytes / 255; rows count up from the bottom
    rgb = np.round(pixels.reshape(height, width, 4)[::-1, :, :3] * 255.0)
    return rgb.astype(np.uint8)


def _stage(scene: bpy.types.Scene, ob: bpy.types.Object, target: bpy.types.Object) -> None:
    """Cycles on the CPU, a camera, a sun, a material showing ``fit_error``, and a wire copy of
    ``target`` (a new object: the target itself stays as the fit read it)."""
    render = scene.render
    render.engine = "CYCLES"
    render.resolution_x, render.resolution_y = RENDER_PX
    render.resolution_percentage = 100
    render.threads_mode, render.threads = "FIXED", THREADS
    render.image_settings.file_format, render.image_settings.color_depth = "PNG", "8"
    scene.view_settings.view_transform = "Standard"  # the error colours as they are
    scene.cycles.device, scene.cycles.samples = "CPU", SAMPLES
    scene.cycles.seed = 0
    import _cycles  # Cycles' own module, loaded with bpy

    # denoised where this build has OpenImageDenoise (it runs on the CPU): smooth colours
    scene.cycles.use_denoising = bool(getattr(_cycles, "with_openimagedenoise", False))
    scene.cycles.denoiser = "OPENIMAGEDENOISE"
    world = bpy.data.worlds.new("Guide")
    world.use_nodes = True
    world.node_tree.nodes["Background"].inputs["Color"].default_value = (*BACKGROUND_RGB, 1.0)
    scene.world = world

    camera = bpy.data.objects.new("Guide camera", bpy.data.cameras.new("Guide camera"))
    camera.data.lens = LENS_MM
    camera.location = CAMERA_AT
    camera.rotation_euler = (mathutils.Vector(LOOK_AT) - camera.location).to_track_quat("-Z", "Y").to_euler()
    sun = bpy.data.objects.new("Guide sun", bpy.data.lights.new("Guide sun", "SUN"))
    sun.data.energy = 3.0
    sun.rotation_euler = (math.radians(35.0), 0.0, math.radians(30.0))
    for extra in (camera, sun):
        scene.collection.objects.link(extra)
    scene.camera = camera

    ob.data.materials.append(_material("Fit error", attribute="fit_error"))
    wire = bpy.data.objects.new("Target wire", target.data.copy())
    wire.matrix_world = target.matrix_world
    wire.modifiers.new("Wire", "WIREFRAME").thickness = 0.006
    wire.data.materials.append(_material("Target wire", rgb=WIRE_RGB))
    scene.collection.objects.link(wire)


def _material(name: str, attribute: str = "", rgb: tuple[float, float, float] = (0.8, 0.8, 0.8)) -> Any:
    """A diffuse material of the colour attribute ``attribute`` (or of ``rgb``), with a little
    of the same colour emitted so that the side away from the sun keeps it."""
    material = bpy.data.materials.new(name)
    material.use_nodes = True
    nodes, links = material.node_tree.nodes, material.node_tree.links
    bsdf = nodes["Principled BSDF"]
    bsdf.inputs["Roughness"].default_value = 0.8
    bsdf.inputs["Emission Strength"].default_value = 0.25
    if attribute:
        attr = nodes.new("ShaderNodeAttribute")
        attr.attribute_name = attribute
        links.new(attr.outputs["Color"], bsdf.inputs["Base Color"])
        links.new(attr.outputs["Color"], bsdf.inputs["Emission Color"])
    else:
        bsdf.inputs["Base Color"].default_value = (*rgb, 1.0)
        bsdf.inputs["Emission Color"].default_value = (*rgb, 1.0)
    return material
