"""The ``blender_cloth`` model: Blender's cloth modifier, fitted through its own fields."""

from __future__ import annotations

from typing import Any

from ...mesh import ClothMesh
from ..base import MapRange, Parameter
from .maps import MAP_KINDS
from .params import ALL_PARAMETER_NAMES, PARAMETER_BOUNDS, ClothParams
from .simulator import ClothSimulator

# The fit works on log(value) and so needs a positive lowest value where Blender's hard
# limit is 0. Each floor is where the parameter has stopped mattering or stopped being
# cloth; a fit that ends on one is reported as such (Blender's 0 is the meaning then).
# Measured on a 1 m clamped sheet of 12 x 12 vertices over 30 frames, default settings:
PARAMETER_FLOORS: dict[str, float] = {
    # at 0.01 the sheet already stretches to about 1.9 times its length under its own
    # weight; softer is not a fabric any more
    "tension_stiffness": 0.01,
    "compression_stiffness": 0.01,
    "shear_stiffness": 0.01,
    # bending 1e-4 moves the sheet by about 2 micrometres RMS from bending 0
    "bending_stiffness": 1e-4,
    # air damping 1e-4 moves it by about 0.02 mm RMS from no air at all
    "air_damping": 1e-4,
    # internal damping: three decades below Blender's defaults (5 and 0.5)
    "tension_damping": 1e-3,
    "compression_damping": 1e-3,
    "shear_damping": 1e-3,
    "bending_damping": 1e-4,
    "mass": 1e-4,  # kg per vertex: 0.1 g
    "pin_stiffness": 1e-3,
    "goal_friction": 1e-3,
    # the maxima of the stiffness groups: as their minima
    "tension_stiffness_max": 0.01,
    "compression_stiffness_max": 0.01,
    "shear_stiffness_max": 0.01,
    "bending_stiffness_max": 1e-4,
}
# Where artists' values usually lie (Blender's own presets fall inside): the global search
# spreads its start points over these ranges. They do not limit the fit.
PARAMETER_PLAUSIBLE: dict[str, tuple[float, float]] = {
    "tension_stiffness": (1.0, 1000.0),
    "compression_stiffness": (1.0, 1000.0),
    "shear_stiffness": (1.0, 1000.0),
    "bending_stiffness": (0.01, 200.0),  # Blender's Leather preset bends at 150
    "tension_damping": (0.5, 50.0),
    "compression_damping": (0.5, 50.0),
    "shear_damping": (0.5, 50.0),
    "bending_damping": (0.05, 50.0),
    "air_damping": (0.1, 10.0),
    "mass": (0.05, 5.0),
    "pin_stiffness": (0.1, 50.0),
    "goal_friction": (0.1, 50.0),
    "tension_stiffness_max": (1.0, 1000.0),
    "compression_stiffness_max": (1.0, 1000.0),
    "shear_stiffness_max": (1.0, 1000.0),
    "bending_stiffness_max": (0.01, 200.0),
}


class BlenderClothModel:
    """Parameters are literally ``ClothSettings`` fields, bounded by Blender's hard limits,
    so fitted values written back make Blender's own solver reproduce the target."""

    name = "blender_cloth"
    label = "Blender Cloth"
    differentiable = True  # a rollout on a tape records its adjoint (adjoint.py)
    # not "implicit" (adjoint_stable.py): alone it is biased where Blender's truncated CG
    # matters; the benchmarks compare it with these two
    gradient_kinds = ("stable", "exact")
    # the vertex groups' weights: their gradient from the same tape (maps.py)
    map_kinds = MAP_KINDS
    # what a fitted map blends between: a structural weight moves tension and compression
    # each towards its own maximum (cloth.cc); the shrink group changes the rest lengths,
    # which a simulator measures once, so it is not fitted
    map_ranges = {
        "structural": MapRange(
            ("tension_stiffness", "compression_stiffness"),
            ("tension_stiffness_max", "compression_stiffness_max"),
        ),
        "shear": MapRange(("shear_stiffness",), ("shear_stiffness_max",)),
        "bending": MapRange(("bending_stiffness",), ("bending_stiffness_max",)),
    }

    def __init__(self) -> None:
        defaults = ClothParams()
        self.parameters: tuple[Parameter, ...] = tuple(
            Parameter(
                name=n,
                label=n.replace("_", " ").capitalize(),
                default=float(getattr(defaults, n)),
                bounds=PARAMETER_BOUNDS[n],
                floor=PARAMETER_FLOORS[n],
                plausible=PARAMETER_PLAUSIBLE[n],
            )
            for n in ALL_PARAMETER_NAMES
        )

    def default_settings(self) -> ClothParams:
        return ClothParams()

    def settings_from_dict(self, values: dict[str, Any]) -> ClothParams:
        return ClothParams.from_dict(values)

    def build(
        self,
        geometry: ClothMesh,
        settings: ClothParams,
        device: str,
        precision: str,
        start_frame: int = 1,
    ) -> ClothSimulator:
        return ClothSimulator(geometry, settings, device=device, precision=precision, start_frame=start_frame)


MODEL = BlenderClothModel()
