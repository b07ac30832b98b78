"""The vertex kind: targets with the cloth's own topology, compared vertex by vertex.

The loss is a weighted sum of squared vertex distances, :func:`launch_vertex_distance_loss`
on the tape, with the residual vector :func:`vertex_residuals` (``sqrt(w) * (x - t)``, so
``0.5 * |r|^2`` equals the loss with ``scale=0.5``); :class:`VertexTarget` is the kind a fit
holds. The kernels live in :mod:`.loss_kernels`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from .base import TargetKind, largest_coordinate
from .loss_kernels import scalar_type, vertex_kernels

__all__ = ["VertexTarget", "launch_vertex_distance_loss", "launch_vertex_residuals", "vertex_residuals"]


def _same_type(a: Any, b: Any) -> bool:
    return wp.types.types_equal(a, b)


def launch_point_loss(row: wp.array, points: np.ndarray, loss: wp.array, sim: Any) -> None:
    """``loss[0] += 0.5 * sum_i |x_i - p_i|^2`` for a rollout's positions ``row`` and points
    ``p`` ((N, 3)): its gradient with respect to the positions is ``x - p``."""
    target = wp.array(np.asarray(points, dtype=np.float64), dtype=sim.vec3, device=sim.device)
    weights = wp.ones(len(points), dtype=sim.dtype, device=sim.device)
    launch_vertex_distance_loss(row, target, weights, loss, scale=0.5)


def launch_vertex_distance_loss(
    positions: wp.array,
    target: wp.array,
    weights: wp.array,
    loss: wp.array,
    scale: float = 1.0,
) -> None:
    """``loss[0] += scale * sum_i w_i |x_i - t_i|^2`` (differentiable w.r.t. positions).

    ``positions`` and ``target`` are 1-D vec3 arrays of one dtype, ``weights`` and the
    one-element ``loss`` 1-D arrays of its scalar type; all on one device.
    """
    dtype = scalar_type(positions)
    _check_matching(positions, target, weights, loss)
    wp.launch(
        vertex_kernels(dtype).weighted_squared_distance_sum,
        dim=len(positions),
        inputs=[positions, target, weights, dtype(scale)],
        outputs=[loss],
        device=positions.device,
    )


def launch_vertex_residuals(
    positions: wp.array, target: wp.array, weights: wp.array, residuals: wp.array
) -> None:
    """``residuals[i] = sqrt(w_i) * (x_i - t_i)`` (vec3 per vertex) on the device."""
    dtype = scalar_type(positions)
    _check_matching(positions, target, weights)
    if not _same_type(residuals.dtype, positions.dtype) or len(residuals) != len(positions):
        raise ValueError("residuals must be a vec3 array like positions")
    wp.launch(
        vertex_kernels(dtype).weighted_vertex_residuals,
        dim=len(positions),
        inputs=[positions, target, weights],
        outputs=[residuals],
        device=positions.device,
    )


def vertex_residuals(x: np.ndarray, t: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``sqrt(w) * (x - t)`` flattened (3N,), for Levenberg–Marquardt; ``0.5 |r|^2`` = loss x 0.5."""
    x = np.asarray(x, dtype=np.float64).reshape(-1, 3)
    t = np.asarray(t, dtype=np.float64).reshape(-1, 3)
    w = np.asarray(w, dtype=np.float64).ravel()
    if x.shape != t.shape or w.shape != (len(x),):
        raise ValueError(f"shapes do not match: x {x.shape}, t {t.shape}, w {w.shape}")
    return (np.sqrt(w)[:, None] * (x - t)).ravel()


def _check_matching(
    positions: wp.array, target: wp.array, weights: wp.array, loss: wp.array | None = None
) -> None:
    dtype = scalar_type(positions)
    if not _same_type(target.dtype, positions.dtype) or len(target) != len(positions):
        raise ValueError(f"target must be {len(positions)} vec3 of the positions' dtype")
    if weights.dtype != dtype or len(weights) != len(positions):
        raise ValueError(f"weights must be {len(positions)} scalars of the positions' dtype")
    if loss is not None and loss.dtype != dtype:
        raise ValueError("loss must have the positions' scalar dtype")
    arrays = [target, weights] + ([loss] if loss is not None else [])
    if any(a.device != positions.device for a in arrays):
        raise ValueError("all arrays must be on one device")


