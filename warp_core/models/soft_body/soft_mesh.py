"""The body's particles, tets and surface triangles added to a Newton ``ModelBuilder`` as
whole arrays.

Newton's ``ModelBuilder.add_soft_mesh`` adds them one element at a time in Python (each
tet's rest pose is its own ``np.linalg.inv``): on a 47k-tet body that is most of a
simulator's build, and a fit builds one simulator, and on the CPU one more a core for its
Jacobian's rollouts side by side. :func:`add_soft_body` adds what that call adds for a body at rest in place
(no rotation, scale 1, no velocity) with batched numpy: the same particles, the same rest
poses and volumes (the same float32 arithmetic, stacked), the same node masses at a given
density, the same materials and the same zero-stiffness surface triangles (Newton's
particle contact reads them; they add no force). It does not register the body as one of
Newton's labelled volumes, which only Newton's selection API reads.

Called by ``scene.build_scene``; checked against ``add_soft_mesh`` by the tests.
"""

from __future__ import annotations

import logging

import newton
import numpy as np

__all__ = ["add_soft_body", "surface_triangles"]

logger = logging.getLogger(__name__)

# each tet's four faces, wound as Newton's TetMesh.compute_surface_triangles winds them
FACES = np.array([[0, 2, 1], [1, 2, 3], [0, 1, 3], [0, 3, 2]])


def surface_triangles(tets: np.ndarray) -> np.ndarray:
    """(F, 3) int32: the faces of ``tets`` (T, 4) that belong to one tet only, in tet order,
    as ``newton.TetMesh.compute_surface_triangles`` gives them. Each face is found by one
    int64 key of its sorted nodes, where Newton sorts rows of three (np.unique on axis 0 is
    a lexicographic sort of structured rows: 6 times as long on a 47k-tet body)."""
    tets = np.asarray(tets, dtype=np.int64).reshape(-1, 4)
    faces = tets[:, FACES].reshape(-1, 3)
    if len(faces) == 0:
        return np.zeros((0, 3), dtype=np.int32)
    a, b, c = np.sort(faces, axis=1).T
    base = int(tets.max()) + 1  # keys below base**3: nodes up to 2 million in an int64
    _, inverse, counts = np.unique((a * base + b) * base + c, return_inverse=True, return_counts=True)
    return faces[counts[inverse] == 1].astype(np.int32)


def add_soft_body(
    builder: newton.ModelBuilder,
    vertices: np.ndarray,
    tets: np.ndarray,
    density: float,
    k_mu: float,
    k_lambda: float,
    k_damp: float,
    particle_radius: float,
) -> None:
    """Add the body's nodes ``vertices`` (N, 3) and tets ``tets`` (T, 4), each tet with the
    Lame parameters ``k_mu``, ``k_lambda`` (Pa) and damping ``k_damp``, its nodes weighing a
    quarter of each tet's volume at ``density`` (kg/m^3); tets of zero or negative volume are
    left out (with a warning), as Newton leaves them."""
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
    builder.tet_indices.extend(map(tuple, (tets[kept] + start).tolist()))
    builder.tet_poses.extend(np.linalg.inv(rest[kept]).tolist())
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
