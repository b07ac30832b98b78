"""Settings of a Cloth modifier (and of the scene around it) that change the cloth's motion
but that the ``blender_cloth`` model does not simulate. A fit on them would run and absorb
their effect into the fitted values, so the input check names them instead."""

from __future__ import annotations

from collections.abc import Iterator

import bpy

from .fields import acting_fields, unsupported


def unmodeled_settings(
    scene: bpy.types.Scene, ob: bpy.types.Object, mod: bpy.types.ClothModifier
) -> list[str]:
    """One phrase per unsimulated setting in use, e.g. "Internal Springs
    (settings.use_internal_springs) is on"."""
    return list(_cloth_settings(ob, mod.settings)) + list(_effectors(scene, ob, mod))


def _on(label: str, path: str) -> str:
    return f"{label} ({path}) is on"


def _cloth_settings(ob: bpy.types.Object, s: bpy.types.ClothSettings) -> Iterator[str]:
    if s.use_pressure:
        # simulated: uniform pressure and the volume it returns to, on triangles and quads
        if s.fluid_density != 0.0:
            yield f"Pressure with a Fluid Density (settings.fluid_density = {s.fluid_density:g})"
        if s.vertex_group_pressure:
            yield f"Pressure Scale group (settings.vertex_group_pressure = '{s.vertex_group_pressure}')"
        big = next((p.index for p in ob.data.polygons if len(p.vertices) > 4), None)
        if big is not None:
            yield f"Pressure (settings.use_pressure) on polygon {big} of more than 4 corners (triangulate it)"
    if s.use_internal_springs:
        yield _on("Internal Springs", "settings.use_internal_springs")
    if s.use_sewing_springs and s.bending_model == "LINEAR" and _has_loose_edges(ob.data):
        # simulated with the angular bending model (the default) only
        yield (
            _on("Sewing", "settings.use_sewing_springs")
            + " with the Linear bending model and the mesh has loose (sewing) edges"
        )
    keys = ob.data.shape_keys
    # the reference key is what Blender sets by itself, and the shape the model starts from
    if s.rest_shape_key is not None and (keys is None or s.rest_shape_key != keys.reference_key):
        yield f"Rest Shape Key (settings.rest_shape_key) is set to '{s.rest_shape_key.name}'"
    if s.vertex_group_mass and s.goal_default != 0.0:
        # vertices outside the pin group start from this goal weight instead of 0
        yield f"Default Goal (settings.goal_default) is {s.goal_default:g} with a pin group"
    if int(s.quality) == 1:
        # one step a frame: Blender's own result moves 0.8-3 % of the motion when the mass
        # changes by one part in a million (a truncated CG stopping one iteration earlier or
        # later), and this model lands as far from it; quality 2 moves 0.1-0.3 %, 5 about 1e-6
        yield "Quality Steps (settings.quality) is 1"


def _has_loose_edges(mesh: bpy.types.Mesh) -> bool:
    """Blender makes a sewing spring of every edge that belongs to no face."""
    in_faces = {key for poly in mesh.polygons for key in poly.edge_keys}
    return any(edge.key not in in_faces for edge in mesh.edges)


def _effectors(scene: bpy.types.Scene, ob: bpy.types.Object, mod: bpy.types.ClothModifier) -> Iterator[str]:
    fields = list(acting_fields(scene, mod))
    for o, weight in fields:
        why = unsupported(o, weight, mod)
        if why:
            yield why
    if fields:
        big = next((p.index for p in ob.data.polygons if len(p.vertices) > 4), None)
        if big is not None:
            yield f"Force fields act on polygon {big} of more than 4 corners (triangulate it)"


# Blender's own result moves this share of the motion when an input changes by one part in
# a million (plain 10 x 10 sheets, 30 frames): its truncated CG stops an iteration earlier
# or later. Quality 5 and up: about 1e-6.
_SENSITIVITY = {2: "0.3 %", 3: "0.13 %"}


def cautions(mod: bpy.types.ClothModifier) -> list[str]:
    """Settings that are simulated, but where Blender's replay of any values can differ
    from the fit by more than a close match allows."""
    quality = int(mod.settings.quality)
    if quality not in _SENSITIVITY:
        return []
    return [
        f"Quality Steps (settings.quality) is {quality}: at so few steps a frame Blender's own cloth "
        f"moves up to {_SENSITIVITY[quality]} of the motion when an input changes by one part in a "
        "million, so its replay of the fitted values can differ from the fit by as much; "
        "5 or more replays closely"
    ]
