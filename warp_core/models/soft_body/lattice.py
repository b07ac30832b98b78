"""Embed a surface mesh in a tetrahedral lattice: the soft body's simulation mesh.

The surface is not tetrahedralized itself. It is embedded in a regular lattice of cubic
cells (edge ``h`` = the longest side of its bounding box / ``lattice_cells``), which spans
the bounding box exactly along its longest side, is centred on it across and is flush with
its lowest point, so a side that is a whole number of cells long has its faces on lattice
planes: a pinned face then pins only the nodes on it, and a body rests on the ground with
its lowest vertices. (A vertex on the lattice's outer faces belongs to the outer cell, with
weights >= 0.) The cells the mesh touches (a vertex, or a point sampled on a triangle at
most half a cell apart) and, for a closed mesh (every edge shared by an even number of
faces), the cells whose centre lies inside it (ray parity along the three axes, by
majority) are kept, each split into the six tetrahedra of the Kuhn (Freudenthal) split
along its main diagonal, mirrored along every axis where the cell's index is odd. Every
mesh vertex then follows the tetrahedron it lies in through its barycentric weights.

The mirrored split stays conforming (mirroring a cube along an axis keeps the diagonals
of its faces across that axis, and those along it agree between both neighbours, which
share the mirroring), and makes the lattice mirror-symmetric over every block of 2 x 2 x 2
cells. One diagonal for all cells biases VBD's Gauss-Seidel sweeps, which are not
converged within a step, along that diagonal: a cube resting on frictionless ground slid
along it at 0.9 m/s^2 (4 substeps of 10 iterations); mirrored, it stays put.

Why a lattice rather than a tetrahedral mesher: the extension is GPL-3.0-or-later and
ships for Windows x64, Linux x64 and macOS arm64. TetGen is AGPL-3.0, and pytetwild has
no macOS arm64 wheel; a lattice needs no dependency at all, and it works on open or
non-manifold meshes too (where a mesher refuses), since it never asks the surface to be
a clean boundary.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Lattice", "build_lattice", "tet_quality", "tet_volumes"]

# Cells along an axis: ceil(extent / h), forgiving rounding by this fraction of a cell, so
# a side that is a whole number of cells long is exactly that many (its faces then lie on
# lattice planes, and a vertex on the lattice's outer face belongs to the outer cell).
_ROUNDING = 1e-9
# A side shorter than this fraction of the longest one is flat.
_FLAT = 1e-9
# Ray offsets (in cells) for the inside test: irrational-looking so that no ray runs
# exactly through a mesh edge or vertex of a mesh built on round coordinates.
_RAY_JITTER = (0.5 + 1.37e-4, 0.5 + 2.71e-4)

# The six Kuhn tetrahedra of the unit cube: tet ``p`` walks from corner (0,0,0) to
# (1,1,1) adding the axes in the order PERMUTATIONS[p]; it holds the points whose local
# coordinates satisfy u[p0] >= u[p1] >= u[p2].
PERMUTATIONS: tuple[tuple[int, int, int], ...] = tuple(itertools.permutations(range(3)))


def _kuhn_corners() -> np.ndarray:
    """(6, 4, 3) int corner offsets of the six tets, each positively oriented."""
    tets = []
    for perm in PERMUTATIONS:
        corner = np.zeros(3, dtype=np.int64)
        path = [corner.copy()]
        for axis in perm:
            corner[axis] = 1
            path.append(corner.copy())
        tets.append(path)
    return np.array(tets)


_KUHN = _kuhn_corners()
# odd permutations walk the cube with negative orientation: swap their corners 1 and 2
_ORIENT_SWAP = np.array([np.linalg.det((t[1:] - t[0]).T.astype(float)) < 0.0 for t in _KUHN])


@dataclass(frozen=True)
class Lattice:
    """The tetrahedral lattice and where every mesh vertex sits in it.

    ``vertex_weights[i] @ nodes[tets[vertex_tet[i]]]`` is mesh vertex ``i`` at rest.
    """

    nodes: np.ndarray  # (M, 3) float64 rest positions
    tets: np.ndarray  # (T, 4) int32, positively oriented
    vertex_tet: np.ndarray  # (N,) int32
    vertex_weights: np.ndarray  # (N, 4) float64, barycentric, sum 1
    cell_size: float
    cell_count: int
    worst_quality: float  # min over tets of the mean-ratio quality (1 = regular)
    closed: bool  # the mesh was closed, so its interior cells were filled

    @property
    def vertex_nodes(self) -> np.ndarray:
        """(N, 4) int32 lattice nodes each mesh vertex is a combination of."""
        return self.tets[self.vertex_tet]

    def embed(self, node_positions: np.ndarray) -> np.ndarray:
        """Mesh vertex positions (N, 3) for lattice node positions (M, 3)."""
        return np.einsum("nk,nkc->nc", self.vertex_weights, np.asarray(node_positions)[self.vertex_nodes])


def tet_volumes(nodes: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Signed volumes (T,) of the tetrahedra."""
    p = np.asarray(nodes, dtype=np.float64)[tets]
    return np.linalg.det(np.stack([p[:, 1] - p[:, 0], p[:, 2] - p[:, 0], p[:, 3] - p[:, 0]], axis=2)) / 6.0


