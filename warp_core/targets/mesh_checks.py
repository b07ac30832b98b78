"""What each kind of mesh target refuses before a fit starts, by the problem's loss kind."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .surface import SurfaceTarget
from .vertex import VertexTarget

__all__ = ["check_mesh_target"]

MeshTargetCheck = Callable[[int, np.ndarray, "np.ndarray | None", int], None]

# by ``FitProblem.loss_kind``; footage has no mesh targets to check
_CHECKS: dict[str, MeshTargetCheck] = {
    "vertex": VertexTarget.check_target,
    "surface": SurfaceTarget.check_target,
}


def check_mesh_target(
    loss_kind: str, frame: int, positions: np.ndarray, triangles: np.ndarray | None, vertex_count: int
) -> None:
    """Refuse (ValueError, naming the frame) a mesh target the loss kind cannot compare."""
    check = _CHECKS.get(loss_kind)
    if check is not None:
        check(frame, positions, triangles, vertex_count)
