"""Footage targets: 2D markers of tracked features, the camera that filmed them, and where
each tracked feature sits on the simulated surface.

Everything is plain data read from Blender on the main thread (``addon/scene/footage.py``):
the camera's world matrix at every frame that has a marker, the clip's intrinsics, and per
marker its scene frame, pixel position (bottom-left origin, as Blender stores
``marker.co * clip.size``) and weight. A track is bound to the surface by barycentric
coordinates in one triangle of the mesh, so it follows the cloth as it moves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .camera import Intrinsics

__all__ = ["HUBER_PX", "FootageTargets", "TrackBinding"]

# The marker noise is read from each track's fourth differences over five consecutive frames:
# white noise of variance s^2 gives them variance 70 s^2, while a smooth motion sampled at a
# film's frame rate barely has any. Their mean square, leaving out squares above 25 times the
# median (a marker that jumped), is 0.9901 of the full one for Gaussian noise (a chi-square's
# mass below 25 x its median 0.4549, times its mean, is a chi-square with 3 degrees of
# freedom below that: 0.9901).
_D4_VARIANCE = 70.0
_CHI2_MEDIAN = 0.4549
_CUT = 25.0
_KEPT_MEAN = 0.9901
_JITTER_SAMPLES = 20

# Markers of a good track scatter by a fraction of a pixel; a marker that jumped to another
# feature is off by many. Beyond this many pixels a marker's pull grows linearly, not
# quadratically, so a few bad markers cannot drag the fit (Huber's loss).
HUBER_PX = 2.0


@dataclass(frozen=True)
class TrackBinding:
    """A tracked feature on the surface: barycentric coordinates in a triangle of the mesh."""

    track: str
    vertices: tuple[int, int, int]
    barycentric: tuple[float, float, float]


@dataclass
class FootageTargets:
    """Markers to match, the camera and the bindings (see the module docstring)."""

    intrinsics: Intrinsics
    bindings: list[TrackBinding]
    cameras: dict[int, np.ndarray]  # scene frame -> camera matrix_world (4, 4)
    marker_frame: np.ndarray  # (K,) scene frames (at the start frame: the cloth at rest)
    marker_track: np.ndarray  # (K,) index into ``bindings``
    marker_pixel: np.ndarray  # (K, 2) pixels, bottom-left origin
    marker_weight: np.ndarray  # (K,) >= 0 (a track's weight; 0 leaves the marker out)
    huber_px: float = HUBER_PX
    clip: str = ""  # names for messages and reports
    camera: str = ""
    # a camera from a solve: its error in pixels (the solve's average reprojection error),
    # which moves every marker of a frame together and so does not average out over tracks
    camera_error_px: float | None = None

    @property
    def frames(self) -> list[int]:
        """Scene frames with at least one weighted marker, in order."""
        used = np.asarray(self.marker_weight) > 0.0
        return sorted({int(f) for f in np.asarray(self.marker_frame)[used]})

    def track_names(self) -> list[str]:
        return [b.track for b in self.bindings]

    def jitter_px(self) -> tuple[float, float] | None:
        """The markers' noise per axis, in pixels, from the tracks themselves (see above), and
        its relative standard error; None with fewer than 20 runs of five consecutive
        weighted markers."""
        frame = np.asarray(self.marker_frame)
        pixel = np.asarray(self.marker_pixel, dtype=np.float64)
        used = np.asarray(self.marker_weight) > 0.0
        track = np.asarray(self.marker_track)
        differences = []
        for k in range(len(self.bindings)):
            sel = np.flatnonzero(used & (track == k))
            order = sel[np.argsort(frame[sel])]
            f, p = frame[order], pixel[order]
            if len(f) < 5:
                continue
            run = f[4:] - f[:-4] == 4  # five consecutive frames
            d4 = p[:-4] - 4 * p[1:-3] + 6 * p[2:-2] - 4 * p[3:-1] + p[4:]
            differences.append(d4[run])
        d4 = np.concatenate(differences) if differences else np.zeros((0, 2))
        if len(d4) < _JITTER_SAMPLES:
            return None
        squares = (d4**2).ravel()
        kept = squares[squares <= _CUT * np.median(squares)]
        sigma = float(np.sqrt(kept.mean() / (_D4_VARIANCE * _KEPT_MEAN)))
        # runs overlap (neighbouring differences share frames): count the disjoint ones
        return sigma, float(1.0 / np.sqrt(2.0 * max(len(squares) / 5.0, 1.0)))

    def validate(self, vertex_count: int, start_frame: int) -> None:
        """Raise ValueError naming what is wrong."""
        k = len(self.marker_frame)
        shapes = {
            "marker_track": (np.shape(self.marker_track), (k,)),
            "marker_pixel": (np.shape(self.marker_pixel), (k, 2)),
            "marker_weight": (np.shape(self.marker_weight), (k,)),
        }
        for name, (got, want) in shapes.items():
            if got != want:
                raise ValueError(f"footage targets: {name} has shape {got}, expected {want}")
        if not self.bindings:
            raise ValueError("footage targets: no track is bound to the surface")
        weight = np.asarray(self.marker_weight, dtype=np.float64)
        if k == 0 or not np.all(np.isfinite(weight)) or np.any(weight < 0) or weight.sum() <= 0:
            raise ValueError("footage targets: no markers with a weight above 0")
        if not np.all(np.isfinite(self.marker_pixel)):
            raise ValueError("footage targets: marker positions must be finite")
        track = np.asarray(self.marker_track)
        if track.min() < 0 or track.max() >= len(self.bindings):
            raise ValueError("footage targets: a marker refers to an unbound track")
        for b in self.bindings:
            if min(b.vertices) < 0 or max(b.vertices) >= vertex_count:
                raise ValueError(f"track {b.track!r} is bound to vertices outside the mesh")
            bary = np.asarray(b.barycentric, dtype=np.float64)
            if not np.all(np.isfinite(bary)) or abs(bary.sum() - 1.0) > 1e-6:
                raise ValueError(f"track {b.track!r}: barycentric coordinates must sum to 1")
        early = sorted({int(f) for f in self.marker_frame if f < start_frame})
        if early:
            raise ValueError(
                f"footage targets: markers at frame(s) {early[:5]} are before the simulation start "
                f"frame {start_frame}"
            )
        if not any(f > start_frame for f in self.frames):
            raise ValueError(f"footage targets: no markers after the simulation start frame {start_frame}")
        missing = [f for f in self.frames if f not in self.cameras]
        if missing:
            raise ValueError(f"footage targets: no camera matrix at frame(s) {missing[:5]}")
        for f in self.frames:
            m = np.asarray(self.cameras[f], dtype=np.float64)
            if m.shape != (4, 4) or not np.all(np.isfinite(m)):
                raise ValueError(f"footage targets: the camera matrix at frame {f} must be a finite 4x4")
        if not self.huber_px > 0.0:
            raise ValueError(f"footage targets: the robust threshold must be > 0 px, got {self.huber_px}")
