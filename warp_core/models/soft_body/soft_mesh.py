"""The body's particles, tets and surface triangles added to a Newton ``ModelBuilder`` as
whole arrays.

Newton's ``ModelBuilder.add_soft_mesh`` adds them one element at a time in Python (each
tet's rest pose is its own ``np.linalg.inv``): on a 47k-tet body that is most of a
simulator's build, and a fit builds one simulator, and on the CPU one more a core for its
Jacobian's rollouts side by side. :func:`add_soft_body` adds what that call adds for a body at rest in place
(no rotation, scale 1, no velocity) with batched numpy: the same particles, the same rest
poses and volumes (the same float32 arithmetic, stacked), the same node masses at a given
density, the same materials and the same zero-stiffness surface triangles (Newton's
particle contact reads them; they add no force); :func:`colour` then colours them as
``ModelBuilder.color()`` would, sooner. It does not register the body as one of
Newton's labelled volumes, which only Newton's selection API reads.

Called by ``scene.build_scene``; checked against ``add_soft_mesh`` by the tests.
"""

from __future__ import annotations

import logging

import newton
import numpy as np
import warp as wp

__all__ = ["add_soft_body", "colour", "rest_inverses", "surface_triangles"]

logger = logging.getLogger(__name__)

# each tet's six edges, as Newton's particle graph takes them
EDGES = np.array([[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]])
# what ModelBuilder.color() balances its colours to (its default)
COLOUR_BALANCE = 1.1
# each tet's four faces, wound as Newton's TetMesh.compute_surface_triangles winds them
FACES = np.array([[0, 2, 1], [1, 2, 3], [0, 1, 3], [0, 3, 2]])


def _sorted_row_keys(rows: np.ndarray) -> np.ndarray:
    """One int64 per row of node numbers (N, k), equal for rows of the same nodes in any
    order and ordered as the sorted rows are lexicographically: where Newton sorts rows
    (np.unique on axis 0, a lexicographic sort of structured rows), one key a row finds the
    same rows in the same order, 6 times as soon on a 47k-tet body. Rows of three keep
    nodes up to 2 million within an int64."""
    base = int(rows.max()) + 1 if rows.size else 1
    keys = np.zeros(len(rows), dtype=np.int64)
    for column in np.sort(rows, axis=1).T:
        keys = keys * base + column
    return keys


def surface_triangles(tets: np.ndarray) -> np.ndarray:
    """(F, 3) int32: the faces of ``tets`` (T, 4) that belong to one tet only, in tet order,
    as ``newton.TetMesh.compute_surface_triangles`` gives them (each face found by its
    :func:`_sorted_row_keys` key)."""
    tets = np.asarray(tets, dtype=np.int64).reshape(-1, 4)
    faces = tets[:, FACES].reshape(-1, 3)
    if len(faces) == 0:
        return np.zeros((0, 3), dtype=np.int32)
    _, inverse, counts = np.unique(_sorted_row_keys(faces), return_inverse=True, return_counts=True)
    return faces[counts[inverse] == 1].astype(np.int32)


