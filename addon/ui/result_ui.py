"""Rows of the panel about a fit's result: whether it is out of date, its loss curve, the error
legend of Show Fit Error, what the targets determine, the start values a preset gave, and a
target row's jump button.

Each ``draw_*(layout, ob, record, width_chars)`` draws into ``layout`` for the object ``ob``
and its last result ``record`` (the parsed ``result_json``, or None), wrapping text at
``width_chars`` characters (panel labels do not wrap); each draws nothing when it has nothing
to say, and returns whether it drew. They only read: what must be made (the curve image) is
asked of a timer.
"""

from __future__ import annotations

import math
from typing import Any

import bpy

from ...warp_core.fit.verdict.identifiability import MATCHED_RANGE_CAP
from ...warp_core.targets.units import unit_of
from ..scene.error_overlay import legend_rows, overlay_state
from ..scene.loss_curve import curve_image, rmse_history, schedule_curve_image
from ..scene.staleness import changed_parts
from .labels import model_labels
from .map_result_ui import region_labels
from .text_wrap import wrap_lines, wrapped_label

CURVE_SCALE = 8.0  # the panel's curve picture, in icon units (about 20 pixels each)
# icons of the legend's colours (the sequencer's strip colours)
_COLOR_ICONS = {"Green": "STRIP_COLOR_04", "Yellow": "STRIP_COLOR_03", "Red": "STRIP_COLOR_01"}


def draw_staleness(
    layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict | None, width_chars: int = 60
) -> bool:
    """An alert row "Out of date: targets, fit settings changed — fit again" when what the
    fit read has changed since (see ``scene/staleness.py`` for what counts). Nothing for a
    record that keeps no fingerprint."""
    if not record:
        return False
    changed = changed_parts(ob, record)
    if not changed:
        return False
    col = layout.column()
    col.alert = True
    text = f"Out of date: {', '.join(changed)} changed \u2014 fit again"
    wrapped_label(col, text, width_chars, icon="ERROR")
    return True


def draw_loss_curve(
    layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict | None, width_chars: int = 60
) -> bool:
    """The RMSE per iteration as a picture (log scale, the tolerance dashed), the first and
    last RMSE and the tolerance as text, and a button to open it large. The picture is the
    object's loss-curve image's preview; when there is none yet (a file just opened), a timer
    draws it and the panel shows it at its next redraw."""
    values = rmse_history(record) if record else []
    if not values:
        return False
    unit = unit_of(record.get("unit"))
    image = curve_image(ob)
    if image is None:
        schedule_curve_image(ob)
    elif image.preview is not None and image.preview.icon_id:
        layout.template_icon(icon_value=image.preview.icon_id, scale=CURVE_SCALE)
    iterations = len(values) - 1
    text = (
        f"RMSE {unit.format(values[0])} \u2192 {unit.format(values[-1])} in {iterations} "
        f"iteration{'s' if iterations != 1 else ''}"
    )
    wrapped_label(layout, text, width_chars, "GRAPH")
    tolerance = record.get(f"tolerance_{unit.symbol}")
    if isinstance(tolerance, int | float) and tolerance > 0:
        wrapped_label(layout, f"Tolerance {unit.format(tolerance)} (the dashed line)", width_chars, "BLANK1")
    layout.operator("object.fit_to_target_show_loss_curve", text="Open Loss Curve", icon="IMAGE_DATA")
    return True


