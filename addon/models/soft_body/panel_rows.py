"""The soft body's Parameters rows: its material values, kept on the object
(``Object.fit_to_target_soft_body``, read by ``read_settings``), named as that property
group names them, then the solver settings that are not fitted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..parameter_rows import ParameterGroup, ParameterRow
from .props import FIT_PG_soft_body

if TYPE_CHECKING:
    import bpy


def _row(name: str, text: str = "") -> ParameterRow:
    """The row of ``fit_to_target_soft_body.<name>``, named and described as its property.
    Read from the class's definitions, which exist before the class is registered (the
    check boxes are made at import)."""
    keywords = FIT_PG_soft_body.__annotations__[name].keywords
    return ParameterRow(name, text or keywords["name"], keywords["name"], keywords["description"])


GROUPS = (
    ParameterGroup(
        "Material",
        (_row("young_modulus"), _row("young_modulus_max"), _row("poisson_ratio"), _row("density")),
    ),
    ParameterGroup("Damping", (_row("damping"), _row("damping_max"))),
)
# the vertex groups the maxima act through: the setting naming one, the mesh field its
# weights go to (``ClothMesh``), its label
MAP_GROUPS = (
    ("young_modulus_group", "young_modulus_weight", "Stiffness Group"),
    ("damping_group", "damping_weight", "Damping Group"),
)


def draw_simulation(layout: bpy.types.UILayout, values: Any) -> None:
    """The model's solver settings (not fitted), as a collapsible group after the parameters."""
    header, body = layout.panel("FIT_params_soft_body_simulation", default_closed=True)
    header.label(text="Simulation")
    if body is None:
        return
    col = body.column()
    for name in ("substeps", "iterations", "lattice_cells", "pin_threshold"):
        col.prop(values, name)
    row = col.row(align=True, heading="Ground")
    row.prop(values, "ground", text="")
    sub = row.row(align=True)
    sub.active = values.ground
    sub.prop(values, "ground_height", text="")
    col.prop(values, "friction")
    ob = values.id_data
    for name, _, _ in MAP_GROUPS:
        col.prop_search(values, name, ob, "vertex_groups")
