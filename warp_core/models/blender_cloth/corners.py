"""Polygon corners Blender's cloth cannot bend reliably across (numpy only): the check that
refuses them before a fit."""

from __future__ import annotations

import numpy as np

from ...mesh import ClothMesh

# Blender bends a polygon of four or more corners across each of its diagonals, with the
# normal of the corners on either side (cloth_add_shear_bend_spring). Across a corner near
# 180 degrees that side is a nearly flat triangle whose normal swings with the slightest sag,
# and Blender's own result turns erratic: a 1e-6 change of the mass moves it about as far as
# this model is from it. Across a reflex corner the triangle faces away from the polygon and
# the hinge rests on atan2's branch cut (+-180 degrees), where rounding in the first substeps
# decides which way it swings. Measured against bpy's cloth over 60 frames, max deviation /
# largest displacement, on 10 x 10 and 12 x 12 grids with quads 40 and 41 merged into a
# hexagon (or cut into two quads) whose corners are bent to the angle, the largest over the
# scenes of each row (plain grids: 1.3e-6 to 1.7e-6, and 4.9e-4 clamped with bending 10):
#   degrees             180     179.9   179     175     172     170
#   bending 0.5         2.0e-3  1.5e-3  1.7e-4  2.7e-6  1.3e-6  1.5e-6
#   tension 40, bend 2  5.6e-3  1.0e-2  5.1e-3  7.1e-5  2.6e-3  7.6e-5
#   bending 10, clamped 3.4e-2  3.9e-2  1.0e-1  1.4e-3  9.6e-5  1.2e-3 (quads; Blender's own
#     spread is 1.2e-3 there and 1.5e-3 at 165 degrees: stiffer bending lowers the limit)
#   reflex corners of 181, 190, 210 degrees: 0.12 to 0.57 (Blender's own spread 1e-4 to 1.4e-3);
#   an L-shaped polygon: 1.3e-2 to 3.1e-2
MAX_CORNER_DEGREES = 170.0


def corner_angles(mesh: ClothMesh) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Interior angle in degrees (0 to 360, above 180 at reflex corners) at every corner of
    every polygon of four or more corners, with the polygon and the vertex of each corner."""
    o = mesh.polygon_offsets
    sizes = np.diff(o)
    poly = np.repeat(np.arange(len(sizes)), sizes)
    pv = mesh.polygon_vertices
    x = mesh.vertices
    here = x[pv]
    to_prev = x[_next_corner(mesh, -1)] - here
    to_next = x[_next_corner(mesh, 1)] - here
    turn = np.cross(to_prev, to_next)
    angle = np.degrees(np.arctan2(np.linalg.norm(turn, axis=1), np.einsum("ij,ij->i", to_prev, to_next)))
    # Newell normal of each polygon, about its first corner; a reflex corner turns against it
    rel = here - x[pv[o[poly]]]
    normal = np.add.reduceat(np.cross(rel, rel + to_next), o[:-1], axis=0)
    reflex = np.einsum("ij,ij->i", turn, normal[poly]) > 0
    keep = sizes[poly] >= 4
    return np.where(reflex, 360.0 - angle, angle)[keep], poly[keep], pv[keep]


def _next_corner(mesh: ClothMesh, step: int) -> np.ndarray:
    """The vertex ``step`` corners on (1: next, -1: previous) from each corner, in loop order."""
    o = mesh.polygon_offsets
    sizes = np.diff(o)
    start = np.repeat(o[:-1], sizes)
    corner = np.arange(len(start))
    return mesh.polygon_vertices[start + (corner - start + step) % np.repeat(sizes, sizes)]


def check_corners(mesh: ClothMesh) -> None:
    """ValueError naming the first polygon corner over MAX_CORNER_DEGREES or reflex, with
    what to do about it."""
    interior, poly, vertex = corner_angles(mesh)
    # to the 0.01 degrees the message shows, so float32 coordinates of a corner at the limit pass
    bad = np.flatnonzero(np.round(interior, 2) > MAX_CORNER_DEGREES)
    if not len(bad):
        return
    angle, p, v = float(interior[bad[0]]), int(poly[bad[0]]), int(vertex[bad[0]])
    split = f"split polygon {p} at vertex {v} (Connect Vertex Path) or triangulate the mesh"
    if angle >= 360.0 - MAX_CORNER_DEGREES:
        raise ValueError(
            f"polygon {p} is not convex: its corner at vertex {v} is {angle:.2f} degrees, and Blender's "
            f"cloth bends it erratically across the diagonal outside the polygon; {split}"
        )
    pairs = np.concatenate([mesh.edges, np.column_stack([mesh.polygon_vertices, _next_corner(mesh, 1)])])
    neighbours = set(pairs[pairs[:, 0] == v, 1].tolist()) | set(pairs[pairs[:, 1] == v, 0].tolist())
    # a vertex on two edges only goes away with its corner; any other would merge more faces
    dissolve = f"dissolve vertex {v} (Dissolve Vertices) or triangulate the mesh"
    raise ValueError(
        f"polygon {p} has a corner of {angle:.2f} degrees at vertex {v}, and Blender's cloth bends it "
        f"erratically past {MAX_CORNER_DEGREES:g} degrees (across the diagonal that skips the corner); "
        f"{dissolve if len(neighbours) == 2 else split}"
    )
