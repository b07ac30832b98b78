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
from .drape import (
    DrapeRig,
    DrapeRunReading,
    drape_mean,
    drape_scale,
    drape_settings,
    drape_settle,
    drape_specimen,
    run_drape,
    run_drapes,
)
from .fabric import FabricFit, FabricNumbers, fabric_rig, fit_bending, vertex_mass
from .fabric_result import FabricResult, RigResult
from .lab_fit import FabricFitCancelled, fit_fabric
from .preset import fabric_preset
from .readings import DrapeReading, bending_length, drape_reading, flexural_rigidity, shadow_radius, tip_angle
from .tensile import (
    StripFit,
    StripReading,
    StripRig,
    fit_shear,
    fit_tension,
    run_strip,
    strip_mesh,
    strip_reading,
    strip_settings,
)

__all__ = [
    "CantileverReading",
    "CantileverRig",
    "DrapeReading",
    "DrapeRig",
    "DrapeRunReading",
    "FabricFit",
    "FabricFitCancelled",
    "FabricNumbers",
    "FabricResult",
    "RigResult",
    "StripFit",
    "StripReading",
    "StripRig",
    "bending_length",
    "cantilever_strip",
    "drape_mean",
    "drape_reading",
    "drape_scale",
    "drape_settings",
    "drape_settle",
    "drape_specimen",
    "fabric_preset",
    "fabric_rig",
    "fit_bending",
    "fit_fabric",
    "fit_shear",
    "fit_tension",
    "flexural_rigidity",
    "rig_settings",
    "run_cantilever",
    "run_drape",
    "run_drapes",
    "run_strip",
    "settle_reading",
    "shadow_radius",
    "strip_centreline",
    "strip_mesh",
    "strip_reading",
    "strip_settings",
    "tip_angle",
    "vertex_mass",
]
