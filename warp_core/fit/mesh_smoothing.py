"""A mesh's smoothing operator (I + alpha L)^-1, the free map's preconditioner.

The free map's gradient (``free_map``) has a rough part at the scale of single vertices: each
vertex's stiffness changes which of its springs sit in tension this substep, and the loss
jumps with them, so along the raw gradient the loss falls by a few per cent of what the
gradient predicts before those jumps swamp it. Smoothed over a few edges, the same gradient
is the trend the loss follows. Measured on a 32 x 32 sheet (60 frames, the start of the
per-vertex stage): along -g the best of 14 halving steps gained 9e-6 of a loss of 3.8e-3 in
float32 (2.6e-5 in float64); along -(I + 32 L)^-1 g, 3.9e-4 (5.5e-4), ten times more per step
(``alpha`` 2: 7.7e-5; 8: 2.5e-4). Used as L-BFGS's starting inverse Hessian
(``optimizers.box_lbfgs``), the curvature pairs it gathers still reach the finer scales.
Where the motion itself is rough at the step's scale it cannot help: on a 64 x 64 sheet over
60 frames (H200, float32) the loss moved by 1-4 % of itself at steps of 1e-3 in log stiffness
along the gradient smoothed with any ``alpha`` up to 5000.

``L`` is the graph Laplacian of the mesh's edges (unit weights, as the smoothness prior's);
the solve is conjugate gradients preconditioned by its diagonal, numpy only.
"""

from __future__ import annotations

import numpy as np

__all__ = ["RADIUS_FRACTION", "MeshSmoother", "laplacian_times"]

RADIUS_FRACTION = 1.0 / 6.0  # the smoothing radius, as a fraction of the vertices across the mesh
SOLVE_TOLERANCE = 1e-8  # of the CG's residual, relative to the right-hand side


def laplacian_times(edges: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``L u`` for the graph Laplacian of ``edges`` ((E, 2) vertex indices)."""
    i, j = edges[:, 0], edges[:, 1]
    diff = u[i] - u[j]
    n = len(u)
    return np.bincount(i, diff, minlength=n) - np.bincount(j, diff, minlength=n)


class MeshSmoother:
    """``v -> (I + alpha L)^-1 v`` on the first ``vertex_count`` entries of ``v`` (the identity
    on the rest: the free map's other unknowns); made by ``free_map`` and handed to
    ``minimize_box`` as its ``precondition``. ``alpha`` is the squared radius in edges: by
    default ``RADIUS_FRACTION`` of the vertices across (the square root of the count)."""

    def __init__(self, edges: np.ndarray, vertex_count: int, alpha: float | None = None) -> None:
        self.edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
        self.n = vertex_count
        if alpha is None:
            alpha = max(1.0, RADIUS_FRACTION * np.sqrt(vertex_count)) ** 2
        self.alpha = float(alpha)
        degree = np.bincount(self.edges.ravel(), minlength=vertex_count).astype(np.float64)
        self.inverse_diagonal = 1.0 / (1.0 + self.alpha * degree)

    def operator(self, u: np.ndarray) -> np.ndarray:
        """``(I + alpha L) u``."""
        return u + self.alpha * laplacian_times(self.edges, u)

    def __call__(self, v: np.ndarray) -> np.ndarray:
        out = np.array(v, dtype=np.float64)
        b = out[: self.n]
        norm_b = float(np.linalg.norm(b))
        if norm_b == 0.0:
            return out
        y = b * self.inverse_diagonal
        r = b - self.operator(y)
        z = r * self.inverse_diagonal
        p = z.copy()
        rz = float(r @ z)
        # (I + alpha L) is at most 1 + 2 alpha max-degree: a few dozen iterations at most
        for _ in range(10 * self.n):
            if np.linalg.norm(r) <= SOLVE_TOLERANCE * norm_b:
                break
            ap = self.operator(p)
            step = rz / float(p @ ap)
            y += step * p
            r -= step * ap
            z = r * self.inverse_diagonal
            rz_next = float(r @ z)
            p = z + (rz_next / rz) * p
            rz = rz_next
        out[: self.n] = y
        return out
