"""Cloth material parameters, named after Blender's ``ClothSettings`` fields."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from ..base import within_bounds
from .colliders import ClothCollider

# Fields that are continuous physical parameters (fit candidates), with Blender's hard
# limits (RNA ``hard_min``/``hard_max``) as bounds.
PARAMETER_BOUNDS: dict[str, tuple[float, float]] = {
    "tension_stiffness": (0.0, 10000.0),
    "compression_stiffness": (0.0, 10000.0),
    "shear_stiffness": (0.0, 10000.0),
    "bending_stiffness": (0.0, 10000.0),
    "tension_damping": (0.0, 50.0),
    "compression_damping": (0.0, 50.0),
    "shear_damping": (0.0, 50.0),
    "bending_damping": (0.0, 1000.0),
    "air_damping": (0.0, 10.0),
    "mass": (0.0, 3.4e38),
    "pin_stiffness": (0.0, 50.0),
    "goal_friction": (0.0, 50.0),
}
# The stiffness at weight 1 of the stiffness vertex groups (Blender's "Max"). They act only
# through a group, so they follow the parameters that act on every cloth.
GROUP_MAXIMUM_BOUNDS: dict[str, tuple[float, float]] = {
    "tension_stiffness_max": (0.0, 10000.0),
    "compression_stiffness_max": (0.0, 10000.0),
    "shear_stiffness_max": (0.0, 10000.0),
    "bending_stiffness_max": (0.0, 10000.0),
}
# the parameters that act on every cloth
PARAMETER_NAMES: tuple[str, ...] = tuple(PARAMETER_BOUNDS)
GROUP_MAXIMUM_NAMES: tuple[str, ...] = tuple(GROUP_MAXIMUM_BOUNDS)
# every fit candidate, in the order of the simulator's parameter array
ALL_PARAMETER_NAMES: tuple[str, ...] = PARAMETER_NAMES + GROUP_MAXIMUM_NAMES
PARAMETER_BOUNDS.update(GROUP_MAXIMUM_BOUNDS)


@dataclass
class ClothParams:
    """Blender cloth settings; defaults are Blender's."""

    tension_stiffness: float = 15.0
    compression_stiffness: float = 15.0
    shear_stiffness: float = 5.0
    bending_stiffness: float = 0.5
    tension_damping: float = 5.0
    compression_damping: float = 5.0
    shear_damping: float = 5.0
    bending_damping: float = 0.5
    air_damping: float = 1.0
    mass: float = 0.3
    pin_stiffness: float = 1.0
    goal_friction: float = 0.0
    # a spring's stiffness is min + lin * |max - min|, lin the mean group weight of its
    # two vertices (0 without a group, so the max only acts through a group)
    tension_stiffness_max: float = 15.0
    compression_stiffness_max: float = 15.0
    shear_stiffness_max: float = 5.0
    bending_stiffness_max: float = 0.5
    # not differentiable
    quality: int = 5
    time_scale: float = 1.0
    bending_model: str = "ANGULAR"  # or "LINEAR"
    # shrinking: spring rest lengths times cloth_shrink_factor, built once into the springs
    shrink_min: float = 0.0
    shrink_max: float = 0.0
    # sewing: every loose edge (in no face) pulls its two vertices together with a
    # zero-length spring of the tension stiffness, its force capped at sewing_force_max
    # (0: no cap)
    use_sewing_springs: bool = False
    sewing_force_max: float = 0.0
    # dynamic mesh: every frame the rest shape (spring lengths, hinge angles, the mean
    # structural length) is measured again on the input mesh, as the pin goals carry it
    use_dynamic_mesh: bool = False
    # pressure (see ``pressure``): uniform, and back towards the rest or a target volume
    use_pressure: bool = False
    uniform_pressure_force: float = 0.0
    use_pressure_volume: bool = False
    target_volume: float = 0.0
    pressure_factor: float = 1.0
    # hydrostatic pressure: not simulated (the input check refuses it; overridden, ignored)
    fluid_density: float = 0.0
    # Wind and Force fields standing still (see ``fields``): one row of FIELD_COLUMNS each
    force_fields: tuple = ()
    fps: float = 24.0  # the scene's frames per second: a field's push is per second
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)  # scene.gravity * effector gravity weight
    # object collisions (``collision``): the Collision objects the cloth meets (none: off)
    # and the cloth's collision settings (Blender's names in ``ClothCollisionSettings``)
    colliders: tuple[ClothCollider, ...] = field(default=())
    distance_min: float = 0.015
    impulse_clamp: float = 0.0
    collision_quality: int = 2
    # vertices of the object-collision group (weight > 0): triangles of only these collide not
    collision_excluded: tuple[int, ...] = ()
    # self collisions (``self_collision``), off by default; the rounds are collision_quality's
    use_self_collision: bool = False
    self_distance_min: float = 0.015
    self_friction: float = 5.0
    self_impulse_clamp: float = 0.0
    # vertices of the self-collision group (weight > 0): triangles of only these collide not
    self_collision_excluded: tuple[int, ...] = ()

    def values(self) -> dict[str, float]:
        """The continuous parameters as a dict (name -> value)."""
        return {n: float(getattr(self, n)) for n in ALL_PARAMETER_NAMES}

    def with_parameters(self, values: dict[str, float]) -> tuple[ClothParams, list[float]]:
        """These settings with some continuous parameters changed (validated), and every
        continuous parameter in ``ALL_PARAMETER_NAMES`` order: a simulator's ``params`` row."""
        unknown = set(values) - set(ALL_PARAMETER_NAMES)
        if unknown:
            raise ValueError(f"unknown cloth parameter(s): {', '.join(sorted(unknown))}")
        settings = self.replace(**{k: float(v) for k, v in values.items()})
        settings.validate()
        current = settings.values()
        return settings, [current[k] for k in ALL_PARAMETER_NAMES]

    def as_dict(self) -> dict:
        """Plain data (colliders as lists): what ``from_dict`` reads back."""
        d = asdict(self)
        d["colliders"] = [c.as_dict() for c in self.colliders]
        return d

    @classmethod
    def from_dict(cls, values: dict) -> ClothParams:
        values = dict(values)
        if "gravity" in values:
            values["gravity"] = tuple(float(g) for g in values["gravity"])
        if "force_fields" in values:
            values["force_fields"] = tuple(tuple(float(c) for c in row) for row in values["force_fields"])
        values["colliders"] = tuple(
            c if isinstance(c, ClothCollider) else ClothCollider(**c) for c in values.get("colliders", ())
        )
        for name in ("collision_excluded", "self_collision_excluded"):
            values[name] = tuple(int(i) for i in values.get(name, ()))
        return cls(**values)

    def replace(self, **changes: float) -> ClothParams:
        # shallow: the colliders' arrays are shared, not copied
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        unknown = set(changes) - set(d)
        if unknown:
            raise ValueError(f"unknown cloth parameter(s): {', '.join(sorted(unknown))}")
        d.update(changes)
        return ClothParams(**d)

    def validate(self) -> None:
        """Raise ValueError naming the first out-of-range or non-finite value."""
        import math

        for name, (lo, hi) in PARAMETER_BOUNDS.items():
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{name} must be a finite number, got {v!r}")
            if not within_bounds(v, (lo, hi)):
                raise ValueError(f"{name} = {v} is outside Blender's range [{lo}, {hi}]")
        if self.mass <= 0.0:
            raise ValueError(f"mass must be > 0, got {self.mass}")
        if not isinstance(self.quality, int) or self.quality < 1:
            raise ValueError(f"quality must be an integer >= 1, got {self.quality!r}")
        if not math.isfinite(self.time_scale) or self.time_scale <= 0.0:
            raise ValueError(f"time_scale must be > 0, got {self.time_scale}")
        if self.bending_model not in ("ANGULAR", "LINEAR"):
            raise ValueError(f"bending_model must be 'ANGULAR' or 'LINEAR', got {self.bending_model!r}")
        for name in ("shrink_min", "shrink_max"):
            v = getattr(self, name)
            # Blender's hard range is [-FLT_MAX, 1]: at most 1 keeps every shrink factor >= 0
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v > 1.0:
                raise ValueError(f"{name} must be a finite number <= 1, got {v!r}")
        for name in ("uniform_pressure_force", "target_volume", "pressure_factor", "fluid_density"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{name} must be a finite number, got {v!r}")
        if not math.isfinite(self.fps) or self.fps <= 0.0:
            raise ValueError(f"fps must be > 0, got {self.fps!r}")
        for k, row in enumerate(self.force_fields):
            if len(row) != 20 or not all(math.isfinite(float(c)) for c in row):
                raise ValueError(f"force field {k} must be 20 finite numbers")
        v = self.sewing_force_max
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0.0:
            raise ValueError(f"sewing_force_max must be a finite number >= 0, got {v!r}")
        if len(self.gravity) != 3 or not all(math.isfinite(g) for g in self.gravity):
            raise ValueError(f"gravity must be three finite numbers, got {self.gravity!r}")
        for name in (
            "distance_min",
            "impulse_clamp",
            "self_distance_min",
            "self_friction",
            "self_impulse_clamp",
        ):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0.0:
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if not isinstance(self.collision_quality, int) or self.collision_quality < 1:
            raise ValueError(f"collision_quality must be an integer >= 1, got {self.collision_quality!r}")
        for c in self.colliders:
            c.validate()


# what the scene gives rather than ClothSettings: gravity (scene gravity times its weight), the
# force fields acting on the cloth, the frame rate, and collisions (the Collision objects and
# the modifier's ``collision_settings``)
COLLISION_FIELDS = (
    "colliders",
    "distance_min",
    "impulse_clamp",
    "collision_quality",
    "collision_excluded",
    "use_self_collision",
    "self_distance_min",
    "self_friction",
    "self_impulse_clamp",
    "self_collision_excluded",
)
SCENE_FIELDS = ("gravity", "force_fields", "fps", *COLLISION_FIELDS)
CLOTH_SETTINGS_FIELDS: tuple[str, ...] = tuple(
    f.name for f in fields(ClothParams) if f.name not in SCENE_FIELDS
)
