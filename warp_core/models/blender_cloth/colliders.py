"""Collision objects as Blender's cloth meets them (``collision.cc``): triangle meshes
sampled once per frame in world space, moved linearly between frames within each substep,
with the Collision modifier's settings that act on cloth."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ClothCollider:
    """One object with a Collision modifier.

    ``positions[k]`` are its evaluated mesh's vertices (world space) at frame
    ``start_frame + k``; past the last sample it stands still. ``triangles`` are that mesh's
    loop triangles (Blender collides triangle against triangle).
    """

    name: str
    triangles: np.ndarray  # (T, 3) int32
    positions: np.ndarray  # (F, V, 3) float64, F >= 1
    thickness_outer: float = 0.02  # collision.thickness_outer: added to the cloth's distance
    friction: float = 5.0  # collision.cloth_friction, in percent of the normal impulse
    use_culling: bool = True  # collision.use_culling ("Single Sided", on by default)
    use_normal: bool = False  # collision.use_normal ("Override Normals")

    def __post_init__(self) -> None:
        tris = np.asarray(self.triangles, dtype=np.int32).reshape(-1, 3)
        pos = np.asarray(self.positions, dtype=np.float64)
        object.__setattr__(self, "triangles", tris)
        pos = pos.reshape(len(pos), -1, 3) if pos.size else pos.reshape(0, 0, 3)
        object.__setattr__(self, "positions", pos)

    @property
    def vertex_count(self) -> int:
        return int(self.positions.shape[1])

    def at_frame(self, k: int) -> np.ndarray:
        """Vertex positions at frame ``start_frame + k`` (held after the last sample)."""
        return self.positions[min(max(k, 0), len(self.positions) - 1)]

    def validate(self) -> None:
        if len(self.positions) == 0 or len(self.triangles) == 0:
            raise ValueError(f"collider {self.name!r} needs at least one frame of positions and a triangle")
        if not np.isfinite(self.positions).all():
            raise ValueError(f"collider {self.name!r} has non-finite vertex positions")
        if self.triangles.min() < 0 or self.triangles.max() >= self.vertex_count:
            raise ValueError(f"collider {self.name!r} has triangles indexing missing vertices")
        for name in ("thickness_outer", "friction"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0.0:
                raise ValueError(f"collider {self.name!r}: {name} must be a finite number >= 0, got {v!r}")

    @property
    def moves(self) -> bool:
        return bool((self.positions != self.positions[:1]).any())

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "triangles": self.triangles.tolist(),
            "positions": self.positions.tolist(),
            "thickness_outer": float(self.thickness_outer),
            "friction": float(self.friction),
            "use_culling": bool(self.use_culling),
            "use_normal": bool(self.use_normal),
        }
