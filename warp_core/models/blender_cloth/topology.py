"""What Blender's cloth modifier builds from a mesh: springs and bending hinges (numpy only).

Spring order follows Blender's (polygon diagonals of the last polygon first, then
structural edges, last edge first); it only matters for bit-exact summation order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...mesh import VERTEX_GROUP_FIELDS, ClothMesh
from .corners import check_corners

SPRING_STRUCTURAL = 0
SPRING_SHEAR = 1
SPRING_BENDING_LINEAR = 2
SPRING_SEWING = 3  # a loose edge with sewing on: rest length 0, tension only, capped force

# Blender: a vertex whose pin weight w has w^4 >= SOFTGOALSNAP is moved with the mesh.
SOFTGOALSNAP = 0.999


@dataclass
class Topology:
    spring_vertices: np.ndarray  # (S, 2) int32
    spring_kind: np.ndarray  # (S,) int32, SPRING_*
    hinge_vertices: np.ndarray  # (H, 2) int32, hinge axis (i, j), i < j for mesh edges
    hinge_spring: np.ndarray  # (H,) int32, the spring whose rest length scales the hinge
    hinge_face_a: np.ndarray  # (H, 2) int32, (start, count) into hinge_face_vertices
    hinge_face_b: np.ndarray  # (H, 2) int32
    hinge_face_vertices: np.ndarray  # flat int32
    pinned: np.ndarray  # (N,) int32, 1 for hard pins
    goal_weight: np.ndarray  # (N,) float64, w^4 for soft goal springs, 0 elsewhere
    # Blender's lin_stiffness / ang_stiffness: the mean stiffness-group weight of the two
    # vertices, weighting the span from the stiffness to its maximum
    spring_lin_stiffness: np.ndarray  # (S,) float64
    hinge_ang_stiffness: np.ndarray  # (H,) float64
    # cloth_shrink_factor of each spring: its rest length is the rest distance times this
    spring_shrink: np.ndarray  # (S,) float64

    @property
    def structural_mask(self) -> np.ndarray:
        return self.spring_kind == SPRING_STRUCTURAL


def _first(indices: np.ndarray, limit: int = 5) -> str:
    return ", ".join(str(int(i)) for i in np.asarray(indices).ravel()[:limit])


def validate_mesh(mesh: ClothMesh) -> None:
    """Raise ValueError naming what is wrong and the first offending indices."""
    x = mesh.vertices
    n = len(x)
    if n == 0:
        raise ValueError("mesh has no vertices")
    bad = np.flatnonzero(~np.isfinite(x).all(axis=1))
    if len(bad):
        raise ValueError(f"vertex coordinates are NaN or infinite at vertices {_first(bad)}")
    if mesh.polygon_count == 0:
        raise ValueError("mesh has no faces: cloth needs polygons")
    if mesh.polygon_offsets[0] != 0 or np.any(np.diff(mesh.polygon_offsets) < 3):
        bad = np.flatnonzero(np.diff(mesh.polygon_offsets) < 3)
        raise ValueError(f"polygons with fewer than 3 corners: {_first(bad)}")
    pv = mesh.polygon_vertices
    if pv.min() < 0 or pv.max() >= n:
        bad = np.flatnonzero((pv < 0) | (pv >= n))
        raise ValueError(f"polygon corner indices out of range [0, {n}) at corners {_first(bad)}")
    e = mesh.edges
    if len(e) and (e.min() < 0 or e.max() >= n):
        bad = np.flatnonzero(((e < 0) | (e >= n)).any(axis=1))
        raise ValueError(f"edge vertex indices out of range [0, {n}) at edges {_first(bad)}")
    w = mesh.pin_weights
    if len(w) != n or not np.isfinite(w).all() or w.min() < 0 or w.max() > 1:
        raise ValueError("pin weights must be one finite value in [0, 1] per vertex")
    for name in VERTEX_GROUP_FIELDS:
        g = getattr(mesh, name)
        if g is not None and (len(g) != n or not np.isfinite(g).all() or g.min() < 0 or g.max() > 1):
            raise ValueError(f"{name} must be one finite value in [0, 1] per vertex")

    extent = float(np.ptp(x, axis=0).max())
    scale = extent if extent > 0 else 1.0
    # duplicate vertices: identical positions up to 1e-9 of the mesh size
    key = np.round(x / (scale * 1e-9)).astype(np.int64)
    _, first_idx, inverse, counts = np.unique(
        key, axis=0, return_index=True, return_inverse=True, return_counts=True
    )
    dup = np.flatnonzero(counts[inverse.ravel()] > 1)
    if len(dup):
        raise ValueError(f"duplicate vertices (same position): {_first(dup)}; merge them (Merge by Distance)")

    used = np.zeros(n, dtype=bool)
    used[pv] = True
    if len(e):
        used[e.ravel()] = True
    loose = np.flatnonzero(~used)
    if len(loose):
        raise ValueError(f"loose vertices (in no edge or face): {_first(loose)}; delete them")

    # zero-area polygons: area of the polygon (Newell normal) against the mesh size
    o = mesh.polygon_offsets
    for p in range(mesh.polygon_count):
        corners = x[pv[o[p] : o[p + 1]]]
        area = 0.5 * np.linalg.norm(np.cross(corners, np.roll(corners, -1, axis=0)).sum(axis=0))
        if area <= 1e-12 * scale * scale:
            raise ValueError(
                f"zero-area polygon {p} (vertices {_first(pv[o[p] : o[p + 1]], 8)}); dissolve or fix it"
            )
        if len(set(pv[o[p] : o[p + 1]].tolist())) != o[p + 1] - o[p]:
            raise ValueError(f"polygon {p} uses a vertex twice")

    edge_faces: dict[tuple[int, int], int] = {}
    for p in range(mesh.polygon_count):
        c = pv[o[p] : o[p + 1]]
        for a, b in zip(c, np.roll(c, -1), strict=True):
            k = (int(min(a, b)), int(max(a, b)))
            edge_faces[k] = edge_faces.get(k, 0) + 1
    nonmanifold = [k for k, cnt in edge_faces.items() if cnt > 2]
    if nonmanifold:
        raise ValueError(f"edges shared by three or more faces (non-manifold): {nonmanifold[:5]}; split them")

    first: dict[tuple[int, ...], int] = {}
    for p, corners in enumerate(mesh.polygons()):
        key = tuple(sorted(int(v) for v in corners))
        if key in first:
            raise ValueError(
                f"faces {first[key]} and {p} use the same vertices (duplicate faces); delete one of them"
            )
        first[key] = p

    check_corners(mesh)


def build_topology(
    mesh: ClothMesh,
    bending_model: str = "ANGULAR",
    shrink_min: float = 0.0,
    shrink_max: float = 0.0,
    sewing: bool = False,
) -> Topology:
    """Springs and hinges as Blender's ``cloth_build_springs`` makes them. With ``sewing``
    every edge in no polygon becomes a sewing spring (rest length 0, the tension stiffness
    without its maximum, not shrunk, not part of the mean structural length)."""
    validate_mesh(mesh)
    angular = bending_model == "ANGULAR"
    polygons = mesh.polygons()

    # structural springs: one per mesh edge; hinge faces found in polygon order
    edge_index = {(int(min(a, b)), int(max(a, b))): k for k, (a, b) in enumerate(mesh.edges)}
    edge_polys: dict[int, list[int]] = {}
    for p, c in enumerate(polygons):
        for a, b in zip(c, np.roll(c, -1), strict=True):
            k = (int(min(a, b)), int(max(a, b)))
            if k not in edge_index:  # polygon edge missing from the edge list
                edge_index[k] = len(edge_index)
            edge_polys.setdefault(edge_index[k], []).append(p)
    edges = sorted(edge_index.items(), key=lambda kv: kv[1])

    springs: list[tuple[int, int, int]] = []
    hinges: list[tuple[int, int, int, list[int], list[int]]] = []  # i, j, spring, face a, face b

    # polygon diagonals: shear spring + (angular) hinge, built after the structural
    # springs and prepended, so they come first, last polygon first
    diagonal_block: list[tuple[tuple[int, int, int], tuple | None]] = []
    for c in polygons:
        n = len(c)
        if n <= 3:
            continue
        poly_block = []
        for j in range(1, n - 1):
            pairs = ([(0, j)] if j > 1 else []) + [(j, k) for k in range(j + 2, n)]
            for cj, ck in pairs:
                vi, vj = int(c[cj]), int(c[ck])
                face_a = [int(v) for v in c[cj : ck + 1]]
                face_b = [int(v) for v in np.concatenate([c[ck:], c[: cj + 1]])]
                poly_block.append(((vi, vj), (face_a, face_b)))
        diagonal_block.append(poly_block)

    for block in reversed(diagonal_block):
        for (vi, vj), (fa, fb) in reversed(block):
            s = len(springs)
            springs.append((min(vi, vj), max(vi, vj), SPRING_SHEAR))
            if angular:
                hinges.append((vi, vj, s, fa, fb))

    for (a, b), k in reversed(edges):
        s = len(springs)
        polys = edge_polys.get(k, [])
        springs.append((a, b, SPRING_SEWING if sewing and not polys else SPRING_STRUCTURAL))
        if angular and len(polys) == 2:
            hinges.append(
                (a, b, s, [int(v) for v in polygons[polys[0]]], [int(v) for v in polygons[polys[1]]])
            )

    if not angular:
        if any(kind == SPRING_SEWING for _, _, kind in springs):
            raise ValueError("sewing springs with the linear bending model are not simulated")
        springs = _linear_bending_springs(springs)

    spring_arr = np.array([(i, j) for i, j, _ in springs], dtype=np.int32).reshape(-1, 2)
    kind_arr = np.array([t for _, _, t in springs], dtype=np.int32)

    flat: list[int] = []
    face_a, face_b = [], []
    for _, _, _, fa, fb in hinges:
        face_a.append((len(flat), len(fa)))
        flat += fa
        face_b.append((len(flat), len(fb)))
        flat += fb

    hinge_arr = np.array([(h[0], h[1]) for h in hinges], dtype=np.int32).reshape(-1, 2)
    w4 = mesh.pin_weights**4
    pinned = (w4 >= SOFTGOALSNAP).astype(np.int32)
    goal = np.where((pinned == 0) & (w4 > np.finfo(np.float32).eps), w4, 0.0)
    return Topology(
        spring_vertices=spring_arr,
        spring_kind=kind_arr,
        hinge_vertices=hinge_arr,
        hinge_spring=np.array([h[2] for h in hinges], dtype=np.int32),
        hinge_face_a=np.array(face_a, dtype=np.int32).reshape(-1, 2),
        hinge_face_b=np.array(face_b, dtype=np.int32).reshape(-1, 2),
        hinge_face_vertices=np.array(flat, dtype=np.int32),
        pinned=pinned,
        goal_weight=goal,
        spring_lin_stiffness=spring_lin_stiffness(mesh, spring_arr, kind_arr),
        hinge_ang_stiffness=hinge_ang_stiffness(mesh, hinge_arr),
        spring_shrink=_spring_shrink(mesh, spring_arr, kind_arr, shrink_min, shrink_max),
    )


def shrink_factors(
    weights: np.ndarray | None, pairs: np.ndarray, n: int, shrink_min: float, shrink_max: float
) -> np.ndarray:
    """cloth_shrink_factor per pair: each vertex's factor runs linearly from 1 - shrink_min
    at group weight 0 (also outside the group, and everywhere without one) to
    1 - shrink_max at weight 1, and a spring takes the geometric mean of its two vertices'.
    Blender shrinks every cloth spring this way (structural, shear, linear bending), not the
    hinges' rest angles, which it measures on the unshrunk rest shape."""
    w = np.zeros(n) if weights is None else np.asarray(weights, dtype=np.float64)
    k = (1.0 - shrink_min) + (shrink_min - shrink_max) * w
    return np.sqrt(k[pairs[:, 0]] * k[pairs[:, 1]])


