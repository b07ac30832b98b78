"""What a fit compares its rollouts against: one ``TargetKind`` per kind of target (vertex,
surface, footage), the units their misfits are in, and ``target_for``, which picks the kind.

This package is the only place that tells one kind of target, or one unit, from another: the
fit asks the target it holds (its unit and capabilities) instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .base import TargetKind
from .reprojection import Reprojection
from .surface import SurfaceTarget
from .units import METRES, PIXELS, Unit, unit_of
from .vertex import VertexTarget

if TYPE_CHECKING:
    from ..fit.problem.problem import FitProblem

__all__ = [
    "METRES",
    "PIXELS",
    "Reprojection",
    "SurfaceTarget",
    "TargetKind",
    "Unit",
    "VertexTarget",
    "target_for",
    "unit_of",
]


def _vertex(problem: FitProblem, sim: Any) -> TargetKind:
    targets = sorted(problem.targets, key=lambda t: t.frame)
    mesh = problem.mesh
    return VertexTarget(targets, problem.target_frames, mesh.vertices, mesh.vertex_count)


def _surface(problem: FitProblem, sim: Any) -> TargetKind:
    targets = sorted(problem.targets, key=lambda t: t.frame)
    return SurfaceTarget(targets, problem.target_frames, problem.mesh, sim)


def _footage(problem: FitProblem, sim: Any) -> TargetKind:
    mesh = problem.mesh
    extent = float(np.ptp(mesh.vertices, axis=0).max()) or 1.0
    rest = (problem.start_frame, mesh.vertices)
    return Reprojection(problem.tracks, problem.target_frames, extent, rest, triangles=mesh.triangles())


# by ``FitProblem.loss_kind``
_KINDS: dict[str, Callable[[FitProblem, Any], TargetKind]] = {
    "vertex": _vertex,
    "surface": _surface,
    "tracks": _footage,
}


def target_for(problem: FitProblem, sim: Any) -> TargetKind:
    """The target kind of a (validated) problem, comparing rollouts of ``sim``, the simulator
    the problem's model built (its precision and device)."""
    return _KINDS[problem.loss_kind](problem, sim)
