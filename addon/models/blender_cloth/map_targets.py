"""Where Blender's cloth keeps its weight maps: the ``ClothSettings`` field naming each
kind's vertex group (Cloth > Property Weights) and the maxima its weights scale towards
(Blender's Cloth panel shows them beside the group: Max Tension and Max Compression share
the structural group). Written by ``addon/scene/map_groups.py``."""

from __future__ import annotations

from ..base import MapTarget

MAP_TARGETS: dict[str, MapTarget] = {
    "structural": MapTarget(
        label="Structural",
        group_field="vertex_group_structural_stiffness",
        max_fields=("tension_stiffness_max", "compression_stiffness_max"),
        new_group="Fit Structural Stiffness",
        group_label="the Cloth's Structural Group",
        description="Fit the weights of the Cloth's Structural Group (Property Weights), which scale "
        "tension and compression towards Max Tension and Max Compression",
        min_fields=(
            ("tension_stiffness_max", "tension_stiffness"),
            ("compression_stiffness_max", "compression_stiffness"),
        ),
    ),
    "shear": MapTarget(
        label="Shear",
        group_field="vertex_group_shear_stiffness",
        max_fields=("shear_stiffness_max",),
        new_group="Fit Shear Stiffness",
        group_label="the Cloth's Shear Group",
        description="Fit the weights of the Cloth's Shear Group (Property Weights), which scale shear "
        "towards Max Shearing",
        min_fields=(("shear_stiffness_max", "shear_stiffness"),),
    ),
    "bending": MapTarget(
        label="Bending",
        group_field="vertex_group_bending",
        max_fields=("bending_stiffness_max",),
        new_group="Fit Bending Stiffness",
        group_label="the Cloth's Bending Group",
        description="Fit the weights of the Cloth's Bending Group (Property Weights), which scale bending "
        "towards Max Bending",
        min_fields=(("bending_stiffness_max", "bending_stiffness"),),
    ),
    # the shrink group changes the rest lengths, which a fit takes as given: written (a
    # report's map applied), not offered
    "shrink": MapTarget(
        label="Shrinking",
        group_field="vertex_group_shrink",
        max_fields=("shrink_max",),
        new_group="Fit Shrinking",
        group_label="the Cloth's Shrinking Group",
        description="The weights of the Cloth's Shrinking Group, which scale shrinking towards Max Shrinking",
        offered=False,
    ),
}
