"""The Parameters rows of the panel, grouped as Blender groups a model's settings: per
parameter a check box (fit it or not), the setting's current value beside it and, after a
fit, the value the fit found.

Each model's scene side lists its groups (:class:`ParameterGroup`), with Blender's own names
for the settings; the ``fit_<parameter>`` check boxes take their names from the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import bpy


@dataclass(frozen=True)
class ParameterRow:
    """One fittable parameter in the panel (made by a model's scene side, read by the
    Parameters sub-panel and by the ``fit_<name>`` check boxes' names and tooltips)."""

    name: str  # the model's parameter: its check box is ``fit_<name>``, its value ``<name>``
    text: str  # under its group's heading, as Blender's panel shows it: "Tension"
    label: str  # on its own, Blender's name of the setting: "Tension Stiffness"
    description: str  # Blender's tooltip of the setting


@dataclass(frozen=True)
class ParameterGroup:
    """A heading of the Parameters sub-panel (Blender's: "Stiffness", "Damping", ...), its
    rows, and the tie options drawn under them (keys of ``Object.fit_to_target``)."""

    heading: str
    rows: tuple[ParameterRow, ...]
    ties: tuple[str, ...] = ()
    default_closed: bool = False


def rna_text(struct: Any, name: str) -> tuple[str, str]:
    """(name, description) of the RNA property ``name`` of ``struct`` (a ``bpy.types`` class)."""
    prop = struct.bl_rna.properties[name]
    return prop.name, prop.description


def parameter_labels(groups: Sequence[ParameterGroup]) -> dict[str, str]:
    """Parameter name -> Blender's name of the setting ("Air Viscosity")."""
    return {row.name: row.label for group in groups for row in group.rows}


def parameter_rows(groups: Sequence[ParameterGroup]) -> dict[str, ParameterRow]:
    """Parameter name -> its row."""
    return {row.name: row for group in groups for row in group.rows}


def short_value(value: float) -> str:
    """A fitted value for the row beside the setting's own field: four significant digits."""
    return f"{value:.4g}"


def draw_parameter_groups(
    layout: bpy.types.UILayout,
    settings: Any,
    groups: Sequence[ParameterGroup],
    values: Any | None,
    fitted: dict[str, float],
) -> None:
    """One collapsible group per heading. ``settings`` is ``Object.fit_to_target`` (the check
    boxes and tie options), ``values`` the struct holding the values (the modifier's settings;
    None without one: check boxes only), ``fitted`` the last fit's values by parameter."""
    for group in groups:
        # a layout panel's open state is kept per region under its id: one id per group
        header, body = layout.panel(f"FIT_params_{group.rows[0].name}", default_closed=group.default_closed)
        header.label(text=group.heading)
        ticked = sum(bool(getattr(settings, f"fit_{row.name}")) for row in group.rows)
        if ticked:
            header.label(text=f"{ticked} fitted")
        if body is None:
            continue
        col = body.column()
        for row in group.rows:
            draw_parameter_row(col, settings, row, values, fitted.get(row.name))
        for key in group.ties:
            col.prop(settings, key)


def draw_parameter_row(
    layout: bpy.types.UILayout, settings: Any, row: ParameterRow, values: Any | None, fitted: float | None
) -> None:
    """Heading, check box, the current value and "→ fitted value" (after a fit that found one)."""
    line = layout.row(align=True, heading=row.text)
    line.prop(settings, f"fit_{row.name}", text="")
    if values is not None:
        line.prop(values, row.name, text="")
    if fitted is not None:
        line.label(text=f"\u2192 {short_value(fitted)}")
