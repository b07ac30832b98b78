"""Plain-array description of a cloth mesh, as exported from Blender (world space)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def fan_triangles(polygons: list) -> np.ndarray:
    """(T, 3) int32 triangles of polygons split as fans from their first corner (polygons of
    fewer than 3 corners skipped)."""
    tris = [(p[0], p[k], p[k + 1]) for p in polygons for k in range(1, len(p) - 1)]
    return np.array(tris, dtype=np.int32).reshape(-1, 3)


def rest_edges(mesh: ClothMesh) -> tuple[np.ndarray, np.ndarray]:
    """The mesh's edges of non-zero length and their rest lengths (:func:`max_edge_stretch`)."""
    edges = mesh.edges
    rest = np.linalg.norm(mesh.vertices[edges[:, 1]] - mesh.vertices[edges[:, 0]], axis=1)
    return edges[rest > 0.0], rest[rest > 0.0]


def max_edge_stretch(positions: np.ndarray, edges: np.ndarray, rest_lengths: np.ndarray) -> float:
    """Largest length over rest length of ``edges`` ((E, 2), rest lengths > 0) in ``positions``
    (frames, N, 3): how a fit tells a torn-apart (diverged) rollout; 1 without edges."""
    if not len(edges):
        return 1.0
    lengths = np.linalg.norm(positions[:, edges[:, 1]] - positions[:, edges[:, 0]], axis=2)
    return float((lengths / rest_lengths).max())


# Per-vertex weights of the cloth modifier's stiffness vertex groups (None: no group).
STIFFNESS_WEIGHT_FIELDS: tuple[str, ...] = (
    "structural_stiffness_weight",
    "shear_stiffness_weight",
    "bending_stiffness_weight",
)
# Per-vertex weights of the soft body's material groups (None: no group).
SOFT_BODY_WEIGHT_FIELDS: tuple[str, ...] = ("young_modulus_weight", "damping_weight")
# Per-vertex weights of the modifier's vertex groups (None: no group).
VERTEX_GROUP_FIELDS: tuple[str, ...] = (*STIFFNESS_WEIGHT_FIELDS, "shrink_weight", *SOFT_BODY_WEIGHT_FIELDS)


@dataclass
class ClothMesh:
    """A polygon mesh with optional loose edges and pin weights.

    ``polygon_vertices[polygon_offsets[p]:polygon_offsets[p + 1]]`` are the corners of
    polygon ``p`` in Blender's loop order. ``edges`` are all mesh edges (Blender's edge
    order), including loose ones. ``pin_weights`` are the raw vertex-group weights of the
    cloth modifier's pin group (0 where a vertex is not in the group). The
    ``*_stiffness_weight`` arrays are the weights of the modifier's structural, shear and
    bending stiffness groups (0 outside the group), None where no group is set;
    ``shrink_weight`` those of its shrinking group the same way. A soft body's
    ``young_modulus_weight`` and ``damping_weight`` are those of its groups that blend
    Young's modulus and the damping towards their maxima (``soft_body.materials``).
    """

    vertices: np.ndarray  # (N, 3) float64, world space, metres
    polygon_vertices: np.ndarray  # (sum of polygon sizes,) int32
    polygon_offsets: np.ndarray  # (P + 1,) int32
    edges: np.ndarray  # (E, 2) int32
    pin_weights: np.ndarray = field(default=None)  # (N,) float64 in [0, 1]
    structural_stiffness_weight: np.ndarray | None = None  # (N,) float64 in [0, 1], or None
    shear_stiffness_weight: np.ndarray | None = None
    bending_stiffness_weight: np.ndarray | None = None
    shrink_weight: np.ndarray | None = None
    young_modulus_weight: np.ndarray | None = None
    damping_weight: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.vertices = np.ascontiguousarray(self.vertices, dtype=np.float64).reshape(-1, 3)
        self.polygon_vertices = np.ascontiguousarray(self.polygon_vertices, dtype=np.int32).ravel()
        self.polygon_offsets = np.ascontiguousarray(self.polygon_offsets, dtype=np.int32).ravel()
        self.edges = np.ascontiguousarray(self.edges, dtype=np.int32).reshape(-1, 2)
        if self.pin_weights is None:
            self.pin_weights = np.zeros(len(self.vertices))
        self.pin_weights = np.ascontiguousarray(self.pin_weights, dtype=np.float64).ravel()
        for name in VERTEX_GROUP_FIELDS:
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, np.ascontiguousarray(value, dtype=np.float64).ravel())

    @property
    def vertex_count(self) -> int:
        return len(self.vertices)

    @property
    def polygon_count(self) -> int:
        return len(self.polygon_offsets) - 1

    def polygons(self) -> list[np.ndarray]:
        o = self.polygon_offsets
        return [self.polygon_vertices[o[p] : o[p + 1]] for p in range(self.polygon_count)]

    def triangles(self) -> np.ndarray:
        """(T, 3) int32 fan triangles of the polygons."""
        return fan_triangles(self.polygons())

    @classmethod
    def from_polygons(
        cls,
        vertices: np.ndarray,
        polygons: list[list[int]],
        edges: np.ndarray | None = None,
        pin_weights: np.ndarray | None = None,
    ) -> ClothMesh:
        """Build from a list of polygons; edges are derived from the polygons if not given
        (in first-seen order, which differs from Blender's: export real edges from Blender
        where the spring order matters)."""
        offsets = np.zeros(len(polygons) + 1, dtype=np.int32)
        offsets[1:] = np.cumsum([len(p) for p in polygons])
        flat = np.concatenate([np.asarray(p, dtype=np.int32) for p in polygons] or [np.zeros(0, np.int32)])
        if edges is None:
            seen: dict[tuple[int, int], int] = {}
            for poly in polygons:
                for a, b in zip(poly, list(poly[1:]) + [poly[0]], strict=True):
                    key = (min(a, b), max(a, b))
                    if key not in seen:
                        seen[key] = len(seen)
            edges = np.array(list(seen.keys()), dtype=np.int32).reshape(-1, 2)
        return cls(vertices, flat, offsets, edges, pin_weights)


def grid_mesh(
    nx: int,
    ny: int,
    size_x: float = 1.0,
    size_y: float = 1.0,
    z: float = 0.0,
    triangulate: bool = False,
) -> ClothMesh:
    """A regular grid in the XY plane centred on the origin, ``nx`` x ``ny`` vertices."""
    xs = np.linspace(-size_x / 2, size_x / 2, nx)
    ys = np.linspace(-size_y / 2, size_y / 2, ny)
    verts = np.array([(x, y, z) for y in ys for x in xs], dtype=np.float64)
    polys: list[list[int]] = []
    for j in range(ny - 1):
        for i in range(nx - 1):
            a = j * nx + i
            quad = [a, a + 1, a + 1 + nx, a + nx]
            if triangulate:
                polys += [[quad[0], quad[1], quad[2]], [quad[0], quad[2], quad[3]]]
            else:
                polys.append(quad)
    return ClothMesh.from_polygons(verts, polys)
