"""How the kinematic parts move, frame by frame (numpy): the pinned lattice nodes, which
follow the pinned mesh vertices' goals through one fitted map per frame, and the colliders,
moved rigidly by their objects' world matrices."""

from __future__ import annotations

import numpy as np

__all__ = ["collider_poses", "fit_pin_map", "pinned_node_goals", "rigid_part"]

# The pinned vertices' rest positions span 3D (an affine map is determined) when the
# smallest singular value of their centred positions exceeds this fraction of the largest.
_SPAN_TOL = 1e-6
# A moving collider's frame-to-frame transform must be rigid to this tolerance.
_RIGID_TOL = 1e-4


def _rank(centred: np.ndarray) -> int:
    s = np.linalg.svd(centred, compute_uv=False) if len(centred) else np.zeros(0)
    if len(s) == 0 or s[0] <= 0.0:
        return 0
    return int(np.sum(s > _SPAN_TOL * s[0]))


def fit_pin_map(rest: np.ndarray, goal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(A, t) with ``goal ~ rest @ A.T + t`` in the least-squares sense: affine where the
    rest points span 3D, else the best rigid motion (Kabsch; a translation for one point)."""
    rest = np.asarray(rest, dtype=np.float64)
    goal = np.asarray(goal, dtype=np.float64)
    c_rest, c_goal = rest.mean(axis=0), goal.mean(axis=0)
    x, y = rest - c_rest, goal - c_goal
    rank = _rank(x)
    if rank == 3:
        a = np.linalg.lstsq(x, y, rcond=None)[0].T
    elif rank == 0:
        a = np.eye(3)
    else:
        u, _, vt = np.linalg.svd(y.T @ x)
        d = np.sign(np.linalg.det(u @ vt)) or 1.0
        a = u @ np.diag([1.0, 1.0, d]) @ vt
    return a, c_goal - a @ c_rest


def pinned_node_goals(
    pinned_rest: np.ndarray, node_rest: np.ndarray, goals: np.ndarray | None, n_frames: int
) -> np.ndarray:
    """(n_frames + 1, P, 3) positions of the pinned nodes (rest ``node_rest``): each frame's
    map from the pinned vertices' rest positions to their goals, applied to the nodes.
    ``goals`` (frames, pinned vertices, 3), None: at rest."""
    if goals is None:
        return np.repeat(node_rest[None], n_frames + 1, axis=0)
    out = np.empty((n_frames + 1, len(node_rest), 3))
    for f in range(n_frames + 1):
        a, t = fit_pin_map(pinned_rest, goals[f])
        out[f] = node_rest @ a.T + t
    return out


def rigid_part(matrix: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(R, t) of a 4x4 transform that moves rigidly; ValueError if it scales or shears."""
    r, t = matrix[:3, :3], matrix[:3, 3]
    if not np.allclose(r.T @ r, np.eye(3), atol=_RIGID_TOL) or np.linalg.det(r) <= 0.0:
        raise ValueError(
            f"collider {name!r} changes scale or shape while it moves: a moving collider must move "
            "rigidly (apply its scale, or keep it still)"
        )
    u, _, vt = np.linalg.svd(r)
    return u @ vt, t


def _quaternion(r: np.ndarray) -> np.ndarray:
    """Unit quaternion (x, y, z, w), Warp's order, of a rotation matrix."""
    m = r
    tr = np.trace(m)
    if tr > 0.0:
        s = 2.0 * np.sqrt(tr + 1.0)
        q = [(m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, 0.25 * s]
    else:
        i = int(np.argmax(np.diag(m)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + m[i, i] - m[j, j] - m[k, k])
        q = [0.0, 0.0, 0.0, (m[k, j] - m[j, k]) / s]
        q[i] = 0.25 * s
        q[j] = (m[j, i] + m[i, j]) / s
        q[k] = (m[k, i] + m[i, k]) / s
    q = np.asarray(q)
    return q / np.linalg.norm(q)


def collider_poses(
    matrices: np.ndarray, name: str, n_frames: int, origin: np.ndarray | None = None
) -> np.ndarray:
    """(n_frames + 1, 7) body poses (px, py, pz, qx, qy, qz, qw) of a collider whose shape
    is its frame-0 world geometry: pose k = M_k M_0^-1 (the last matrix held after its end),
    each quaternion on the side of its predecessor so interpolation takes the short way.
    With ``origin``, the poses act on positions relative to it (translation t + R o - o)."""
    o = np.zeros(3) if origin is None else np.asarray(origin, dtype=np.float64)
    m0_inv = np.linalg.inv(matrices[0])
    out = np.empty((n_frames + 1, 7))
    previous = None
    for f in range(n_frames + 1):
        m = matrices[min(f, len(matrices) - 1)] @ m0_inv
        r, t = rigid_part(m, name)
        q = _quaternion(r)
        if previous is not None and np.dot(q, previous) < 0.0:
            q = -q
        out[f, :3], out[f, 3:] = t + r @ o - o, q
        previous = q
    return out


def checked_goals(goals: np.ndarray, n_frames: int, vertex_count: int) -> np.ndarray:
    """``goals`` as float64 (frames, vertices, 3), or ValueError saying what is wrong."""
    goals = np.asarray(goals, dtype=np.float64)
    if goals.ndim != 3 or goals.shape[1:] != (vertex_count, 3) or len(goals) < n_frames + 1:
        need = f"(>= {n_frames + 1}, {vertex_count}, 3)"
        raise ValueError(f"pin goals must have shape {need}, got {goals.shape}")
    if not np.isfinite(goals).all():
        raise ValueError("pin goal positions contain NaN or infinite values")
    return goals
