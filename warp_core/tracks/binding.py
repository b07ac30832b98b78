"""Where a tracked feature sits on the surface: the closest point to a 3D bundle, or where
the ray through a marker first meets the surface (pure numpy; binding runs once per fit)."""

from __future__ import annotations

import numpy as np

__all__ = ["closest_surface_point", "ray_surface_hit"]


def _barycentric(points: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """(T, 3) barycentric coordinates of ``points`` (T, 3) in triangles (a, b, c)."""
    v0, v1, v2 = b - a, c - a, points - a
    d00 = np.einsum("ij,ij->i", v0, v0)
    d01 = np.einsum("ij,ij->i", v0, v1)
    d11 = np.einsum("ij,ij->i", v1, v1)
    d20 = np.einsum("ij,ij->i", v2, v0)
    d21 = np.einsum("ij,ij->i", v2, v1)
    den = d00 * d11 - d01 * d01
    den = np.where(np.abs(den) > 0.0, den, np.inf)  # a degenerate triangle: never inside
    v = (d11 * d20 - d01 * d21) / den
    w = (d00 * d21 - d01 * d20) / den
    return np.stack([1.0 - v - w, v, w], axis=1)


def closest_surface_point(
    point: np.ndarray, vertices: np.ndarray, triangles: np.ndarray
) -> tuple[int, np.ndarray, float]:
    """(triangle index, barycentric (3,), distance) of the surface point closest to ``point``."""
    p = np.asarray(point, dtype=np.float64)
    a, b, c = (vertices[triangles[:, k]] for k in range(3))
    # inside the triangle: the projection onto its plane
    n = np.cross(b - a, c - a)
    nn = np.einsum("ij,ij->i", n, n)
    with np.errstate(divide="ignore", invalid="ignore"):
        onto = p - (np.einsum("ij,ij->i", p - a, n) / np.where(nn > 0, nn, np.inf))[:, None] * n
    bary = _barycentric(onto, a, b, c)
    inside = np.all(bary >= 0.0, axis=1)
    best_bary = np.where(inside[:, None], bary, np.nan)
    best_dist = np.where(inside, np.linalg.norm(onto - p, axis=1), np.inf)
    # else on one of the three edges
    corners = (a, b, c)
    for i, j in ((0, 1), (1, 2), (2, 0)):
        e = corners[j] - corners[i]
        ee = np.einsum("ij,ij->i", e, e)
        t = np.clip(np.einsum("ij,ij->i", p - corners[i], e) / np.where(ee > 0, ee, np.inf), 0.0, 1.0)
        q = corners[i] + t[:, None] * e
        dist = np.linalg.norm(q - p, axis=1)
        closer = dist < best_dist
        edge_bary = np.zeros((len(t), 3))
        edge_bary[:, i], edge_bary[:, j] = 1.0 - t, t
        best_bary = np.where(closer[:, None], edge_bary, best_bary)
        best_dist = np.where(closer, dist, best_dist)
    k = int(np.argmin(best_dist))
    return k, best_bary[k], float(best_dist[k])


def ray_surface_hit(
    origin: np.ndarray, direction: np.ndarray, vertices: np.ndarray, triangles: np.ndarray
) -> tuple[int, np.ndarray, float] | None:
    """(triangle index, barycentric (3,), distance along the ray) of the first hit, or None
    (Moller-Trumbore on every triangle)."""
    o = np.asarray(origin, dtype=np.float64)
    d = np.asarray(direction, dtype=np.float64)
    a, b, c = (vertices[triangles[:, k]] for k in range(3))
    e1, e2 = b - a, c - a
    h = np.cross(d, e2)
    det = np.einsum("ij,ij->i", e1, h)
    ok = np.abs(det) > 1e-14
    inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
    s = o - a
    u = inv * np.einsum("ij,ij->i", s, h)
    q = np.cross(s, e1)
    v = inv * (q @ d)
    t = inv * np.einsum("ij,ij->i", e2, q)
    hit = ok & (u >= 0.0) & (v >= 0.0) & (u + v <= 1.0) & (t > 0.0)
    if not hit.any():
        return None
    t = np.where(hit, t, np.inf)
    k = int(np.argmin(t))
    return k, np.array([1.0 - u[k] - v[k], u[k], v[k]]), float(t[k])
