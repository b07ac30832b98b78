"""The ``soft_body`` model: a tetrahedral stable Neo-Hookean soft body on Newton's VBD."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...mesh import ClothMesh
from ..base import MapRange, Parameter
from .materials import MAP_KINDS
from .params import GRADIENT_KIND, MODEL_NAME, PARAMETER_BOUNDS, PARAMETER_NAMES, SoftBodyParams

if TYPE_CHECKING:
    from .simulator import SoftBodySimulator

# The fit works on log(value): where the hard limit is 0, these are the smallest values it
# tries. A Poisson ratio of 0.01 is as good as 0 for any body (lateral strain 1 % of the
# axial); a damping time of 10 us damps a 100 Hz vibration by 0.3 % of critical.
PARAMETER_FLOORS: dict[str, float] = {"poisson_ratio": 0.01, "damping": 1e-5, "damping_max": 1e-5}
# Where real soft materials lie (gels to hard rubber, and their densities); the global
# search spreads its start points over these ranges, they do not limit the fit.
PARAMETER_PLAUSIBLE: dict[str, tuple[float, float]] = {
    "young_modulus": (1.0e3, 1.0e8),
    "poisson_ratio": (0.05, 0.49),
    "damping": (1e-4, 1.0),
    "density": (100.0, 3000.0),
    "young_modulus_max": (1.0e3, 1.0e8),
    "damping_max": (1e-4, 1.0),
}
LABELS = {
    "young_modulus": "Young's modulus",
    "poisson_ratio": "Poisson ratio",
    "damping": "Damping",
    "density": "Density",
    "young_modulus_max": "Young's modulus max",
    "damping_max": "Damping max",
}


class SoftBodyModel:
    """Parameters are the soft body's material: Young's modulus (Pa), Poisson ratio,
    damping (s, stiffness-proportional) and density (kg/m^3), and the Young's modulus and
    damping that the painted maps blend towards (``materials``)."""

    name = MODEL_NAME
    label = "Soft Body (VBD)"
    differentiable = True  # a rollout on a tape records its implicit adjoint (``adjoint``)
    gradient_kinds: tuple[str, ...] = (GRADIENT_KIND,)
    # painted maps of Young's modulus and damping (``materials``), fitted as regions
    map_kinds: tuple[str, ...] = MAP_KINDS
    map_ranges = {
        "stiffness": MapRange(("young_modulus",), ("young_modulus_max",)),
        "damping": MapRange(("damping",), ("damping_max",)),
    }

    def __init__(self) -> None:
        defaults = SoftBodyParams()
        self.parameters: tuple[Parameter, ...] = tuple(
            Parameter(
                name=n,
                label=LABELS[n],
                default=float(getattr(defaults, n)),
                bounds=PARAMETER_BOUNDS[n],
                floor=PARAMETER_FLOORS.get(n),
                plausible=PARAMETER_PLAUSIBLE[n],
            )
            for n in PARAMETER_NAMES
        )

    def default_settings(self) -> SoftBodyParams:
        return SoftBodyParams()

    def settings_from_dict(self, values: dict[str, Any]) -> SoftBodyParams:
        return SoftBodyParams.from_dict(values)

    def geometry_summary(self, geometry: ClothMesh, settings: SoftBodyParams) -> dict[str, Any]:
        """What the mesh becomes: the lattice's tets, nodes, cell size and worst tet quality
        (mean ratio, 1 for a regular tet)."""
        from .lattice import build_lattice

        lattice = build_lattice(geometry.vertices, geometry.triangles(), settings.lattice_cells)
        return {
            "tets": int(len(lattice.tets)),
            "nodes": int(len(lattice.nodes)),
            "cell_size_m": float(lattice.cell_size),
            "worst_quality": float(lattice.worst_quality),
        }

    def build(
        self,
        geometry: ClothMesh,
        settings: SoftBodyParams,
        device: str,
        precision: str,
        start_frame: int = 1,
    ) -> SoftBodySimulator:
        from .simulator import SoftBodySimulator  # imports Newton: only when simulating

        return SoftBodySimulator(
            geometry, settings, device=device, precision=precision, start_frame=start_frame
        )


MODEL = SoftBodyModel()
