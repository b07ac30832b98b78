"""Where the soft body keeps its weight maps: the object's model values
(``Object.fit_to_target_soft_body``) name the Stiffness and Damping Groups and hold the
Max values their weights blend towards (``warp_core/models/soft_body/materials.py``).
Written by ``addon/scene/map_groups.py``."""

from __future__ import annotations

from ..base import MapTarget

MAP_TARGETS: dict[str, MapTarget] = {
    "stiffness": MapTarget(
        label="Stiffness",
        group_field="young_modulus_group",
        max_fields=("young_modulus_max",),
        new_group="Fit Stiffness",
        group_label="the soft body's Stiffness Group",
        description="Fit the weights of the soft body's Stiffness Group, which blend Young's Modulus "
        "towards Young's Modulus Max",
    ),
    "damping": MapTarget(
        label="Damping",
        group_field="damping_group",
        max_fields=("damping_max",),
        new_group="Fit Damping",
        group_label="the soft body's Damping Group",
        description="Fit the weights of the soft body's Damping Group, which blend Damping towards "
        "Damping Max",
    ),
}
