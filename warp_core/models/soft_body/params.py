"""Soft-body material and solver settings (tetrahedral stable Neo-Hookean on Newton's VBD)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from ..base import within_bounds

# the registry key (``SoftBodyModel.name``), which the simulator's messages name too
MODEL_NAME = "soft_body"
# Continuous physical parameters (fit candidates) and their hard limits. Young's modulus in
# pascals, density in kg/m^3; damping is stiffness-proportional (Rayleigh) damping, a time
# in seconds: the viscous stress is that time times the rate of the elastic stress (Newton's
# tetrahedral k_damp, a viscosity in Pa s, is damping * mu / 2; see ``scene``).
PARAMETER_BOUNDS: dict[str, tuple[float, float]] = {
    "young_modulus": (1.0, 1.0e10),
    "poisson_ratio": (0.0, 0.49),
    "damping": (0.0, 10.0),
    "density": (1.0, 25000.0),
    # Young's modulus and damping where a material map's weight is 1 (``materials``)
    "young_modulus_max": (1.0, 1.0e10),
    "damping_max": (0.0, 10.0),
}
PARAMETER_NAMES: tuple[str, ...] = tuple(PARAMETER_BOUNDS)
# the model's one kind of gradient (``FitSettings.gradient``): the adjoint of its converged
# implicit steps (``adjoint``)
GRADIENT_KIND = "implicit"


def lame_parameters(e: Any, nu: float) -> tuple[Any, Any]:
    """(mu, lambda) of Young's modulus ``e`` (a number or an array of them) and Poisson
    ratio ``nu``: mu = E / (2 (1 + nu)), lambda = E nu / ((1 + nu) (1 - 2 nu))."""
    return e / (2.0 * (1.0 + nu)), e * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))


def viscosity(damping: Any, mu: Any) -> Any:
    """Newton's tetrahedral ``k_damp`` (Pa s) of the damping time ``damping`` (s) and shear
    modulus ``mu`` (see ``scene``): ``tau * mu / 2``."""
    return damping * mu / 2.0


@dataclass(frozen=True)
class Collider:
    """A rigid collision mesh the soft body cannot enter, moved by its object's transform.

    ``matrices[k]`` is the object's world matrix at frame ``start_frame + k`` (one matrix:
    it stands still); beyond the last one it stays where it is.
    """

    name: str
    vertices: np.ndarray  # (V, 3) float64, object space
    triangles: np.ndarray  # (T, 3) int32
    matrices: np.ndarray  # (F, 4, 4) float64, F >= 1
    friction: float = 0.5

    def __post_init__(self) -> None:
        object.__setattr__(self, "vertices", np.asarray(self.vertices, dtype=np.float64).reshape(-1, 3))
        object.__setattr__(self, "triangles", np.asarray(self.triangles, dtype=np.int32).reshape(-1, 3))
        object.__setattr__(self, "matrices", np.asarray(self.matrices, dtype=np.float64).reshape(-1, 4, 4))

    @property
    def moves(self) -> bool:
        return len(self.matrices) > 1 and not np.allclose(self.matrices, self.matrices[0])

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "vertices": self.vertices.tolist(),
            "triangles": self.triangles.tolist(),
            "matrices": self.matrices.tolist(),
            "friction": float(self.friction),
        }


@dataclass
class SoftBodyParams:
    """Settings of the ``soft_body`` model; defaults make a soft rubber (jelly-like) body."""

    young_modulus: float = 1.0e5
    poisson_ratio: float = 0.3
    damping: float = 0.01
    density: float = 1000.0
    # where the stiffness and damping maps' weight is 1 (``materials``): a weight blends
    # from the value above to these, as Blender's cloth stiffness groups blend to their Max
    young_modulus_max: float = 1.0e5
    damping_max: float = 0.01
    # solver: VBD substeps per frame and vertex-block iterations per substep
    substeps: int = 4
    iterations: int = 10
    # the tetrahedral lattice the mesh is embedded in: cells along its longest side
    lattice_cells: int = 8
    # input-mesh vertices whose pin (goal) weight exceeds this are pinned to the input mesh
    pin_threshold: float = 0.5
    # a ground plane at z = ground_height (world space), and its friction
    ground: bool = False
    ground_height: float = 0.0
    friction: float = 0.5
    # from the scene
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)
    fps: float = 24.0
    colliders: tuple[Collider, ...] = field(default=())

    def values(self) -> dict[str, float]:
        """The fit candidates: parameter name -> value."""
        return {name: float(getattr(self, name)) for name in PARAMETER_NAMES}

    def as_dict(self) -> dict:
        d = asdict(self)
        d["colliders"] = [c.as_dict() for c in self.colliders]
        return d

    @classmethod
    def from_dict(cls, values: dict) -> SoftBodyParams:
        """Inverse of :meth:`as_dict` (lists for tuples and arrays accepted)."""
        values = dict(values)
        if "gravity" in values:
            values["gravity"] = tuple(float(g) for g in values["gravity"])
        values["colliders"] = tuple(
            c if isinstance(c, Collider) else Collider(**c) for c in values.get("colliders", ())
        )
        return cls(**values)

    def replace(self, **changes: float) -> SoftBodyParams:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        unknown = set(changes) - set(d)
        if unknown:
            raise ValueError(f"unknown soft-body parameter(s): {', '.join(sorted(unknown))}")
        d.update(changes)
        return SoftBodyParams(**d)

    def lame(self) -> tuple[float, float]:
        """(mu, lambda), Newton's k_mu and k_lambda (:func:`lame_parameters`)."""
        return lame_parameters(float(self.young_modulus), float(self.poisson_ratio))

    def validate(self) -> None:
        """Raise ValueError naming the first out-of-range or non-finite value."""
        for name, (lo, hi) in PARAMETER_BOUNDS.items():
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{name} must be a finite number, got {v!r}")
            if not within_bounds(v, (lo, hi)):
                raise ValueError(f"{name} = {v} is outside the soft-body range [{lo}, {hi}]")
        for name, lo in (("substeps", 1), ("iterations", 1), ("lattice_cells", 1)):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
        if not 0.0 <= float(self.pin_threshold) < 1.0:
            raise ValueError(f"pin_threshold must lie in [0, 1), got {self.pin_threshold!r}")
        for name in ("ground_height", "friction"):
            if not math.isfinite(float(getattr(self, name))):
                raise ValueError(f"{name} must be a finite number, got {getattr(self, name)!r}")
        if self.friction < 0.0:
            raise ValueError(f"friction must be >= 0, got {self.friction!r}")
        if not math.isfinite(self.fps) or self.fps <= 0.0:
            raise ValueError(f"fps must be > 0, got {self.fps!r}")
        if len(self.gravity) != 3 or not all(math.isfinite(g) for g in self.gravity):
            raise ValueError(f"gravity must be three finite numbers, got {self.gravity!r}")
        for c in self.colliders:
            finite = all(np.isfinite(a).all() for a in (c.vertices, c.matrices))
            if not finite or len(c.triangles) == 0 or len(c.matrices) == 0:
                raise ValueError(f"collider {c.name!r} needs finite vertices, triangles and matrices")


# what the scene gives rather than the object's soft-body settings
SCENE_FIELDS = ("gravity", "fps", "colliders")
SETTINGS_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(SoftBodyParams) if f.name not in SCENE_FIELDS)
