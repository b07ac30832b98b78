"""Virtual fabric test rigs: the readings a fabric lab reports, taken off a cloth's state."""

from .cantilever import (
    CantileverReading,
    CantileverRig,
    cantilever_strip,
    rig_settings,
    run_cantilever,
    settle_reading,
    strip_centreline,
)
from .fabric import FabricFit, FabricNumbers, fabric_rig, fit_bending, vertex_mass
from .lab_fit import FabricFitCancelled, FabricResult, RigResult, fabric_preset, fit_fabric
from .readings import DrapeReading, bending_length, drape_reading, flexural_rigidity, shadow_radius, tip_angle

__all__ = [
    "CantileverReading",
    "CantileverRig",
    "DrapeReading",
    "FabricFit",
    "FabricFitCancelled",
    "FabricNumbers",
    "FabricResult",
    "RigResult",
    "bending_length",
    "cantilever_strip",
    "drape_reading",
    "fabric_preset",
    "fabric_rig",
    "fit_bending",
    "fit_fabric",
    "flexural_rigidity",
    "rig_settings",
    "run_cantilever",
    "settle_reading",
    "shadow_radius",
    "strip_centreline",
    "tip_angle",
    "vertex_mass",
]