def tet_quality(nodes: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Mean-ratio quality (T,): 12 (3 |V|)^(2/3) / sum of squared edge lengths; 1 for a
    regular tetrahedron, 0 for a flat one."""
    p = np.asarray(nodes, dtype=np.float64)[tets]
    pairs = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))
    sq = sum(np.sum((p[:, a] - p[:, b]) ** 2, axis=1) for a, b in pairs)
    vol = np.abs(tet_volumes(nodes, tets))
    return 12.0 * np.cbrt(3.0 * vol) ** 2 / np.maximum(sq, 1e-300)


def _check_mesh(vertices: np.ndarray, triangles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bounding box (lo, hi), or ValueError for a mesh that cannot be a soft body."""
    if len(vertices) == 0 or len(triangles) == 0:
        raise ValueError("the mesh has no vertices or no faces: a soft body needs a surface mesh")
    if not np.isfinite(vertices).all():
        raise ValueError("the mesh has non-finite (NaN or infinite) vertex coordinates")
    if triangles.min() < 0 or triangles.max() >= len(vertices):
        raise ValueError("the mesh's faces refer to vertices it does not have")
    lo, hi = vertices.min(axis=0), vertices.max(axis=0)
    extent = hi - lo
    longest = float(extent.max())
    if not longest > 0.0 or not math.isfinite(longest):
        raise ValueError("the mesh has zero size: a soft body needs a volume")
    if extent.min() <= _FLAT * longest:
        axis = "xyz"[int(np.argmin(extent))]
        raise ValueError(
            f"the mesh is flat (no extent along {axis}): a soft body needs a volume; give the mesh a "
            "thickness (e.g. with a Solidify modifier)"
        )
    return lo, hi


def _is_closed(triangles: np.ndarray) -> bool:
    """Every edge is shared by an even number of faces (closed, manifold or not)."""
    edges = np.sort(triangles[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    return bool(np.all(counts % 2 == 0))


def _surface_samples(vertices: np.ndarray, triangles: np.ndarray, spacing: float) -> np.ndarray:
    """Points on every triangle no farther apart than ``spacing`` along its edges (the
    vertices included), so a big triangle marks every cell it runs through."""
    p = vertices[triangles]
    longest = np.max(np.linalg.norm(p - np.roll(p, 1, axis=1), axis=2), axis=1)
    steps = np.maximum(1, np.ceil(longest / spacing).astype(np.int64))
    out = [vertices]
    for s in np.unique(steps):
        if s == 1:
            continue  # only the corners: already the vertices
        i, j = np.array([(i, j) for i in range(s + 1) for j in range(s + 1 - i)]).T
        bary = np.stack([1.0 - (i + j) / s, i / s, j / s], axis=1)  # (K, 3)
        tri = p[steps == s]  # (t, 3, 3)
        out.append(np.einsum("kc,tcd->tkd", bary, tri).reshape(-1, 3))
    return np.concatenate(out)


def _inside_along(
    axis: int, centres: np.ndarray, grid: tuple, vertices: np.ndarray, triangles: np.ndarray
) -> np.ndarray:
    """Ray parity along +``axis`` for the cell centres (origin, h, shape): True inside."""
    origin, h, shape = grid
    a, b = [k for k in range(3) if k != axis]
    p = vertices[triangles]  # (T, 3, 3)
    # the ray of column (ia, ib) runs at these (a, b) coordinates
    ray_a = origin[a] + (np.arange(shape[a]) + _RAY_JITTER[0]) * h
    ray_b = origin[b] + (np.arange(shape[b]) + _RAY_JITTER[1]) * h
    lo = np.ceil((p[:, :, [a, b]].min(axis=1) - origin[[a, b]]) / h - np.array(_RAY_JITTER)).astype(np.int64)
    hi = np.floor((p[:, :, [a, b]].max(axis=1) - origin[[a, b]]) / h - np.array(_RAY_JITTER)).astype(np.int64)
    lo = np.maximum(lo, 0)
    hi = np.minimum(hi, np.array([shape[a], shape[b]]) - 1)
    na, nb = np.maximum(hi[:, 0] - lo[:, 0] + 1, 0), np.maximum(hi[:, 1] - lo[:, 1] + 1, 0)
    count = na * nb
    tri = np.repeat(np.arange(len(triangles)), count)
    if len(tri) == 0:
        return np.zeros(len(centres), dtype=bool)
    k = np.arange(len(tri)) - np.repeat(np.cumsum(count) - count, count)
    ia = lo[tri, 0] + k // nb[tri]
    ib = lo[tri, 1] + k % nb[tri]
    q = p[tri]
    x, y = ray_a[ia], ray_b[ib]
    # 2D barycentric coordinates of the ray in the triangle's projection
    d = (q[:, 1, a] - q[:, 0, a]) * (q[:, 2, b] - q[:, 0, b]) - (q[:, 2, a] - q[:, 0, a]) * (
        q[:, 1, b] - q[:, 0, b]
    )
    ok = np.abs(d) > 0.0
    d = np.where(ok, d, 1.0)
    l1 = ((x - q[:, 0, a]) * (q[:, 2, b] - q[:, 0, b]) - (q[:, 2, a] - q[:, 0, a]) * (y - q[:, 0, b])) / d
    l2 = ((q[:, 1, a] - q[:, 0, a]) * (y - q[:, 0, b]) - (x - q[:, 0, a]) * (q[:, 1, b] - q[:, 0, b])) / d
    hit = ok & (l1 >= 0.0) & (l2 >= 0.0) & (l1 + l2 <= 1.0)
    z = q[:, 0, axis] + l1 * (q[:, 1, axis] - q[:, 0, axis]) + l2 * (q[:, 2, axis] - q[:, 0, axis])
    column = (ia * shape[b] + ib)[hit]
    z = z[hit]
    # crossings above each centre: sort crossings and centres together by (column, height)
    cells = np.floor((centres - origin) / h).astype(np.int64)
    c_col = cells[:, a] * shape[b] + cells[:, b]
    per_column = np.bincount(column, minlength=int(shape[a] * shape[b]))
    column_start = np.cumsum(per_column) - per_column
    is_crossing = np.concatenate([np.ones(len(z), np.int64), np.zeros(len(centres), np.int64)])
    order = np.lexsort((np.concatenate([z, centres[:, axis]]), np.concatenate([column, c_col])))
    seen = np.empty_like(order)
    seen[order] = np.cumsum(is_crossing[order])  # crossings sorted up to each event
    below = seen[len(z) :] - column_start[c_col]
    return (per_column[c_col] - below) % 2 == 1


def _interior_cells(
    origin: np.ndarray, h: float, shape: np.ndarray, vertices: np.ndarray, triangles: np.ndarray
) -> np.ndarray:
    """Linear indices of the cells whose centre is inside the closed mesh (majority of
    three axis-aligned ray-parity votes, robust to a ray grazing an edge)."""
    idx = np.arange(int(np.prod(shape)))
    cells = np.stack(np.unravel_index(idx, tuple(shape)), axis=1)
    centres = origin + (cells + 0.5) * h
    grid = (origin, h, shape)
    votes = sum(_inside_along(axis, centres, grid, vertices, triangles).astype(int) for axis in range(3))
    return idx[votes >= 2]


def build_lattice(vertices: np.ndarray, triangles: np.ndarray, lattice_cells: int) -> Lattice:
    """The tetrahedral lattice of ``lattice_cells`` cells along the mesh's longest side, and
    the embedding of every vertex. ValueError for an empty, non-finite or flat mesh."""
    vertices = np.ascontiguousarray(vertices, dtype=np.float64).reshape(-1, 3)
    triangles = np.ascontiguousarray(triangles, dtype=np.int64).reshape(-1, 3)
    if int(lattice_cells) < 1:
        raise ValueError(f"lattice_cells must be an integer >= 1, got {lattice_cells!r}")
    lo, hi = _check_mesh(vertices, triangles)
    extent = hi - lo
    h = float(extent.max()) / int(lattice_cells)
    shape = np.maximum(1, np.ceil(extent / h - _ROUNDING).astype(np.int64))
    # centred across, but flush with the mesh's lowest point: a body resting on the
    # ground rests on lattice nodes level with its lowest vertices
    origin = 0.5 * (lo + hi) - 0.5 * shape * h
    origin[2] = lo[2]

    def cell_of(points: np.ndarray) -> np.ndarray:
        c = np.clip(np.floor((points - origin) / h).astype(np.int64), 0, shape - 1)
        return np.ravel_multi_index(tuple(c.T), tuple(shape))

    vertex_cell = cell_of(vertices)
    marked = [vertex_cell, cell_of(_surface_samples(vertices, triangles, 0.5 * h))]
    closed = _is_closed(triangles)
    if closed:
        marked.append(_interior_cells(origin, h, shape, vertices, triangles))
    kept = np.unique(np.concatenate(marked))  # sorted: the cell order is deterministic

    cells = np.stack(np.unravel_index(kept, tuple(shape)), axis=1)  # (C, 3)
    mirror = cells % 2 == 1  # (C, 3)
    local = np.where(mirror[:, None, None, :], 1 - _KUHN[None], _KUHN[None])  # (C, 6, 4, 3)
    swap = _ORIENT_SWAP[None, :] ^ (mirror.sum(axis=1) % 2 == 1)[:, None]  # (C, 6)
    local[swap, 1], local[swap, 2] = local[swap, 2].copy(), local[swap, 1].copy()
    corners = cells[:, None, None, :] + local
    keys = np.ravel_multi_index(tuple(corners.reshape(-1, 3).T), tuple(shape + 1))
    used, tet_nodes = np.unique(keys, return_inverse=True)
    node_ijk = np.stack(np.unravel_index(used, tuple(shape + 1)), axis=1)
    nodes = origin + node_ijk * h
    tets = tet_nodes.reshape(-1, 4).astype(np.int32)

    # the vertex's Kuhn tet: sort its (mirrored) local coordinates, largest first
    rank = np.searchsorted(kept, vertex_cell)
    u = np.clip((vertices - origin) / h - cells[rank], 0.0, 1.0)
    u = np.where(mirror[rank], 1.0 - u, u)
    order = np.argsort(-u, axis=1, kind="stable")
    perm_index = {p: k for k, p in enumerate(PERMUTATIONS)}
    which = np.array([perm_index[tuple(o)] for o in order], dtype=np.int64)
    us = np.take_along_axis(u, order, axis=1)
    w = np.stack([1.0 - us[:, 0], us[:, 0] - us[:, 1], us[:, 1] - us[:, 2], us[:, 2]], axis=1)
    vswap = swap[rank, which]
    w[vswap, 1], w[vswap, 2] = w[vswap, 2].copy(), w[vswap, 1].copy()
    vertex_tet = (rank * 6 + which).astype(np.int32)
    # exact at rest up to rounding: weights of the node positions, not of the lattice ideal
    quality = tet_quality(nodes, tets)
    return Lattice(
        nodes=nodes,
        tets=tets,
        vertex_tet=vertex_tet,
        vertex_weights=w,
        cell_size=h,
        cell_count=len(kept),
        worst_quality=float(quality.min()),
        closed=closed,
    )
