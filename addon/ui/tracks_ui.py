"""The Tracks target in the panel: clip, camera, the binding list, and the operators that
bind tracks to the cloth.

No ``from __future__ import annotations``: Blender reads operator properties from the class
annotations, which must stay objects.
"""

import bmesh
import bpy

from ..errors import FitInputError
from ..models.registry import object_model
from ..request import footage_from_settings
from ..scene.checks import check_object
from ..scene.footage import auto_bindings, describe_unbound, find_footage
from .text_wrap import wrapped_label

# how many of the worst tracks the result lists
WORST_SHOWN = 5


class FIT_UL_track_bindings(bpy.types.UIList):
    """Track bindings: used or not, the track, how it is bound and its error after the last fit."""

    def draw_item(self, context, layout, data, item, icon, active_data, active_propname, index=0):
        row = layout.row(align=True)
        row.prop(item, "use", text="")
        row.label(text=item.track)
        row.label(text=item.how.title() if item.how != "NONE" else "unbound")
        row.label(text=f"{item.error_px:.2f} px" if item.error_px >= 0.0 else "")


def draw_tracks(layout: bpy.types.UILayout, s: bpy.types.PropertyGroup) -> None:
    """The footage (clip, tracking object, camera), the binding list and its operators."""
    col = layout.column()
    col.prop(s, "clip")
    col.prop(s, "tracking_object")
    col.prop(s, "camera")
    col.prop(s, "huber_px")
    layout.template_list("FIT_UL_track_bindings", "", s, "bindings", s, "active_binding_index", rows=4)
    layout.operator("object.fit_to_target_bind_tracks", icon="TRACKER")
    if 0 <= s.active_binding_index < len(s.bindings):
        item = s.bindings[s.active_binding_index]
        col = layout.column(align=True)
        col.prop(item, "vertex")
        col.prop(item, "weight")
        layout.operator("object.fit_to_target_bind_vertex", icon="VERTEXSEL")


def draw_worst_tracks(
    layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict, width_chars: int
) -> None:
    """A Result row: the tracks the last fit of ``ob`` matched worst, with their RMS pixel errors."""
    errors = record.get("track_errors_px") or {}
    if not errors:
        return
    worst = sorted(errors.items(), key=lambda item: -item[1])[:WORST_SHOWN]
    text = ", ".join(f"{name} {err:.2f} px" for name, err in worst)
    wrapped_label(layout, f"Worst tracks: {text}", width_chars, icon="TRACKER")


class OBJECT_OT_fit_to_target_bind_tracks(bpy.types.Operator):
    """Bind the clip's tracks to the cloth: nearest each solved bundle, or where the marker's ray meets it"""

    # at the cloth's cache start frame; tracks bound to a hand-picked vertex keep it

    bl_idname = "object.fit_to_target_bind_tracks"
    bl_label = "Bind Tracks"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        ob = context.active_object
        scene = context.scene
        saved = scene.frame_current, scene.frame_subframe
        try:
            mod = check_object(ob)
            s = ob.fit_to_target
            spec = footage_from_settings(s)
            if spec is None:
                raise FitInputError("set Targets to Tracks first")
            spec.bindings = []
            footage = find_footage(scene, ob, spec)
            model = object_model(ob)
            start, _ = model.cache_frame_range(mod)
            scene.frame_set(start)
            mesh = model.read_geometry(ob, context.evaluated_depsgraph_get())
            bound, unbound = auto_bindings(scene, ob, footage, mesh.vertices, mesh.triangles(), start)
        except (FitInputError, ValueError) as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        finally:
            scene.frame_set(saved[0], subframe=saved[1])
        picked = {b.track: (b.vertex, b.weight, b.use) for b in s.bindings if b.how == "VERTEX"}
        s.bindings.clear()
        for b in bound:
            row = s.bindings.add()
            row.track, row.how, row.triangle, row.barycentric = b.track, b.how, b.vertices, b.barycentric
        names = {b.track for b in bound}
        for track in footage.tracks:
            if track.name in picked:
                row = next((r for r in s.bindings if r.track == track.name), None) or s.bindings.add()
                row.track = track.name
                row.vertex, row.weight, row.use = picked[track.name]
            elif track.name not in names and any(track.name in group for group in unbound.values()):
                row = s.bindings.add()
                row.track, row.how, row.use = track.name, "NONE", False
        level = "WARNING" if unbound else "INFO"
        text = f"Bound {len(bound) + len(picked)} tracks to '{ob.name}'"
        if unbound:
            text += f"; unbound: {describe_unbound(unbound, most=3)}: pick a vertex for each"
        self.report({level}, text)
        return {"FINISHED"}


class OBJECT_OT_fit_to_target_bind_vertex(bpy.types.Operator):
    """Bind the active track of the list to the selected vertex of the cloth (Edit Mode)"""

    bl_idname = "object.fit_to_target_bind_vertex"
    bl_label = "Bind to Selected Vertex"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> set[str]:
        ob = context.active_object
        s = ob.fit_to_target if ob is not None and ob.type == "MESH" else None
        if s is None or not 0 <= s.active_binding_index < len(s.bindings):
            self.report({"ERROR"}, "Select a track in the binding list first")
            return {"CANCELLED"}
        if ob.mode == "EDIT":
            bm = bmesh.from_edit_mesh(ob.data)
            active = bm.select_history.active
            chosen = [active.index] if isinstance(active, bmesh.types.BMVert) else []
            chosen = chosen or [v.index for v in bm.verts if v.select]
        else:
            chosen = [v.index for v in ob.data.vertices if v.select]
        if len(chosen) != 1 and not (ob.mode == "EDIT" and chosen):
            self.report({"ERROR"}, f"Select one vertex of '{ob.name}' (Edit Mode) to bind the track to")
            return {"CANCELLED"}
        row = s.bindings[s.active_binding_index]
        row.vertex = chosen[0]
        row.use = True
        self.report({"INFO"}, f"Track '{row.track}' bound to vertex {chosen[0]} of '{ob.name}'")
        return {"FINISHED"}


classes = (FIT_UL_track_bindings, OBJECT_OT_fit_to_target_bind_tracks, OBJECT_OT_fit_to_target_bind_vertex)
