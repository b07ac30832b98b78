"""The Result sub-panel of Fit to Target: the last fit of the active object, what it found
and what to do with it.

The sub-panel draws :data:`RESULT_ROWS` in order, each a small function
``draw_*(layout, ob, record, width_chars)`` of the layout, the object, its last fit record
(the parsed ``result_json``) and how many characters fit across the sidebar (labels are
wrapped to it); a new row is a function added to that tuple."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import bpy

from ...warp_core.fit.verdict.report import format_value, record_misfit
from ..models.registry import DEFAULT_MODEL
from ..scene.records import read_record, shared_summary
from .labels import model_labels
from .map_result_ui import draw_maps, draw_weights_buttons, region_labels
from .panel_settings import draw_error_frame
from .result_ui import draw_error_legend, draw_loss_curve, draw_matched, draw_staleness
from .text_wrap import wrapped_label
from .tracks_ui import draw_worst_tracks


def contacts_line(record: dict) -> str:
    """Where the fitted rollout touched collision objects, in a line ("" without colliders)."""
    contacts = record.get("contacts")
    if not contacts:
        return ""
    frames = contacts.get("frames") or []
    if not frames:
        return "No contact with collision objects"
    span = (
        f"frame {frames[0]}"
        if len(frames) == 1
        else f"frames {frames[0]}-{frames[-1]} ({len(frames)} frames)"
    )
    return f"Touched collision objects: {span}, {contacts.get('vertices', 0)} vertices"


def run_rows(record: dict) -> list[tuple[str, str, str]]:
    """(object, outcome, RMSE) of every object fitted in the same run as ``record``'s, from
    their own records (an object fitted again since then says so)."""
    rows = []
    for name in record.get("run_objects") or []:
        ob = bpy.data.objects.get(name)
        other = read_record(ob) if ob is not None else None
        if other is None or other.get("run_objects") != record.get("run_objects"):
            rows.append((name, "changed since", ""))
            continue
        rows.append((name, str(other.get("outcome") or other.get("status")), record_misfit(other, "rmse")))
    return rows


def draw_summary(layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict, width_chars: int) -> None:
    text = f"{record.get('iterations')} iterations, {record.get('seconds', 0):.1f} s"
    wrapped_label(layout, text, width_chars, icon="TIME")


def draw_values(layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict, width_chars: int) -> None:
    """Each fitted parameter by Blender's name: value before -> after."""
    # a map region's value is shown with its map (draw_maps)
    regions = region_labels(record)
    params = {name: value for name, value in (record.get("params") or {}).items() if name not in regions}
    if not params:
        return
    initial = record.get("initial_params") or {}
    label = model_labels(record.get("model") or DEFAULT_MODEL)
    col = layout.column(align=True)
    for name, value in params.items():
        split = col.split(factor=0.55)
        split.label(text=label.get(name, name))
        split.label(text=f"{format_value(initial.get(name))} \u2192 {format_value(value)}")


def draw_misfit(layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict, width_chars: int) -> None:
    before, after = record_misfit(record, "initial_rmse"), record_misfit(record, "rmse")
    wrapped_label(layout, f"RMSE {before} \u2192 {after}", width_chars, icon="SORT_ASC")


def draw_outcome(layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict, width_chars: int) -> None:
    """Converged: the tolerance met. Anything else: an alert with the reason, so a fit that
    does not match its targets never looks like a success."""
    outcome = record.get("outcome")
    if outcome is None:
        return  # a record from before outcomes were kept
    if outcome == "converged":
        text = f"Targets matched (within {record_misfit(record, 'tolerance')})"
        wrapped_label(layout, text, width_chars, icon="CHECKMARK")
        return
    col = layout.column()
    col.alert = True
    wrapped_label(col, f"Not matched: {outcome}", width_chars, icon="ERROR")
    reason = record.get("outcome_reason")
    if reason:
        wrapped_label(col, reason, width_chars)


def draw_contacts(layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict, width_chars: int) -> None:
    text = contacts_line(record)
    if text:
        wrapped_label(layout, text, width_chars, icon="MOD_PHYSICS")


def draw_geometry(layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict, width_chars: int) -> None:
    """A soft body's lattice: its size and worst tetrahedron."""
    geometry = record.get("geometry")
    if geometry:
        text = (
            f"Lattice: {geometry['tets']} tets, {geometry['nodes']} nodes, "
            f"worst tet quality {geometry['worst_quality']:.2f}"
        )
        wrapped_label(layout, text, width_chars, icon="MESH_ICOSPHERE")


def draw_run(layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict, width_chars: int) -> None:
    """With several objects in the run: one row per object, and what a shared fit found."""
    rows = run_rows(record)
    if len(rows) < 2:
        return
    shared = record.get("shared")
    box = layout.box()
    box.label(text="Shared material:" if shared else "Objects fitted in this run:")
    grid = box.grid_flow(columns=3, even_columns=False, align=True)
    for cells in [("Object", "Outcome", "RMSE"), *rows]:
        for text in cells:
            grid.label(text=text)
    if shared:
        wrapped_label(box, shared_summary(shared), width_chars)


def draw_warnings(layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict, width_chars: int) -> None:
    for warning in record.get("warnings") or []:
        wrapped_label(layout, str(warning), width_chars, icon="ERROR")


def draw_apply_revert(
    layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict, width_chars: int
) -> None:
    """Apply / Revert for this object, and for every object of its run."""
    s = ob.fit_to_target
    row = layout.row(align=True)
    sub = row.row(align=True)
    sub.enabled = not s.applied
    sub.operator("object.fit_to_target_apply", text="Apply", icon="CHECKMARK")
    sub = row.row(align=True)
    sub.enabled = bool(s.previous_values_json) and s.applied
    sub.operator("object.fit_to_target_revert", text="Revert", icon="LOOP_BACK")
    if len(record.get("run_objects") or []) > 1:
        row = layout.row(align=True)
        row.operator("object.fit_to_target_apply", text="Apply All", icon="CHECKMARK").all_objects = True
        row.operator("object.fit_to_target_revert", text="Revert All", icon="LOOP_BACK").all_objects = True


def draw_bake(layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict, width_chars: int) -> None:
    """Bake / Unbake, and the error colors a bake can write."""
    s = ob.fit_to_target
    row = layout.row(align=True)
    # short words in the panel; the operators' names (F3 search) say what they act on
    row.operator("object.fit_to_target_bake", text="Bake", icon="FILE_CACHE")
    sub = row.row(align=True)
    sub.enabled = bool(s.bake_json)
    sub.operator("object.fit_to_target_unbake", text="Unbake", icon="X")
    col = layout.column()
    col.prop(s, "bake_error_colors")
    sub = col.column()
    sub.active = s.bake_error_colors
    draw_error_frame(sub, s)


# draw_*(layout, ob, record, width_chars); what a row returns is not used
ResultRow = Callable[[bpy.types.UILayout, bpy.types.Object, dict, int], Any]

RESULT_ROWS: tuple[ResultRow, ...] = (
    draw_staleness,
    draw_summary,
    draw_values,
    draw_maps,
    draw_misfit,
    draw_outcome,
    draw_matched,
    draw_loss_curve,
    draw_worst_tracks,
    draw_contacts,
    draw_geometry,
    draw_run,
    draw_warnings,
    draw_apply_revert,
    draw_weights_buttons,
    draw_error_legend,
    draw_bake,
)


def draw_result(layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict, width_chars: int) -> None:
    """The Result sub-panel: :data:`RESULT_ROWS` in order."""
    for draw_row in RESULT_ROWS:
        draw_row(layout, ob, record, width_chars)
