"""The cloth's Parameters rows: the fittable ``ClothSettings`` fields (each parameter of the
model is the field of the same name, as ``read_settings`` reads them), grouped and named as
Blender's Physics > Cloth panel shows them."""

from __future__ import annotations

import bpy

from ..parameter_rows import ParameterGroup, ParameterRow, rna_text


def _row(name: str, text: str, label: str = "") -> ParameterRow:
    """The row of ``ClothSettings.<name>``: ``text`` under its heading, ``label`` alone (default:
    the RNA name); the tooltip is the RNA description."""
    rna_name, description = rna_text(bpy.types.ClothSettings, name)
    return ParameterRow(name, text, label or rna_name, description)


# Blender's cloth panel (scripts/startup/bl_ui/properties_physics_cloth.py) names some
# fields other than their RNA names: "Air Viscosity" for air_damping, "Max Tension" for
# tension_stiffness_max; its words are used where it has them. goal_friction has no row
# there: its RNA name is "Goal Damping".
GROUPS = (
    ParameterGroup(
        "Physical Properties",
        (_row("mass", "Vertex Mass"), _row("air_damping", "Air Viscosity", "Air Viscosity")),
    ),
    ParameterGroup(
        "Stiffness",
        (
            _row("tension_stiffness", "Tension"),
            _row("compression_stiffness", "Compression"),
            _row("shear_stiffness", "Shear"),
            _row("bending_stiffness", "Bending"),
        ),
        ties=("tie_compression",),
    ),
    ParameterGroup(
        "Damping",
        (
            _row("tension_damping", "Tension"),
            _row("compression_damping", "Compression"),
            _row("shear_damping", "Shear"),
            _row("bending_damping", "Bending"),
        ),
        ties=("tie_damping",),
    ),
    ParameterGroup("Shape", (_row("pin_stiffness", "Pin Stiffness"), _row("goal_friction", "Goal Damping"))),
    ParameterGroup(
        "Property Weights",
        (
            _row("tension_stiffness_max", "Max Tension", "Max Tension"),
            _row("compression_stiffness_max", "Max Compression", "Max Compression"),
            _row("shear_stiffness_max", "Max Shearing", "Max Shearing"),
            _row("bending_stiffness_max", "Max Bending", "Max Bending"),
        ),
        default_closed=True,  # the maxima act only through the stiffness vertex groups
    ),
)
