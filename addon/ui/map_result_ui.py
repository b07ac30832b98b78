"""Result rows of a fit's weight maps (the record's ``maps``, see ``$defs/map`` of
``assets/report.schema.json``): per map its kind and the vertex group that holds its weights,
then each region's value, or for a free map the weights' range and the vertices the targets
leave undetermined; and Show Fitted Weights, which shows a map's group in Weight Paint mode.

The ``draw_*(layout, ob, record, width_chars)`` rows draw nothing for a record without maps
and return whether they drew."""

from __future__ import annotations

from typing import Any

import bpy

from ...warp_core.fit.problem.maps import region_parameter
from ..errors import FitInputError
from .map_properties import map_kind_label, map_kind_order
from .text_wrap import wrapped_label


def map_entries(record: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    """(kind, entry) of each fitted map of ``record``, in the Map menus' order."""
    maps = (record or {}).get("maps") or {}
    order = map_kind_order()
    return sorted(
        ((kind, entry) for kind, entry in maps.items() if isinstance(entry, dict)),
        key=lambda item: order.index(item[0]) if item[0] in order else len(order),
    )


def _number(value: Any, digits: int = 6) -> str:
    return f"{value:.{digits}g}" if isinstance(value, int | float) else "-"


def region_labels(record: dict[str, Any] | None) -> dict[str, str]:
    """Fit parameter of each region of the record's maps -> its name in the panel:
    ``structural:Collar`` -> "Collar (Structural)"."""
    return {
        region_parameter(kind, name): f"{name} ({map_kind_label(kind)})"
        for kind, entry in map_entries(record)
        for name in entry.get("regions") or {}
    }


def written_group(ob: bpy.types.Object, entry: dict[str, Any]) -> str:
    """The vertex group holding the map's fitted weights ("" while they are not applied)."""
    return str(entry.get("group") or "") if ob.fit_to_target.applied else ""


def map_heading(ob: bpy.types.Object, kind: str, entry: dict[str, Any]) -> str:
    """The map's heading: "Structural map in vertex group 'Fit Structural Stiffness'", or
    that Apply writes its weights."""
    group = written_group(ob, entry)
    where = f"in vertex group '{group}'" if group else "(Apply writes its weights to a vertex group)"
    return f"{map_kind_label(kind)} map {where}"


def map_rows(entry: dict[str, Any]) -> list[tuple[str, str]]:
    """(left, right) rows of one map: each region and its value ("not determined" where the
    targets leave it at its start), or a free map's stiffness and weight ranges and its
    undetermined vertices."""
    regions = entry.get("regions") or {}
    if entry.get("mode") == "regions" or regions:
        rows = []
        for name, region in regions.items():
            value = _number(region.get("value"))
            rows.append((name, value if region.get("determined", True) else f"{value}, not determined"))
        return rows
    weights = entry.get("weights") or {}
    rows = [
        ("Stiffness", f"{_number(entry.get('base'))} \u2192 {_number(entry.get('top'))}"),
        (
            "Weights",
            f"{_number(weights.get('min'), 3)} \u2192 {_number(weights.get('max'), 3)}, "
            f"mean {_number(weights.get('mean'), 3)}",
        ),
    ]
    undetermined, vertices = entry.get("undetermined_vertices"), entry.get("vertices")
    if isinstance(undetermined, int):
        of = f" of {vertices}" if isinstance(vertices, int) else ""
        rows.append(("Not determined", f"{undetermined}{of} vertices"))
    return rows


def draw_maps(
    layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict | None, width_chars: int
) -> bool:
    """Per fitted map: its heading, then its rows (:func:`map_rows`) as label | value."""
    entries = map_entries(record)
    for kind, entry in entries:
        wrapped_label(layout, map_heading(ob, kind, entry), width_chars, icon="GROUP_VERTEX")
        col = layout.column(align=True)
        for left, right in map_rows(entry):
            split = col.split(factor=0.55)
            split.label(text=left)
            split.label(text=right)
    return bool(entries)


def draw_weights_buttons(
    layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict | None, width_chars: int
) -> bool:
    """Show Fitted Weights (one per map when there are several), beside Show Fit Error;
    greyed until Apply has written the weights."""
    entries = map_entries(record)
    if not entries:
        return False
    row = layout.row(align=True)
    row.enabled = bool(ob.fit_to_target.applied)
    for kind, _ in entries:
        text = "Show Fitted Weights" if len(entries) == 1 else f"{map_kind_label(kind)} Weights"
        row.operator("object.fit_to_target_show_weights", text=text, icon="MOD_VERTEX_WEIGHT").kind = kind
    return True


def fitted_group(ob: bpy.types.Object, record: dict | None, kind: str = "") -> str:
    """The vertex group holding the fitted weights of the ``kind`` map (""; the first map)
    of the object's last fit; FitInputError saying what to do where there is none."""
    entries = dict(map_entries(record))
    if not entries:
        raise FitInputError(f"'{ob.name}' has no fitted weight map: tick Fit Map in Weight Map and fit")
    kind = kind or next(iter(entries))
    if kind not in entries:
        raise FitInputError(
            f"'{ob.name}' has no fitted {kind} map: its last fit found the {', '.join(entries)} map"
        )
    group = written_group(ob, entries[kind])
    if not group:
        raise FitInputError(f"the fitted {kind} weights of '{ob.name}' are not applied: press Apply first")
    if group not in ob.vertex_groups:
        raise FitInputError(
            f"'{ob.name}' has no vertex group '{group}' any more: rename the group back or fit again"
        )
    return group


def show_weights(context: bpy.types.Context, ob: bpy.types.Object, group: str) -> str:
    """Make ``group`` the object's active vertex group and, where a 3D Viewport can show it,
    enter Weight Paint mode (Blender's own display of weights; Tab or the mode menu leaves
    it). Returns what was done, for the report."""
    before = ob.vertex_groups.active_index
    ob.vertex_groups.active_index = ob.vertex_groups[group].index
    window = getattr(context, "window", None)
    area = next((a for a in window.screen.areas if a.type == "VIEW_3D"), None) if window else None
    if area is None:
        return f"'{group}' is the active vertex group of '{ob.name}': Weight Paint mode shows it"
    if ob.mode != "WEIGHT_PAINT":
        try:
            with context.temp_override(window=window, area=area, active_object=ob, object=ob):
                bpy.ops.object.mode_set(mode="WEIGHT_PAINT")
        except RuntimeError as e:
            ob.vertex_groups.active_index = before
            reason = str(e).strip().splitlines()[-1] if str(e).strip() else "Blender refused"
            raise FitInputError(
                f"'{ob.name}' cannot enter Weight Paint mode ({reason}): make it visible and active"
            ) from e
    return f"Weight Paint mode shows '{group}' of '{ob.name}'"
