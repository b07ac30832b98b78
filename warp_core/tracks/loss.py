"""Reprojection mismatch of footage targets, in pixels.

For every marker the bound surface point of the simulated mesh at the marker's frame is
projected through the camera (lens distortion applied, :func:`.camera.project`) and
compared with the marker. The residuals are Huber-scaled: ``r = sqrt(w) * s(|e|) * e`` with
``s = 1`` up to the threshold ``d`` and ``s = sqrt(2 d / |e| - d^2 / |e|^2)`` beyond it, so
``0.5 |r|^2`` is Huber's loss of the pixel error (quadratic near zero, linear past ``d``)
and ``r`` stays continuously differentiable for Levenberg-Marquardt. Weights are the
markers' track weights, scaled to a mean of 1, so ``0.5 |r|^2 = 0.5 K RMSE^2`` for ``K``
markers while all errors are below the threshold.

Tangents ``(dr/dx) dx`` are central differences of the residuals in position space: the
projection is smooth and cheap, and a step of 1e-6 of the scene size is exact to ~1e-9.
"""

from __future__ import annotations

import numpy as np

from .camera import project
from .targets import FootageTargets

__all__ = ["Reprojection"]

# position step of the tangent difference, relative to the scene size
_TANGENT_STEP = 1e-6
# how far off (in image diagonals) a bound point behind the camera counts
_BEHIND = 10.0


class Reprojection:
    """Residuals, errors and reports of footage targets for rollouts recorded at ``frames``."""

    def __init__(self, targets: FootageTargets, frames: list[int], scene_size: float) -> None:
        self.targets = targets
        used = np.asarray(targets.marker_weight, dtype=np.float64) > 0.0
        row = {f: k for k, f in enumerate(frames)}
        self.marker_frame = np.asarray(targets.marker_frame)[used].astype(np.int64)
        self.frame_row = np.array([row[int(f)] for f in self.marker_frame], dtype=np.int64)
        track = np.asarray(targets.marker_track)[used].astype(np.int64)
        self.marker_track = track
        self.triangles = np.array([b.vertices for b in targets.bindings], dtype=np.int64)[track]
        self.barycentric = np.array([b.barycentric for b in targets.bindings], dtype=np.float64)[track]
        self.pixels = np.asarray(targets.marker_pixel, dtype=np.float64)[used]
        weight = np.asarray(targets.marker_weight, dtype=np.float64)[used]
        self.weight = weight / weight.mean()
        self.sqrt_w = np.sqrt(self.weight)
        self.huber = float(targets.huber_px)
        self.by_frame = [(f, np.flatnonzero(self.marker_frame == f)) for f in sorted(set(self.marker_frame))]
        self.step = _TANGENT_STEP * max(scene_size, 1e-9)
        intr = targets.intrinsics
        self.behind_px = _BEHIND * float(np.hypot(intr.width, intr.height))

    @property
    def marker_count(self) -> int:
        return len(self.pixels)

    def points(self, x: np.ndarray) -> np.ndarray:
        """(K, 3) world position of each marker's bound surface point (x: frames, N, 3)."""
        corners = x[self.frame_row[:, None], self.triangles]  # (K, 3, 3)
        return np.einsum("kj,kjd->kd", self.barycentric, corners)

    def projected(self, x: np.ndarray) -> np.ndarray:
        """(K, 2) pixel position of each marker's bound point, through the camera of its frame."""
        p = self.points(x)
        out = np.empty((len(p), 2))
        for frame, idx in self.by_frame:
            out[idx] = project(p[idx], self.targets.cameras[int(frame)], self.targets.intrinsics)
        return out

    def errors(self, x: np.ndarray) -> np.ndarray:
        """(K, 2) pixel error of each marker: projection minus marker. A point behind the
        camera has no image: it counts as ``_BEHIND`` image diagonals off, so a rollout
        that carries the cloth out of the camera's view scores badly instead of not at all."""
        e = self.projected(x) - self.pixels
        return np.where(np.isfinite(e), e, self.behind_px)

    def residuals(self, x: np.ndarray) -> np.ndarray:
        e = self.errors(x)
        s = np.linalg.norm(e, axis=1)
        d = self.huber
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(s <= d, 1.0, np.sqrt(np.maximum(2.0 * d / s - (d / s) ** 2, 0.0)))
        return (self.sqrt_w * scale)[:, None].repeat(2, axis=1).ravel() * e.ravel()

    def residual_tangents(self, x: np.ndarray, dx: np.ndarray) -> np.ndarray:
        """``(dr/dx) dx`` at positions ``x`` (central difference, see the module docstring)."""
        size = float(np.abs(dx).max())
        if size == 0.0 or not np.isfinite(size):
            return np.zeros(2 * self.marker_count)
        h = self.step / size
        return (self.residuals(x + h * dx) - self.residuals(x - h * dx)) / (2.0 * h)

    def rmse(self, x: np.ndarray) -> float:
        """Weighted RMS pixel error over all markers."""
        e2 = np.sum(self.errors(x) ** 2, axis=1)
        return float(np.sqrt(np.sum(self.weight * e2) / np.sum(self.weight)))

    def per_frame(self, x: np.ndarray) -> dict[int, np.ndarray]:
        """Scene frame -> pixel error of each of its markers."""
        e = np.linalg.norm(self.errors(x), axis=1)
        return {int(f): e[idx] for f, idx in self.by_frame}

    def per_track(self, x: np.ndarray) -> dict[str, float]:
        """Track name -> RMS pixel error of its markers, worst first."""
        e2 = np.sum(self.errors(x) ** 2, axis=1)
        names = self.targets.track_names()
        out = {}
        for k in sorted(set(self.marker_track.tolist())):
            sel = self.marker_track == k
            out[names[k]] = float(np.sqrt(np.mean(e2[sel])))
        return dict(sorted(out.items(), key=lambda item: -item[1]))

    def change(self, x0: np.ndarray, x1: np.ndarray) -> float:
        """RMS pixel distance between the projections of two rollouts: how far a change of
        the motion moves what the camera sees."""
        d = self.projected(x1) - self.projected(x0)
        return float(np.sqrt(np.mean(np.sum(d**2, axis=1))))

    def motion(self, rest: np.ndarray) -> float:
        """RMS pixel distance of the markers from the cloth left at rest: what there is to fit."""
        still = np.broadcast_to(rest, (int(self.frame_row.max()) + 1, *rest.shape))
        return self.rmse(still)

    def residual_scale(self) -> np.ndarray:
        return np.repeat(1.0 / self.sqrt_w, 2)