class VertexTarget(TargetKind):
    """Target positions of every cloth vertex at each target frame, with per-vertex weights.

    Made by :func:`warp_core.targets.target_for` for a problem whose targets share the cloth's
    topology (``FitProblem.loss_kind == "vertex"``); read by ``FitObjective``. Holds the
    targets sorted by frame, their weights (``weights``, one (N,) array per frame; ``sqrt_w``
    repeated per coordinate, the residuals' factor) and their positions stacked as
    ``target_stack`` (frames, N, 3). Residuals keep no state, so several points' residuals
    may be computed side by side.
    """

    name = "vertex"
    label = "vertex targets"
    side_by_side = True

    @staticmethod
    def check_target(
        frame: int, positions: np.ndarray, triangles: np.ndarray | None, vertex_count: int
    ) -> None:
        """Refuse (ValueError) a target this kind cannot compare: another vertex count."""
        if len(positions) != vertex_count:
            raise ValueError(
                f"target at frame {frame} has {len(positions)} vertices, the cloth has {vertex_count}: "
                "use the surface loss for a target with different topology"
            )

    def __init__(self, targets: list[Any], frames: list[int], rest: np.ndarray, vertex_count: int) -> None:
        """``targets``: ``Target`` s sorted by frame, at ``frames``; ``rest``: the cloth's rest
        positions (for the coordinate scale)."""
        n = vertex_count
        self.targets = targets
        self.frames = list(frames)
        self.vertex_count = n
        self.weights = [
            np.ones(n) if t.weights is None else np.asarray(t.weights, float) for t in self.targets
        ]
        self.sqrt_w = np.concatenate([np.repeat(np.sqrt(w), 3) for w in self.weights])
        self.target_stack = np.stack([np.asarray(t.positions, float) for t in self.targets])
        self.arrays = [np.asarray(rest)] + [np.asarray(t.positions) for t in self.targets]

    def residuals(self, x: np.ndarray) -> np.ndarray:
        return self.sqrt_w * (x - self.target_stack).ravel()

    def residual_tangents(self, x: np.ndarray, dx: np.ndarray) -> np.ndarray:
        return self.sqrt_w * dx.ravel()

    has_residual_adjoint = True

    def residual_adjoint(self, x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
        return (self.sqrt_w * y).reshape(x.shape)

    def launch_loss(self, k: int, row: wp.array, loss: wp.array, sim: Any) -> None:
        dtype = sim.dtype
        d = sim.device
        target = wp.array(self.target_stack[k], dtype=sim.vec3, device=d)
        w = wp.array(self.weights[k], dtype=dtype, device=d)
        launch_vertex_distance_loss(row, target, w, loss, scale=0.5)

    def errors(self, x: np.ndarray) -> dict[int, np.ndarray]:
        """Frame -> each vertex's distance (metres) to its target."""
        return {f: np.linalg.norm(x[k] - self.target_stack[k], axis=1) for k, f in enumerate(self.frames)}

    def rmse(self, x: np.ndarray) -> float:
        return float(np.sqrt(np.mean(np.sum((x - self.target_stack) ** 2, axis=-1))))

    def motion(self, rest: np.ndarray) -> float:
        """RMS distance (metres) of the targets from the rest positions."""
        return float(np.sqrt(np.mean(np.sum((self.target_stack - rest[None]) ** 2, axis=-1))))

    def matched_points(self) -> int:
        """Every target vertex of every target frame."""
        return self.vertex_count * len(self.targets)

    def coordinate_scale(self) -> float:
        """Largest coordinate magnitude of the rest mesh and the targets."""
        return largest_coordinate(self.arrays)

    def residual_scale(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.where(self.sqrt_w > 0, 1.0 / np.maximum(self.sqrt_w, 1e-300), 0.0)
