"""What a footage fit's result says about single tracks: bindings that moved far, tracks whose
error their binding explains, and markers that are far off otherwise (mistracked).

A track far off can have two causes, and the artist's remedy differs:

* **its binding**: the track's markers agree with one another, but not with where it is
  bound: its markers at the start frame (where the cloth is at rest and no material value
  plays a part) are far off, or bound elsewhere on the surface (near the vertex whose motion
  follows its markers best, :func:`followed_vertices`) the track would come within the robust
  threshold. Bind it again (that vertex is named); muting its markers would throw good
  footage away.
* **its markers**: a few markers jumped (to another feature, a reflection): no one binding
  explains them. Mute them in the clip.

A binding that the refinement moved more than ``DRIFT_SHARE`` of the cloth's size from where
it was bound is named too: its start-frame marker put it elsewhere than the other markers do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..tracks.camera import Intrinsics, project

__all__ = [
    "DRIFT_SHARE",
    "TrackReport",
    "binding_drift",
    "binding_records",
    "followed_vertices",
    "track_warnings",
]

# a binding moved more than this share of the cloth's size from where it was bound is named
DRIFT_SHARE = 0.03
# tracks named per warning
_LISTED = 6


@dataclass
class TrackReport:
    """Per-marker errors of a fit's result and per-track binding moves, for the warnings."""

    names: list[str]  # track names, by track index
    marker_track: np.ndarray  # (K,) track of each marker
    at_rest: np.ndarray  # (K,) whether the marker is at the start frame (the cloth at rest)
    errors: np.ndarray  # (K,) pixel error of each marker at the fitted bindings
    free_errors: np.ndarray  # (K,) the same with each far track bound where its markers say
    huber_px: float  # the robust threshold
    drift_m: np.ndarray  # (T,) how far each binding moved from where it was bound
    scene_size: float  # the cloth's size (metres)


def binding_drift(
    rest: np.ndarray, now: tuple[np.ndarray, np.ndarray], bound: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """(T,) the distance on the surface at rest (N, 3) between each binding ``now`` and as
    ``bound`` (each (vertices (T, 3), barycentrics (T, 3)))."""
    here, there = (np.einsum("tj,tjd->td", bary, rest[vertices]) for vertices, bary in (now, bound))
    return np.linalg.norm(here - there, axis=1)


def binding_records(
    names: list[str], bindings: tuple[np.ndarray, np.ndarray], drift: np.ndarray
) -> dict[str, dict[str, Any]]:
    """Track name -> its binding as a result reports it: "triangle", "barycentric", "drift_m"."""
    vertices, bary = bindings
    return {
        n: {
            "triangle": [int(v) for v in vertices[k]],
            "barycentric": [float(v) for v in bary[k]],
            "drift_m": float(drift[k]),
        }
        for k, n in enumerate(names)
    }


def followed_vertices(
    positions: np.ndarray,
    frame_row: np.ndarray,
    cameras: np.ndarray,
    pixels: np.ndarray,
    marker_track: np.ndarray,
    intrinsics: Intrinsics,
    tracks: np.ndarray,
) -> dict[int, int]:
    """Track -> the vertex whose projected motion is nearest its markers (RMS), for each of
    ``tracks``: ``positions`` (rows, N, 3) the surface at each marker's row ``frame_row``,
    ``cameras`` (K, 4, 4), ``pixels`` (K, 2) and ``marker_track`` (K,) per marker."""
    out = {}
    for k in tracks.tolist():
        mine = np.flatnonzero(marker_track == k)
        points = positions[frame_row[mine]]  # (M, N, 3)
        m, n = points.shape[:2]
        uv = project(points.reshape(-1, 3), np.repeat(cameras[mine], n, axis=0), intrinsics)
        squared = np.sum((uv.reshape(m, n, 2) - pixels[mine][:, None]) ** 2, axis=2)
        out[int(k)] = int(np.argmin(np.where(np.isfinite(squared), squared, np.inf).mean(axis=0)))
    return out


def _listed(items: list[str]) -> str:
    more = f" and {len(items) - _LISTED} more" if len(items) > _LISTED else ""
    return ", ".join(items[:_LISTED]) + more


def _rms(values: np.ndarray) -> float:
    return float(np.sqrt(np.mean(values**2))) if len(values) else 0.0


def binding_problems(report: TrackReport, followed: dict[int, int], limit: float) -> dict[int, str]:
    """Track index -> why its binding, not its markers, explains its error, for each track with
    a marker more than ``limit`` pixels off that its binding explains (``followed``: track ->
    the vertex whose motion follows its markers best)."""
    out = {}
    for k in sorted(set(report.marker_track[report.errors > limit].tolist())):
        mine = report.marker_track == k
        at_rest = report.errors[mine & report.at_rest]
        free = _rms(report.free_errors[mine])
        if at_rest.size and at_rest.max() > limit:
            out[k] = f"{at_rest.max():.1f} px off at the start frame, where the cloth is at rest"
        elif free <= report.huber_px:
            out[k] = f"{_rms(report.errors[mine]):.1f} px RMS as bound, {free:.1f} px bound elsewhere"
        else:
            continue
        out[k] += f"; its markers follow vertex {followed[k]}" if k in followed else ""
    return out


def track_warnings(report: TrackReport, followed: dict[int, int], factor: float = 3.0) -> list[str]:
    """The warnings of the module docstring, for markers more than ``factor`` times the robust
    threshold off (``followed``: see :func:`binding_problems`)."""
    limit = factor * report.huber_px
    warnings = []
    bindings = binding_problems(report, followed, limit)
    if bindings:
        named = _listed([f"'{report.names[k]}' ({why})" for k, why in bindings.items()])
        warnings.append(
            f"tracks off because of their bindings, not their markers: {named}: each track's markers "
            "agree with one another but not with where it is bound on the cloth; bind it again (to the "
            "vertex named, or as Bind Tracks finds it) rather than muting its markers"
        )
    far = (report.errors > limit) & ~np.isin(report.marker_track, list(bindings))
    if far.any():
        tracks = _listed([f"'{t}'" for t in sorted({report.names[k] for k in report.marker_track[far]})])
        warnings.append(
            f"{int(far.sum())} of {len(report.errors)} markers are more than {limit:g} px off "
            f"({tracks}): the fit pulls on them only linearly past "
            f"{report.huber_px:g} px, but they raise the RMSE; if they are mistracked, mute them in the clip"
        )
    reach = DRIFT_SHARE * report.scene_size
    moved = np.flatnonzero(report.drift_m > reach)
    if moved.size:
        named = _listed([f"'{report.names[k]}' ({100.0 * report.drift_m[k]:.1f} cm)" for k in moved])
        warnings.append(
            f"bindings moved more than {100.0 * DRIFT_SHARE:g} % of the cloth's size "
            f"({100.0 * reach:.1f} cm) from where they were bound: {named}: the markers put each track "
            "elsewhere than it was bound; check its binding and its marker at the start frame (which a "
            "ray binding comes from), or bind it to the vertex it follows"
        )
    return warnings
