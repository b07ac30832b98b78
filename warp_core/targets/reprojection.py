"""The footage kind: the reprojection mismatch of tracked markers, in pixels.

For every marker the bound surface point of the simulated mesh at the marker's frame is
projected through the camera (lens distortion applied, :mod:`warp_core.tracks.camera`) and
compared with the marker. The residuals are Huber-scaled: ``r = sqrt(w) * s(|e|) * e`` with
``s = 1`` up to the threshold ``d`` and ``s = sqrt(2 d / |e| - d^2 / |e|^2)`` beyond it, so
``0.5 |r|^2`` is Huber's loss of the pixel error (quadratic near zero, linear past ``d``) and
``r`` stays continuously differentiable for Levenberg-Marquardt. Weights are the markers' track
weights, scaled to a mean of 1, so ``0.5 |r|^2 = 0.5 K RMSE^2`` for ``K`` markers while all
errors are below the threshold.

Markers at the start frame see the cloth at rest (``rest``, the same for every value of the
parameters): they say where each track sits on it and nothing of the material. Where a track
sits is known only as well as its markers tell (a ray through one noisy start-frame marker
lands millimetres off, centimetres at a grazing view), and that offset would bias the
material. So each track's binding is profiled out: for every rollout, its two barycentric
degrees of freedom are re-solved by Gauss-Newton to minimize the track's own residuals, on the
surface it was bound to: its triangle, or the one across an edge (:mod:`warp_core.tracks.domain`).
The residuals are those of the profiled bindings; their tangents ``(dr/dx) dx`` are central
differences in position space (the projection is smooth and cheap) with each side's bindings
re-solved from the base point's: the exact first-order change of the profiled residuals. The
result's reports on single tracks are :mod:`.track_reports`'.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..tracks.camera import project
from ..tracks.domain import DIRECTIONS, BindingDomain, triangle_step
from ..tracks.targets import FootageTargets
from .base import TargetKind
from .track_reports import TrackReport, binding_drift, binding_records, followed_vertices, track_warnings
from .units import PIXELS

__all__ = ["Reprojection"]

# position step of the tangent difference, relative to the scene size
_TANGENT_STEP = 1e-6
# how far off (in image diagonals) a bound point behind the camera counts
_BEHIND = 10.0
# profiled bindings: Gauss-Newton iterations and when they have converged, the barycentric
# step of their difference Jacobian, and the fewest markers a track needs to be profiled
# (2 unknowns)
_PROFILE_ITERATIONS = 25
_PROFILE_CONVERGED = 1e-13
_BARY_STEP = 1e-6
_PROFILE_MIN_MARKERS = 3
# a binding (vertices (T, 3), barycentrics (T, 3)) per track
Bindings = tuple[np.ndarray, np.ndarray]


class Reprojection(TargetKind):
    """Residuals, errors and reports of footage targets for rollouts recorded at ``frames``.

    Made by :func:`warp_core.targets.target_for` for a problem with footage targets
    (``FitProblem.tracks``), or directly from ``FootageTargets``; read by ``FitObjective``, the
    footage fit (which holds the bindings for its search, :meth:`bindings_held`) and the
    verdict (the per-track reports, the markers' noise, the camera's error). Holds each used
    marker's frame, track, pixel, weight and camera, each track's binding, and which bindings
    are profiled (``profiled``). Residuals keep the last rollout's profiled bindings, so they
    are computed one point after another. No tape loss: the fit takes Levenberg-Marquardt.
    """

    name = "tracks"
    label = "footage targets"
    unit = PIXELS
    has_tape_gradient = False
    tape_refusal = (
        "footage targets have no tape gradient: fit them with Levenberg-Marquardt "
        "(at most 12 free parameters)"
    )
    shared_refusal = "footage targets are fitted one object at a time, not in a shared fit"
    # Markers carry noise, so a fitted value is uncertain by what that noise allows: it counts
    # as determined by the tracks when its 95 % confidence interval lies within +-3 %.
    noise_spread = 0.03
    reports_tracks = True

    def __init__(
        self,
        targets: FootageTargets,
        frames: list[int],
        scene_size: float,
        rest: tuple[int, np.ndarray] | None = None,
        profile: bool = True,
        triangles: np.ndarray | None = None,
    ) -> None:
        """``frames``: the rollout's recorded frames; ``rest``: (start frame, the cloth's
        positions there), for the markers at the start frame (else they must not be any);
        ``triangles``: the surface's (M, 3) triangles, which a profiled binding may cross into
        from its own (None: each binding stays in its own triangle)."""
        self.targets = targets
        used = np.asarray(targets.marker_weight, dtype=np.float64) > 0.0
        # row 0 of the positions is the cloth at rest, then the rollout's frames
        row = {f: k + 1 for k, f in enumerate(frames)}
        self.rest = None
        if rest is not None:
            row[int(rest[0])] = 0
            self.rest = np.asarray(rest[1], dtype=np.float64)[None]
        self.scene_size = max(float(scene_size), 1e-9)
        self.marker_frame = np.asarray(targets.marker_frame)[used].astype(np.int64)
        self.frame_row = np.array([row[int(f)] for f in self.marker_frame], dtype=np.int64)
        self.marker_track = np.asarray(targets.marker_track)[used].astype(np.int64)
        self.track_vertices = np.array([b.vertices for b in targets.bindings], dtype=np.int64)
        # on the surface: a binding given outside its triangle (a coordinate below 0) is clipped onto it
        bary = np.maximum(np.array([b.barycentric for b in targets.bindings], dtype=np.float64), 0.0)
        self.base_bary = bary / bary.sum(axis=1, keepdims=True)
        self.domain = BindingDomain(self.track_vertices, triangles)
        self.pixels = np.asarray(targets.marker_pixel, dtype=np.float64)[used]
        weight = np.asarray(targets.marker_weight, dtype=np.float64)[used]
        self.weight = weight / weight.mean()
        self.sqrt_w = np.sqrt(self.weight)
        self.huber = float(targets.huber_px)
        self.step = _TANGENT_STEP * self.scene_size
        intr = targets.intrinsics
        self.behind_px = _BEHIND * float(np.hypot(intr.width, intr.height))
        # each marker's camera
        cameras = [targets.cameras[int(f)] for f in self.marker_frame]
        self.cameras = np.array(cameras, dtype=np.float64).reshape(-1, 4, 4)
        counts = np.bincount(self.marker_track, minlength=len(targets.bindings))
        self.profiled = (counts >= _PROFILE_MIN_MARKERS) if profile else np.zeros(len(counts), bool)
        # the last rollout's profiled bindings: residuals, tangents and every report of a
        # result ask for those of the same rollout array
        self._last: tuple[np.ndarray, Bindings, bytes] | None = None

    @property
    def marker_count(self) -> int:
        return len(self.pixels)

    # ------------------------------------------------------------------ projection
    def _stacked(self, x: np.ndarray) -> np.ndarray:
        """The rollout ``x`` (frames, N, 3) behind the rest positions: rows as ``frame_row``."""
        rest = self.rest if self.rest is not None else np.zeros((1, *x.shape[1:]))
        return np.concatenate([rest, x])

    def _points(self, x: np.ndarray, at: Bindings) -> np.ndarray:
        """(K, 3) each marker's bound point with per-track bindings ``at``, for the rollout ``x``."""
        vertices, bary = at
        corners = self._stacked(x)[self.frame_row[:, None], vertices[self.marker_track]]  # (K, 3, 3)
        return np.einsum("kj,kjd->kd", bary[self.marker_track], corners)

    def _project(self, points: np.ndarray) -> np.ndarray:
        """(K, 2) pixels of each marker's point through its own frame's camera (NaN behind it)."""
        return project(points, self.cameras, self.targets.intrinsics)

    def _errors(self, x: np.ndarray, at: Bindings) -> np.ndarray:
        """(K, 2) projection minus marker. A point behind the camera has no image: it counts as
        ``_BEHIND`` image diagonals off, so a rollout that carries the cloth out of view scores
        badly instead of not at all."""
        e = self._project(self._points(x, at)) - self.pixels
        return np.where(np.isfinite(e), e, self.behind_px)

    def _weights(self, e: np.ndarray) -> np.ndarray:
        """(K,) the factor of each marker's residual: its weight's root times Huber's scale."""
        s = np.linalg.norm(e, axis=1)
        d = self.huber
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(s <= d, 1.0, np.sqrt(np.maximum(2.0 * d / s - (d / s) ** 2, 0.0)))
        return self.sqrt_w * scale

    def _scaled(self, e: np.ndarray) -> np.ndarray:
        """(K, 2) Huber-scaled weighted residuals of pixel errors ``e``."""
        return self._weights(e)[:, None] * e

    # ------------------------------------------------------------------ profiled bindings
    def _binding_jacobian(self, x: np.ndarray, at: Bindings) -> np.ndarray:
        """(K, 2, 2) d scaled residual / d binding direction, per marker (central differences)."""
        vertices, bary = at
        cols = []
        for direction in DIRECTIONS:
            h = _BARY_STEP * direction
            up = self._scaled(self._errors(x, (vertices, bary + h)))
            down = self._scaled(self._errors(x, (vertices, bary - h)))
            cols.append((up - down) / (2 * _BARY_STEP))
        return np.stack(cols, axis=2)

    def _per_track(self, values: np.ndarray) -> np.ndarray:
        """Sum of per-marker arrays over each track's markers: (T, ...)."""
        out = np.zeros((len(self.base_bary), *values.shape[1:]))
        np.add.at(out, self.marker_track, values)
        return out

    def bindings(self, x: np.ndarray, start: Bindings | None = None) -> Bindings:
        """Each track's binding (vertices, barycentrics) that best explains its markers for
        rollout ``x`` (Gauss-Newton from the given bindings, or from ``start``)."""
        if start is None:
            mask = self.profiled.tobytes()
            if self._last is not None and self._last[0] is x and self._last[2] == mask:
                return self._last[1]
            found = self._solve_bindings(x, (self.track_vertices, self.base_bary), self.profiled)
            self._last = (x, found, mask)
            return found
        return self._solve_bindings(x, start, self.profiled)

    def _solve_bindings(
        self, x: np.ndarray, start: Bindings, which: np.ndarray, bounded: bool = True
    ) -> Bindings:
        """The bindings ``which`` re-solved from ``start``: each in its triangle, or in the one
        across the edge it ends on where that is better (``self.domain``); with ``bounded``
        False, Gauss-Newton anywhere in its triangle's plane."""
        if not bounded:
            return self._descend(x, start, which, False)

        def cost(at: Bindings) -> np.ndarray:
            return self._per_track(np.sum(self._scaled(self._errors(x, at)) ** 2, axis=1))

        return self.domain.solve(start, which, lambda at, mask: self._descend(x, at, mask, True), cost)

    def _descend(self, x: np.ndarray, start: Bindings, which: np.ndarray, bounded: bool) -> Bindings:
        """Gauss-Newton on the bindings ``which`` from ``start``, each step the model's best
        within the triangle (``triangle_step``), or anywhere in its plane."""
        vertices, bary = start[0].copy(), start[1].copy()
        if not which.any():
            return vertices, bary
        for _ in range(_PROFILE_ITERATIONS):
            r = self._scaled(self._errors(x, (vertices, bary)))
            jac = self._binding_jacobian(x, (vertices, bary))
            normal = self._per_track(np.einsum("kai,kaj->kij", jac, jac))
            gradient = self._per_track(np.einsum("kai,ka->ki", jac, r))
            ok = which & (np.abs(np.linalg.det(normal)) > 1e-300)
            step = np.zeros((len(bary), 2))
            if bounded:
                step[ok] = triangle_step(bary[ok], normal[ok], gradient[ok])
                bary = np.maximum(bary + step @ DIRECTIONS, 0.0)
                bary /= bary.sum(axis=1, keepdims=True)
            else:
                step[ok] = -np.linalg.solve(normal[ok], gradient[ok][..., None])[..., 0]
                bary = bary + step @ DIRECTIONS
            if np.abs(step).max(initial=0.0) < _PROFILE_CONVERGED:
                break
        return vertices, bary

    # ------------------------------------------------------------------ what the fit sees
    def marker_errors(self, x: np.ndarray) -> np.ndarray:
        """(K, 2) pixel error of each marker at the profiled bindings."""
        return self._errors(x, self.bindings(x))

    def residuals(self, x: np.ndarray) -> np.ndarray:
        return self._scaled(self.marker_errors(x)).ravel()

    def residual_tangents(self, x: np.ndarray, dx: np.ndarray) -> np.ndarray:
        """``(dr/dx) dx`` of the profiled residuals at positions ``x`` (see the module docstring)."""
        size = float(np.abs(dx).max())
        if size == 0.0 or not np.isfinite(size):
            return np.zeros(2 * self.marker_count)
        at = self.bindings(x)
        h = self.step / size
        sides = []
        for xs in (x + h * dx, x - h * dx):
            # re-profiled from the base point's bindings, which lie next to each side's
            sides.append(self._scaled(self._errors(xs, self.bindings(xs, start=at))))
        return ((sides[0] - sides[1]) / (2 * h)).ravel()

    def rmse(self, x: np.ndarray) -> float:
        """Weighted RMS pixel error over all markers."""
        return self._rms(self.marker_errors(x))

    def _rms(self, e: np.ndarray) -> float:
        return float(np.sqrt(np.sum(self.weight * np.sum(e**2, axis=1)) / np.sum(self.weight)))

    def errors(self, x: np.ndarray) -> dict[int, np.ndarray]:
        """Scene frame -> pixel error of each of its markers."""
        e = np.linalg.norm(self.marker_errors(x), axis=1)
        return {int(f): e[self.marker_frame == f] for f in sorted(set(self.marker_frame.tolist()))}

    def track_errors(self, x: np.ndarray) -> dict[str, float]:
        """Track name -> RMS pixel error of its markers, worst first."""
        e2 = np.sum(self.marker_errors(x) ** 2, axis=1)
        names = self.targets.track_names()
        tracks = set(self.marker_track.tolist())
        out = {names[k]: float(np.sqrt(np.mean(e2[self.marker_track == k]))) for k in tracks}
        return dict(sorted(out.items(), key=lambda item: -item[1]))

    def change(self, x0: np.ndarray, x1: np.ndarray) -> float:
        """RMS pixel distance between the projections of two rollouts (the same bindings): how
        far a change of the motion moves what the camera sees."""
        at = self.bindings(x0)
        d = self._project(self._points(x1, at)) - self._project(self._points(x0, at))
        return float(np.sqrt(np.nanmean(np.sum(d**2, axis=1))))

    def motion(self, rest: np.ndarray) -> float:
        """RMS pixel distance of the markers from the cloth left at rest, as bound: what there is
        to fit."""
        still = np.broadcast_to(rest, (int(self.frame_row.max()), *rest.shape))
        return self._rms(self._errors(still, (self.track_vertices, self.base_bary)))

    # ------------------------------------------------------------------ reports
    def drift(self, x: np.ndarray) -> np.ndarray:
        """(T,) how far each track's profiled binding lies from where it was bound, on the
        cloth at rest (metres; 0 without the rest positions)."""
        if self.rest is None:
            return np.zeros(len(self.base_bary))
        return binding_drift(self.rest[0], self.bindings(x), (self.track_vertices, self.base_bary))

    def track_warnings(self, x: np.ndarray, factor: float = 3.0) -> list[str]:
        """Warnings naming far-moved bindings, and tracks more than ``factor`` times the robust
        threshold off by their binding or by their markers (:mod:`.track_reports`)."""
        at = self.bindings(x)
        e = np.linalg.norm(self._errors(x, at), axis=1)
        far = np.zeros(len(self.base_bary), bool)
        far[self.marker_track[e > factor * self.huber]] = True
        # where the markers put each far track anywhere on the surface: at the vertex whose
        # motion follows them best, then free in the plane of a triangle there
        arrays = (self.frame_row, self.cameras, self.pixels, self.marker_track, self.targets.intrinsics)
        followed = followed_vertices(self._stacked(x), *arrays, np.flatnonzero(far))
        free = self._solve_bindings(x, self.domain.at_vertices(at, followed), far, bounded=False)
        free_e = np.linalg.norm(self._errors(x, free), axis=1)
        names, at_rest = self.targets.track_names(), self.frame_row == 0
        report = TrackReport(
            names, self.marker_track, at_rest, e, free_e, self.huber, self.drift(x), self.scene_size
        )
        return track_warnings(report, followed, factor)

    def camera_modes(self, x: np.ndarray, error_px: float) -> np.ndarray:
        """(4, 2K) residual changes of a camera off by ``error_px``: the image shifted along x
        and y, turned and scaled about the principal point by that much at its corners (to
        first order; the Huber scale and the profiled bindings held)."""
        intr = self.targets.intrinsics
        at = self.bindings(x)
        p = self._project(self._points(x, at)) - np.asarray(intr.principal_px)
        reach = 0.5 * float(np.hypot(intr.width, intr.height))
        scale = self._weights(self._errors(x, at))
        shifts = [
            np.broadcast_to([error_px, 0.0], p.shape),
            np.broadcast_to([0.0, error_px], p.shape),
            error_px / reach * np.stack([-p[:, 1], p[:, 0]], axis=1),
            error_px / reach * p,
        ]
        return np.stack([np.nan_to_num(scale[:, None] * shift).ravel() for shift in shifts])

    def residual_scale(self) -> np.ndarray:
        return np.repeat(1.0 / self.sqrt_w, 2)

    def track_bindings(self, x: np.ndarray) -> dict[str, dict[str, Any]]:
        """Track name -> its profiled binding: the triangle it ended in (its own or one across an
        edge), its barycentrics there, and how far it moved from where it was bound (metres)."""
        return binding_records(self.targets.track_names(), self.bindings(x), self.drift(x))

    @property
    def profiled_count(self) -> int:
        """Tracks whose binding is profiled: each takes two degrees of freedom off the residuals."""
        return int(self.profiled.sum())

    @property
    def refines_bindings(self) -> bool:
        """Whether any track's binding is profiled (see :mod:`warp_core.fit.footage`)."""
        return bool(self.profiled.any())

    @contextlib.contextmanager
    def bindings_held(self) -> Iterator[None]:
        """Every track held where it was bound within it; the profiled ones profiled again after."""
        profiled = self.profiled.copy()
        self.profiled[:] = False
        try:
            yield
        finally:
            self.profiled[:] = profiled

    def matched_points(self) -> int:
        """Every used marker."""
        return self.marker_count

    def coordinate_scale(self) -> float:
        """The image size in pixels."""
        intr = self.targets.intrinsics
        return float(max(intr.width, intr.height))

    def noise_rmse(self, fitted: int) -> float | None:
        """The reprojection RMSE the markers' own noise explains at the best values (sqrt(2) x
        their per-axis jitter, less the degrees of freedom the ``fitted`` parameters and the
        profiled bindings take), at the top of what the jitter's estimate allows (two standard
        errors); None when the tracks are too short to tell."""
        jitter = self.targets.jitter_px()
        if jitter is None:
            return None
        sigma, relative_error = jitter
        entries = 2 * self.marker_count
        free = entries - fitted - 2 * self.profiled_count
        return math.sqrt(2.0) * sigma * (1.0 + 2.0 * relative_error) * math.sqrt(max(free, 1) / entries)

    def systematic_modes(self, x: np.ndarray) -> np.ndarray | None:
        """The camera's error as residual modes (:meth:`camera_modes`), where the footage
        gives one (``FootageTargets.camera_error_px``)."""
        error = self.targets.camera_error_px
        return self.camera_modes(x, error) if error else None