def rest_inverses(rest: np.ndarray) -> np.ndarray:
    """(T, 3, 3) float32: ``np.linalg.inv`` of each of ``rest`` (T, 3, 3) float32, bit for
    bit, inverting each distinct matrix once. A lattice's tets repeat a few shapes, so its
    rest matrices repeat too (6,912 distinct among the 47,040 of a 28-cell slab), and numpy
    inverts a stack one LAPACK call at a time (6 us a matrix)."""
    rest = np.ascontiguousarray(rest, dtype=np.float32)
    if len(rest) == 0:
        return np.zeros((0, 3, 3), dtype=np.float32)
    # equal bytes, equal matrices: the key is exact (a -0.0 only costs one more inversion)
    keys = rest.reshape(len(rest), 9).view(np.dtype((np.void, 36))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return np.linalg.inv(rest[first])[inverse.ravel()]


def colour(builder: newton.ModelBuilder, tets: np.ndarray) -> None:
    """Set ``builder``'s colouring, as ``ModelBuilder.color()`` sets it for a builder whose
    particles are linked by the elastic tets ``tets`` (T, 4; builder indices, as
    :func:`add_soft_body` returns them) alone (no stretching triangles, no joints between
    bodies): the same graph, coloured and balanced by the same Warp calls. Its edges are
    found by :func:`_sorted_row_keys` in Newton's order, 0.2 s sooner on a 47k-tet body."""
    count = len(builder.particle_q)
    pairs = np.sort(np.asarray(tets, dtype=np.int64).reshape(-1, 4)[:, EDGES].reshape(-1, 2), axis=1)
    _, first = np.unique(_sorted_row_keys(pairs), return_index=True)
    edges = pairs[first].astype(np.int32)
    if len(edges):
        indices = wp.array(edges, dtype=int, device="cpu")
        colours = wp.empty(count, dtype=wp.int32, device="cpu")
        n = wp.utils.graph_coloring_assign(indices, colours, wp.utils.GraphColoringAlgorithm.MCS)
        wp.utils.graph_coloring_balance(indices, colours, n, COLOUR_BALANCE)
        builder.set_coloring(wp.utils.graph_coloring_get_groups(colours, n, return_wp_array=False))
    else:
        builder.set_coloring([np.arange(count, dtype=int)] if count else [])
    # bodies that no joint links (the colliders) share one colour, as color() gives them
    builder.body_color_groups = [np.arange(builder.body_count, dtype=int)] if builder.body_count else []


def add_soft_body(
    builder: newton.ModelBuilder,
    vertices: np.ndarray,
    tets: np.ndarray,
    density: float,
    k_mu: float,
    k_lambda: float,
    k_damp: float,
    particle_radius: float,
) -> np.ndarray:
    """Add the body's nodes ``vertices`` (N, 3) and tets ``tets`` (T, 4), each tet with the
    Lame parameters ``k_mu``, ``k_lambda`` (Pa) and damping ``k_damp``, its nodes weighing a
    quarter of each tet's volume at ``density`` (kg/m^3); tets of zero or negative volume are
    left out (with a warning), as Newton leaves them. Returns the tets added (T', 4), in
    the builder's particle indices."""
    start = len(builder.particle_q)
    positions = np.asarray(vertices, dtype=np.float32)
    count = len(positions)
    tets = np.asarray(tets, dtype=np.int64).reshape(-1, 4)
    corners = positions[tets]  # (T, 4, 3) float32, as Newton's per-tet arrays are
    edges = corners[:, 1:] - corners[:, :1]  # (T, 3, 3): rows q - p, r - p, s - p
    rest = np.swapaxes(edges, 1, 2)  # the edges as columns
    # a float32 determinant over 6 in float64, as ``np.float32 / 6.0`` gives per tet
    volumes = np.linalg.det(rest).astype(np.float64) / 6.0
    kept = volumes > 0.0
    if not kept.all():
        logger.warning("%d inverted tetrahedral elements left out", int((~kept).sum()))
    # each kept tet's quarter volume to its four nodes, summed in Newton's order
    masses = np.zeros(count)
    np.add.at(masses, tets[kept].ravel(), np.repeat(float(density) * volumes[kept] / 4.0, 4))

    builder.add_particles(
        pos=[tuple(p) for p in positions.tolist()],
        vel=[(0.0, 0.0, 0.0)] * count,
        mass=masses.tolist(),
        radius=[float(particle_radius)] * count,
    )
    added = tets[kept] + start
    builder.tet_indices.extend(map(tuple, added.tolist()))
    # (3, 3) arrays, not nested lists: finalize stacks either into the same float32 matrices
    builder.tet_poses.extend(rest_inverses(rest[kept]))
    builder.tet_activations.extend([0.0] * int(kept.sum()))
    material = tuple(float(np.float32(k)) for k in (k_mu, k_lambda, k_damp))
    builder.tet_materials.extend([material] * int(kept.sum()))

    surface = surface_triangles(tets) + start
    zeros = [0.0] * len(surface)
    builder.add_triangles(
        surface[:, 0],
        surface[:, 1],
        surface[:, 2],
        tri_ke=zeros,
        tri_ka=zeros,
        tri_kd=zeros,
        tri_drag=zeros,
        tri_lift=zeros,
    )
    return added