def _spring_shrink(
    mesh: ClothMesh, springs: np.ndarray, kind: np.ndarray, shrink_min: float, shrink_max: float
) -> np.ndarray:
    """Shrink factors, 0 for sewing springs (their rest length is 0)."""
    factors = shrink_factors(mesh.shrink_weight, springs, mesh.vertex_count, shrink_min, shrink_max)
    return np.where(kind == SPRING_SEWING, 0.0, factors)


def _pair_mean(weights: np.ndarray | None, pairs: np.ndarray, n: int) -> np.ndarray:
    """(w[i] + w[j]) / 2 per pair. Blender's vertices start at 0 and only a group's
    members get their weight, so no group means 0 everywhere."""
    w = np.zeros(n) if weights is None else np.asarray(weights, dtype=np.float64)
    return (w[pairs[:, 0]] + w[pairs[:, 1]]) / 2.0


def spring_lin_stiffness(mesh: ClothMesh, springs: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """Each spring's group weight (Blender's lin_stiffness, cloth_build_springs): structural
    springs take the structural group, shear springs (the polygon diagonals) the shear group,
    LINEAR bending springs the bending group; (S,) float64."""
    n = mesh.vertex_count
    groups = {
        SPRING_STRUCTURAL: mesh.structural_stiffness_weight,
        SPRING_SHEAR: mesh.shear_stiffness_weight,
        SPRING_BENDING_LINEAR: mesh.bending_stiffness_weight,
    }
    lin = np.zeros(len(springs))
    for k, weights in groups.items():
        mask = kind == k
        lin[mask] = _pair_mean(weights, springs[mask], n)
    # sewing springs keep 0: cloth_update_springs resets every spring's weight before each
    # step and gives them none back (the build's 1 never acts)
    return lin


def hinge_ang_stiffness(mesh: ClothMesh, hinges: np.ndarray) -> np.ndarray:
    """Each hinge's bending-group weight (Blender's ang_stiffness): the mean of its axis's two
    vertices, (H,) float64."""
    return _pair_mean(mesh.bending_stiffness_weight, hinges, mesh.vertex_count)


def _linear_bending_springs(springs: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """LINEAR bending model: compression-only springs from each shear spring's first
    vertex to the far ends of the shear springs at its second vertex (two quad diagonals
    apart), skipping pairs already joined by a spring."""
    shear = [(i, j) for i, j, t in springs if t == SPRING_SHEAR]
    at_vertex: dict[int, list[tuple[int, int]]] = {}
    for i, j in shear:
        at_vertex.setdefault(i, []).insert(0, (i, j))
        at_vertex.setdefault(j, []).insert(0, (i, j))
    joined = {(min(i, j), max(i, j)) for i, j, _ in springs}
    bend: list[tuple[int, int, int]] = []
    for ij, kl in shear:
        for a, b in at_vertex.get(kl, []):
            other = b if a == kl else a
            key = (min(other, ij), max(other, ij))
            if other != ij and key not in joined:
                joined.add(key)
                bend.append((key[0], key[1], SPRING_BENDING_LINEAR))
    return list(reversed(bend)) + springs


def vertex_tables(top: Topology, n: int) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """Per-vertex (CSR) tables in spring and hinge order.

    Springs: offsets (n + 1), spring ids, the other vertex, sign (+1: the vertex is the
    spring's first vertex and receives its force; -1: the second, receives the negative).
    Hinges: offsets, hinge ids, role bits (1: in face a, 2: in face b, 4: on the hinge edge).
    """
    s = top.spring_vertices
    ids = np.arange(len(s), dtype=np.int64)
    vertex = np.concatenate([s[:, 0], s[:, 1]])
    spring = np.concatenate([ids, ids])
    other = np.concatenate([s[:, 1], s[:, 0]])
    sign = np.concatenate([np.ones(len(s)), -np.ones(len(s))])
    order = np.lexsort((spring, vertex))
    spring_offsets = np.concatenate([[0], np.cumsum(np.bincount(vertex, minlength=n))])
    spring_table = (spring_offsets, spring[order], other[order], sign[order])

    roles: dict[tuple[int, int], int] = {}
    flat = top.hinge_face_vertices
    for h in range(len(top.hinge_spring)):
        (sa, ca), (sb, cb) = top.hinge_face_a[h], top.hinge_face_b[h]
        for v in flat[sa : sa + ca]:
            roles[(int(v), h)] = roles.get((int(v), h), 0) | 1
        for v in flat[sb : sb + cb]:
            roles[(int(v), h)] = roles.get((int(v), h), 0) | 2
        for v in top.hinge_vertices[h]:
            roles[(int(v), h)] = roles.get((int(v), h), 0) | 4
    keys = sorted(roles)
    hinge_vertex = np.array([k[0] for k in keys], dtype=np.int64)
    hinge_offsets = np.concatenate([[0], np.cumsum(np.bincount(hinge_vertex, minlength=n))])
    hinge_table = (
        hinge_offsets,
        np.array([k[1] for k in keys], dtype=np.int64),
        np.array([roles[k] for k in keys], dtype=np.int64),
    )
    return tuple(a.astype(np.int32) for a in spring_table), tuple(a.astype(np.int32) for a in hinge_table)