def draw_error_legend(
    layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict | None, width_chars: int = 60
) -> bool:
    """Show Fit Error (and, while it shows, Update and Hide), then what is coloured and the
    scale: a row per colour with the error it stands for (green up to 1x the tolerance, yellow
    at 3x, red from 10x)."""
    state = overlay_state(ob)
    row = layout.row(align=True)
    if state is None:
        row.operator("object.fit_to_target_show_error", icon="COLOR")
        return True
    row.operator("object.fit_to_target_show_error", text="Update", icon="FILE_REFRESH")
    row.operator("object.fit_to_target_hide_error", icon="HIDE_ON")
    frame, asked = state.get("frame"), state.get("asked_frame")
    if frame is None:
        where = "Each tracked vertex by its track's pixel error over the clip; grey: no track"
    elif frame != asked:
        where = f"Error at frame {frame}, the target frame nearest frame {asked}"
    else:
        where = f"Error at target frame {frame}"
    wrapped_label(layout, where, width_chars, "INFO")
    col = layout.column(align=True)
    for name, text, _rgba in legend_rows(state):
        wrapped_label(col, f"{name}: {text}", width_chars, _COLOR_ICONS[name])
    return True


def matched_lines(record: dict[str, Any]) -> list[tuple[str, str]]:
    """(icon, text) of what the targets determine and what they leave open, from the record's
    identifiability: each determined parameter with the range its value can move in while
    the targets stay matched (the others making up for it, to first order), then each
    undetermined one with its start and fitted values."""
    label = {**model_labels(record.get("model") or ""), **region_labels(record)}
    initial = record.get("initial_params") or {}
    params = record.get("params") or {}
    undetermined = list(record.get("undetermined") or [])
    lines: list[tuple[str, str]] = []
    for entry in record.get("identifiability") or []:
        name = entry.get("name", "")
        if name in undetermined or not entry.get("determined", True):
            continue
        value = entry.get("value", params.get(name))
        text = f"{label.get(name, name)} {_number(value)}"
        low, high = (entry.get("matched_range") or [None, None])[:2]
        if isinstance(value, int | float) and isinstance(low, int | float) and isinstance(high, int | float):
            if math.log(max(high, 1e-300)) >= 0.999 * MATCHED_RANGE_CAP:
                text += ": not bounded by the tolerance (other values match as well)"
            else:
                text += f": matched from {_number(value * low)} to {_number(value * high)}"
        lines.append(("CHECKMARK", text))
    for name in undetermined:
        start, fitted = initial.get(name), params.get(name)
        if start is not None and start == fitted:
            where = f"left at its start value {_number(start)}"
        else:
            where = f"{_number(start)} \u2192 {_number(fitted)}, not to be trusted"
        lines.append(("QUESTION", f"{label.get(name, name)}: the targets do not determine it ({where})"))
    return lines


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, int | float) else "-"


def draw_matched(
    layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict | None, width_chars: int = 60
) -> bool:
    """Which fitted parameters the targets determine, with their matched ranges, and which
    they leave undetermined (see :func:`matched_lines`), wrapped to ``width_chars``."""
    lines = matched_lines(record) if record else []
    if not lines:
        return False
    col = layout.column(align=True)
    for icon, text in lines:
        wrapped_label(col, text, width_chars, icon)
    return True


def draw_start_values(
    layout: bpy.types.UILayout, ob: bpy.types.Object, record: dict | None = None, width_chars: int = 60
) -> bool:
    """The row "Fit starts from preset 'Denim'" with an X that clears it, while the object's
    next fit starts from start values instead of its modifier's (``record`` is not needed)."""
    s = ob.fit_to_target
    if not s.start_values_json:
        return False
    name = s.start_values_name
    text = f"Fit starts from preset '{name}'" if name else "Fit starts from typed-in start values"
    lines = wrap_lines(text, max(width_chars - 4, 10))
    row = layout.row(align=True)
    row.label(text=lines[0], icon="PRESET")
    row.operator("object.fit_to_target_clear_start_values", text="", icon="X")
    for line in lines[1:]:
        layout.label(text=line, icon="BLANK1")
    return True


def draw_jump_button(layout: bpy.types.UILayout, index: int) -> None:
    """A button in target row ``index`` that goes to the target's frame."""
    layout.operator("object.fit_to_target_jump_to_target", text="", icon="TIME").index = index
