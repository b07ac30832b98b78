"""The soft body's batched Newton build (``soft_mesh.add_soft_body``) against Newton's own
``ModelBuilder.add_soft_mesh``: the finalized models hold the same particles, masses, tets,
rest poses, materials and surface triangles, and the same colouring."""

from __future__ import annotations

import newton
import numpy as np
import pytest
import warp as wp
from soft_body_meshes import box_mesh

from warp_core.models.soft_body.lattice import build_lattice
from warp_core.models.soft_body.soft_mesh import add_soft_body, colour, surface_triangles

K_MU, K_LAMBDA, K_DAMP = 3.8e4, 5.7e4, 12.5
DENSITY, RADIUS = 1000.0, 0.004


def finalized(vertices: np.ndarray, tets: np.ndarray, batched: bool) -> newton.Model:
    builder = newton.ModelBuilder(up_axis=newton.Axis.Z)
    if batched:
        add_soft_body(builder, vertices, tets, DENSITY, K_MU, K_LAMBDA, K_DAMP, RADIUS)
    else:
        builder.add_soft_mesh(
            pos=wp.vec3(0.0, 0.0, 0.0),
            rot=wp.quat_identity(),
            scale=1.0,
            vel=wp.vec3(0.0, 0.0, 0.0),
            vertices=vertices,
            indices=tets.ravel().tolist(),
            density=DENSITY,
            k_mu=K_MU,
            k_lambda=K_LAMBDA,
            k_damp=K_DAMP,
            add_surface_mesh_edges=False,
            particle_radius=RADIUS,
        )
    return builder.finalize(device="cpu")


@pytest.mark.parametrize("cells", [3, 6])
def test_the_batched_build_is_newtons(cells: int) -> None:
    mesh = box_mesh((-0.2, -0.1, 0.3), (0.25, 0.15, 0.42), (3, 2, 2))
    lattice = build_lattice(mesh.vertices, mesh.triangles(), cells)
    vertices = (lattice.nodes - np.array([0.01, -0.02, 0.3])).astype(np.float32)
    ours, newtons = (finalized(vertices, lattice.tets, batched) for batched in (True, False))
    assert ours.tet_count == newtons.tet_count == len(lattice.tets)
    exact = (
        "particle_q",
        "particle_qd",
        "particle_mass",
        "particle_inv_mass",
        "particle_radius",
        "particle_flags",
        "tet_indices",
        "tet_poses",
        "tet_activations",
        "tet_materials",
        "tri_indices",
        "tri_materials",
    )
    for name in exact:
        np.testing.assert_array_equal(
            getattr(ours, name).numpy(), getattr(newtons, name).numpy(), err_msg=name
        )
    # Newton's single-triangle path takes its rest frame in Warp's float32 vector maths, the
    # batched one in numpy: the same shape to float32 rounding
    for name in ("tri_poses", "tri_areas"):
        a, b = getattr(ours, name).numpy(), getattr(newtons, name).numpy()
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6 * np.abs(b).max(), err_msg=name)
    assert ours.particle_mass.numpy().sum() == pytest.approx(DENSITY * lattice_volume(lattice), rel=1e-5)


@pytest.mark.parametrize("cells", [2, 8])  # 8: balancing moves nodes
def test_the_colouring_is_newtons(cells: int) -> None:
    """A lattice body beside the ground and two colliders, one of them a kinematic body:
    the particles' and the bodies' colour groups are those ``ModelBuilder.color()`` makes."""
    mesh = box_mesh((-0.2, -0.1, 0.3), (0.25, 0.15, 0.42), (3, 2, 2))
    lattice = build_lattice(mesh.vertices, mesh.triangles(), cells)
    box = newton.Mesh(np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], dtype=np.float32), [0, 1, 2])

    def built(ours: bool) -> newton.ModelBuilder:
        builder = newton.ModelBuilder(up_axis=newton.Axis.Z)
        tets = add_soft_body(builder, lattice.nodes, lattice.tets, DENSITY, K_MU, K_LAMBDA, K_DAMP, RADIUS)
        builder.add_ground_plane()
        builder.add_shape_mesh(-1, mesh=box)
        body = builder.add_body(xform=wp.transform_identity(), is_kinematic=True)
        builder.add_shape_mesh(body, mesh=box)
        if ours:
            colour(builder, tets)
        else:
            builder.color()
        return builder

    ours, newtons = built(True), built(False)
    assert len(newtons.particle_color_groups) > 1 and newtons.body_count == 1
    for name in ("particle_color_groups", "body_color_groups"):
        a, b = getattr(ours, name), getattr(newtons, name)
        assert len(a) == len(b), name
        for mine, theirs in zip(a, b, strict=True):
            np.testing.assert_array_equal(mine, theirs, err_msg=name)


def lattice_volume(lattice) -> float:
    corners = lattice.nodes[lattice.tets]
    edges = corners[:, 1:] - corners[:, :1]
    return float(np.abs(np.linalg.det(edges)).sum() / 6.0)


def test_the_surface_is_newtons_on_tets_that_share_faces_in_any_order() -> None:
    """Two cubes of five tets each, sharing a face, their tets shuffled and their node
    numbers permuted: the faces of one tet only, in tet order, wound as Newton winds them."""
    cube = np.array([[0, 1, 3, 4], [1, 2, 3, 6], [1, 4, 5, 6], [3, 4, 6, 7], [1, 3, 4, 6]])
    tets = np.concatenate([cube, cube + 4])  # the second shares nodes 4-7: the face 4-6-7 and more
    rng = np.random.default_rng(3)
    tets = rng.permutation(rng.permutation(12)[tets])
    expected = newton.TetMesh.compute_surface_triangles(tets.ravel()).reshape(-1, 3)
    found = surface_triangles(tets)
    assert found.dtype == np.int32 and 0 < len(found) < 4 * len(tets)
    np.testing.assert_array_equal(found, expected)
