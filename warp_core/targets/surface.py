"""The surface kind: target meshes of any topology, compared by the symmetric
point-to-surface distance (:class:`~.surface_distance.SurfaceDistance`, one per target frame)."""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from .base import TargetKind, largest_coordinate
from .surface_distance import SurfaceDistance

__all__ = ["SurfaceTarget"]


class SurfaceTarget(TargetKind):
    """One :class:`SurfaceDistance` per target frame between the cloth and that frame's mesh.

    Made by :func:`warp_core.targets.target_for` for a problem whose targets are meshes of
    their own (``FitProblem.loss_kind == "surface"``); read by ``FitObjective``. Holds the
    distances (``surfaces``, in target-frame order) on the simulator's device and in its
    precision. Each residual evaluation updates the closest-point correspondences, and the
    tangents of a Jacobian use those of its base point (:meth:`at_base_point`): residuals keep
    state, so they are computed one point after another.
    """

    name = "surface"
    label = "surface targets"

    @staticmethod
    def check_target(
        frame: int, positions: np.ndarray, triangles: np.ndarray | None, vertex_count: int
    ) -> None:
        """Refuse (ValueError) a target this kind cannot compare: one without triangles."""
        if triangles is None:
            raise ValueError(f"target at frame {frame}: the surface loss needs the target's triangles")

    def __init__(
        self,
        targets: list[Any],
        frames: list[int],
        mesh: Any,
        sim: Any,
    ) -> None:
        """``targets``: ``Target`` s with triangles, sorted by frame, at ``frames``; ``mesh``:
        the cloth's; ``sim``: the simulator whose rollouts are compared (its dtype and device)."""
        n = mesh.vertex_count
        tris = mesh.triangles()
        dtype = sim.dtype
        self.frames = list(frames)
        self.vec3 = sim.vec3
        self.device = sim.device
        self.surfaces = [
            SurfaceDistance(
                tris,
                n,
                np.asarray(t.positions, float),
                np.asarray(t.triangles),
                dtype=dtype,
                device=sim.device,
            )
            for t in targets
        ]
        self.arrays = [np.asarray(mesh.vertices)] + [np.asarray(t.positions) for t in targets]

    def residuals(self, x: np.ndarray) -> np.ndarray:
        return np.concatenate([s.residuals(x[k]) for k, s in enumerate(self.surfaces)])

    def at_base_point(self, x: np.ndarray) -> None:
        self.residuals(x)  # the correspondences at the base point, for its tangents

    def residual_tangents(self, x: np.ndarray, dx: np.ndarray) -> np.ndarray:
        return np.concatenate([s.residual_tangents(dx[k]) for k, s in enumerate(self.surfaces)])

    def launch_loss(self, k: int, row: wp.array, loss: wp.array, sim: Any) -> None:
        self.surfaces[k].launch_loss(row, loss, scale=0.5)

    def errors(self, x: np.ndarray) -> dict[int, np.ndarray]:
        """Frame -> each cloth vertex's distance (metres) to the target surface."""
        out = {}
        for k, f in enumerate(self.frames):
            s = self.surfaces[k]
            s.update_correspondences(wp.array(x[k], dtype=self.vec3, device=self.device))
            out[f] = np.linalg.norm(x[k] - s.cloth_closest_points.numpy(), axis=1)
        return out

    def rmse(self, x: np.ndarray) -> float:
        return float(np.sqrt(np.mean([s.value(x[k]) for k, s in enumerate(self.surfaces)])))

    def motion(self, rest: np.ndarray) -> float:
        """The symmetric surface distance (metres) of the targets from the rest positions."""
        return float(np.sqrt(np.mean([s.value(rest) for s in self.surfaces])))

    def matched_points(self) -> int:
        """Every target frame, a mean each."""
        return len(self.surfaces)

    def coordinate_scale(self) -> float:
        """Largest coordinate magnitude of the rest mesh and the targets."""
        return largest_coordinate(self.arrays)

    def residual_scale(self) -> np.ndarray:
        scales = []
        for s in self.surfaces:
            a = s.cloth_weights.numpy().astype(float)
            b = s.target_weights.numpy().astype(float)
            scales.append(np.repeat(1.0 / np.sqrt(0.5 * np.concatenate([a, b])), 3))
        return np.concatenate(scales)
