"""Meshes for the soft-body tests: closed boxes of quads, and an open sheet."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from warp_core.mesh import ClothMesh

if TYPE_CHECKING:
    from warp_core.models.soft_body import SoftBodyParams


def box_mesh(lo, hi, divisions=(1, 1, 1), pin=None) -> ClothMesh:
    """The closed surface of the box [lo, hi], each face a grid of quads (outward normals);
    ``pin(vertices) -> bool mask`` marks the pinned vertices (pin weight 1)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    n = np.asarray(divisions, int)
    index: dict[tuple, int] = {}
    polygons = []

    def vertex(ijk) -> int:
        key = tuple(int(c) for c in ijk)
        return index.setdefault(key, len(index))

    for axis in range(3):
        a, b = [k for k in range(3) if k != axis]
        for side in (0, n[axis]):
            for i in range(n[a]):
                for j in range(n[b]):
                    quad = []
                    for di, dj in ((0, 0), (1, 0), (1, 1), (0, 1)):
                        ijk = [0, 0, 0]
                        ijk[axis], ijk[a], ijk[b] = side, i + di, j + dj
                        quad.append(vertex(ijk))
                    # (a, b, axis) is right-handed for axis x and z, left-handed for y
                    outward = (side > 0) == (axis != 1)
                    polygons.append(quad if outward else quad[::-1])
    ijk = np.array(sorted(index, key=index.get), dtype=float)
    vertices = lo + ijk / n * (hi - lo)
    pins = None if pin is None else np.asarray(pin(vertices), dtype=float)
    return ClothMesh.from_polygons(vertices, polygons, pin_weights=pins)


def sheet_mesh(nx: int, ny: int, size=(1.0, 1.0), z=None) -> ClothMesh:
    """An open sheet of quads over the XY square; ``z(x, y)`` lifts it (None: flat)."""
    xs = np.linspace(-size[0] / 2, size[0] / 2, nx)
    ys = np.linspace(-size[1] / 2, size[1] / 2, ny)
    verts = np.array([(x, y, 0.0 if z is None else z(x, y)) for y in ys for x in xs])
    polys = [
        [j * nx + i, j * nx + i + 1, (j + 1) * nx + i + 1, (j + 1) * nx + i]
        for j in range(ny - 1)
        for i in range(nx - 1)
    ]
    return ClothMesh.from_polygons(verts, polys)


def sphere_mesh(
    radius: float = 1.0, rings: int = 12, segments: int = 24, centre=(0.0, 0.0, 0.0)
) -> ClothMesh:
    """A closed UV sphere: quads between the rings, triangles at the poles."""
    verts = [(0.0, 0.0, radius)]
    for theta in np.linspace(0.0, np.pi, rings + 1)[1:-1]:
        for phi in np.linspace(0.0, 2.0 * np.pi, segments, endpoint=False):
            verts.append(
                (
                    radius * np.sin(theta) * np.cos(phi),
                    radius * np.sin(theta) * np.sin(phi),
                    radius * np.cos(theta),
                )
            )
    verts.append((0.0, 0.0, -radius))
    south = len(verts) - 1

    def ring(r: int, k: int) -> int:
        return 1 + r * segments + k % segments

    polys = [[0, ring(0, k), ring(0, k + 1)] for k in range(segments)]
    for r in range(rings - 2):
        polys += [[ring(r, k), ring(r + 1, k), ring(r + 1, k + 1), ring(r, k + 1)] for k in range(segments)]
    polys += [[south, ring(rings - 2, k + 1), ring(rings - 2, k)] for k in range(segments)]
    return ClothMesh.from_polygons(np.array(verts) + np.asarray(centre, float), polys)


def swinging_goals(mesh: ClothMesh, frames: int, reach: float, turns: float) -> np.ndarray:
    """Pin goals for ``frames`` frames: the mesh swung ``reach`` metres along x, ``sin`` over
    ``turns`` radians."""
    goals = np.repeat(mesh.vertices[None], frames + 1, axis=0)
    goals[:, :, 0] += reach * np.sin(np.linspace(0.0, turns, frames + 1))[:, None]
    return goals


def rising_plate() -> tuple[ClothMesh, SoftBodyParams]:
    """A 20 cm cube (E 100 kPa on a 4-cell lattice) dropped onto a plate that rises under it
    for 30 frames (a moving mesh collider), then onto the ground: the mesh and its settings."""
    from warp_core.models.soft_body import Collider, SoftBodyParams

    cube = box_mesh((-0.1, -0.1, 0.1), (0.1, 0.1, 0.3), (2, 2, 2))
    plate = box_mesh((-0.5, -0.5, -0.2), (0.5, 0.5, 0.0))
    lift = np.repeat(np.eye(4)[None], 31, axis=0)
    lift[:, 2, 3] = 0.05 + 0.002 * np.arange(31)
    collider = Collider("lift", plate.vertices, plate.triangles(), lift)
    return cube, SoftBodyParams(young_modulus=1e5, damping=0.01, lattice_cells=4, colliders=(collider,))
