"""The ``soft_body`` model's settings on each object: ``Object.fit_to_target_soft_body``.

Blender's own Soft Body modifier is a different model (edge springs), so the values this
model fits have no home there: they live here, saved with the .blend, shown in the panel and
replayed by the bake. No ``from __future__ import annotations``: Blender reads the property
definitions from the class annotations.
"""

import bpy
from bpy.props import BoolProperty, FloatProperty, IntProperty, PointerProperty, StringProperty

from ....warp_core.models.soft_body.params import PARAMETER_BOUNDS, SoftBodyParams

_DEFAULTS = SoftBodyParams()


def _bounded(name: str, label: str, description: str, **extra: object) -> FloatProperty:
    lo, hi = PARAMETER_BOUNDS[name]
    return FloatProperty(
        name=label, description=description, default=getattr(_DEFAULTS, name), min=lo, max=hi, **extra
    )


class FIT_PG_soft_body(bpy.types.PropertyGroup):
    """Material and solver settings of the soft-body (VBD) model."""

    young_modulus: _bounded(
        "young_modulus",
        "Young's Modulus",
        "Stiffness of the material in pascals (jelly about 1e4, rubber 1e6)",
        soft_min=100.0,
        soft_max=1e8,
    )
    poisson_ratio: _bounded(
        "poisson_ratio",
        "Poisson Ratio",
        "How much the material keeps its volume (0: not at all, 0.49: nearly incompressible)",
    )
    damping: _bounded(
        "damping",
        "Damping",
        "Internal (stiffness-proportional) damping, in seconds: how fast vibrations die out",
        precision=5,
    )
    density: _bounded("density", "Density", "Mass per volume in kg/m^3 (water 1000)")
    young_modulus_max: _bounded(
        "young_modulus_max",
        "Young's Modulus Max",
        "Young's modulus where the Stiffness Group's weight is 1 (a weight blends from Young's "
        "Modulus to this)",
        soft_min=100.0,
        soft_max=1e8,
    )
    damping_max: _bounded(
        "damping_max",
        "Damping Max",
        "Damping where the Damping Group's weight is 1 (a weight blends from Damping to this)",
        precision=5,
    )
    young_modulus_group: StringProperty(
        name="Stiffness Group",
        description="Vertex group whose weights blend Young's modulus towards its Max (the body "
        "under a painted vertex takes its weight)",
    )
    damping_group: StringProperty(
        name="Damping Group",
        description="Vertex group whose weights blend the damping towards its Max",
    )
    substeps: IntProperty(
        name="Substeps",
        description="Solver steps per frame (more: stiffer materials stay stable)",
        default=_DEFAULTS.substeps,
        min=1,
        soft_max=32,
    )
    iterations: IntProperty(
        name="Iterations",
        description="Vertex-block iterations per substep (more: closer to the exact implicit step)",
        default=_DEFAULTS.iterations,
        min=1,
        soft_max=100,
    )
    lattice_cells: IntProperty(
        name="Lattice Cells",
        description="Tetrahedral lattice cells along the longest side of the mesh (the mesh is embedded "
        "in it): more follows the shape more closely and costs more",
        default=_DEFAULTS.lattice_cells,
        min=1,
        soft_max=64,
    )
    pin_threshold: FloatProperty(
        name="Pin Above",
        description="Vertices of the Soft Body goal group with a weight above this follow the animated "
        "mesh (pinned); the others move freely",
        default=_DEFAULTS.pin_threshold,
        min=0.0,
        max=0.999,
    )
    ground: BoolProperty(
        name="Ground", description="A ground plane the body cannot fall through", default=False
    )
    ground_height: FloatProperty(
        name="Ground Height", description="Height (world Z) of the ground plane", default=0.0, unit="LENGTH"
    )
    friction: FloatProperty(
        name="Friction", description="Friction against the ground", default=_DEFAULTS.friction, min=0.0
    )


classes = (FIT_PG_soft_body,)


def register() -> None:
    bpy.types.Object.fit_to_target_soft_body = PointerProperty(type=FIT_PG_soft_body)


def unregister() -> None:
    if hasattr(bpy.types.Object, "fit_to_target_soft_body"):
        del bpy.types.Object.fit_to_target_soft_body
