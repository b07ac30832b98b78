"""The soft body's tetrahedral lattice: embedding, orientation, conformity, interior fill,
quality and the meshes it refuses (pure numpy, no simulation)."""

from __future__ import annotations

import numpy as np
import pytest
from soft_body_meshes import box_mesh, sheet_mesh, sphere_mesh

from warp_core.mesh import ClothMesh
from warp_core.models.soft_body.lattice import build_lattice, tet_quality, tet_volumes

# mean-ratio quality of a Kuhn tetrahedron of the unit cube: edges 1, 1, 1, sqrt2, sqrt2,
# sqrt3 (sum of squares 10), volume 1/6
KUHN_QUALITY = 12.0 * 0.5 ** (2.0 / 3.0) / 10.0


def lattice_of(mesh: ClothMesh, cells: int):
    return build_lattice(mesh.vertices, mesh.triangles(), cells)


def rotated(mesh: ClothMesh, seed: int = 0) -> ClothMesh:
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(3, 3)))
    return ClothMesh(
        mesh.vertices @ q.T + [0.3, -1.2, 2.0], mesh.polygon_vertices, mesh.polygon_offsets, mesh.edges
    )


def faces_of(tets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every tet's four triangles (sorted corners), and how many tets share each."""
    faces = np.concatenate([tets[:, [1, 2, 3]], tets[:, [0, 2, 3]], tets[:, [0, 1, 3]], tets[:, [0, 1, 2]]])
    return np.unique(np.sort(faces, axis=1), axis=0, return_counts=True)


@pytest.mark.parametrize(
    "mesh, cells",
    [
        (sphere_mesh(0.7, centre=(0.1, 0.2, 0.3)), 9),
        (rotated(box_mesh((0, 0, 0), (1.0, 0.4, 0.3), (5, 2, 2))), 7),
        (sheet_mesh(6, 5, z=lambda x, y: 0.3 * x * x - 0.1 * y), 5),
    ],
    ids=["sphere", "rotated-box", "open-sheet"],
)
def test_the_embedding_reproduces_every_vertex_at_rest(mesh: ClothMesh, cells: int) -> None:
    lat = lattice_of(mesh, cells)
    w = lat.vertex_weights
    assert w.shape == (mesh.vertex_count, 4) and lat.vertex_tet.shape == (mesh.vertex_count,)
    assert np.all(w >= -1e-9) and np.allclose(w.sum(axis=1), 1.0, atol=1e-12)
    scale = np.abs(mesh.vertices).max()
    assert np.abs(lat.embed(lat.nodes) - mesh.vertices).max() < 1e-12 * max(scale, 1.0)
    # every vertex lies in a tet of the lattice, and every node is used
    assert lat.vertex_tet.max() < len(lat.tets)
    assert np.array_equal(np.unique(lat.tets), np.arange(len(lat.nodes)))


def test_tets_are_positive_and_conforming_between_cells() -> None:
    lat = lattice_of(sphere_mesh(1.0), 8)
    vol = tet_volumes(lat.nodes, lat.tets)
    assert vol.min() > 0.0
    np.testing.assert_allclose(vol, lat.cell_size**3 / 6.0, rtol=1e-9)
    faces, counts = faces_of(lat.tets)
    assert counts.max() == 2  # no face shared by three tets
    # conforming: the faces on one tet only are exactly the outside of the union of the
    # kept cells (a split whose diagonals disagreed across a shared cell face would leave
    # those half-faces unmatched, on one tet each, inside the body)
    h = lat.cell_size
    centroids = lat.nodes[lat.tets].mean(axis=1)
    cell_set = {tuple(c) for c in np.floor((centroids - lat.nodes.min(axis=0)) / h).astype(int)}
    steps = [(1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)]
    outside = sum(tuple(np.add(c, d)) not in cell_set for c in cell_set for d in steps)
    boundary = faces[counts == 1]
    p = lat.nodes[boundary]
    area = 0.5 * np.linalg.norm(np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]), axis=1).sum()
    assert area == pytest.approx(outside * h * h, rel=1e-9)
    assert len(lat.tets) == 6 * lat.cell_count


def test_a_closed_box_is_filled_and_an_open_one_is_a_shell() -> None:
    """A unit cube of 12 big triangles on an 8-cell lattice: the 6^3 cells inside touch no
    vertex or face, so only the inside test keeps them; without its top the box is open."""
    box = box_mesh((0, 0, 0), (1, 1, 1))
    lat = lattice_of(box, 8)
    assert lat.closed and lat.cell_count == 8**3
    assert tet_volumes(lat.nodes, lat.tets).sum() == pytest.approx(1.0, rel=1e-12)

    not_top = [p for p in box.polygons() if not np.all(box.vertices[p, 2] == 1.0)]
    open_box = ClothMesh.from_polygons(box.vertices, [list(p) for p in not_top])
    shell = lattice_of(open_box, 8)
    assert not shell.closed
    assert shell.cell_count == 8**3 - 6 * 6 * 7  # the five faces' cells only


def test_an_aligned_box_gets_exactly_its_volume() -> None:
    lat = lattice_of(box_mesh((-0.5, 2.0, 1.0), (0.5, 2.25, 1.75), (3, 2, 2)), 8)  # 1 x 0.25 x 0.75
    assert lat.cell_count == 8 * 2 * 6
    assert tet_volumes(lat.nodes, lat.tets).sum() == pytest.approx(0.1875, rel=1e-12)
    # flush with the lowest vertex: the lattice rests where the mesh does
    assert lat.nodes[:, 2].min() == pytest.approx(1.0, abs=1e-15)


def test_big_triangles_mark_every_cell_they_cross() -> None:
    """A tilted open quad of two triangles spanning 10 cells: the cells along it are kept
    (sampled at half a cell), not just the four corner cells."""
    verts = np.array([(0, 0, 0), (1, 0, 0.3), (1, 1, 0.3), (0, 1, 0)], float)
    lat = lattice_of(ClothMesh.from_polygons(verts, [[0, 1, 2, 3]]), 10)
    assert not lat.closed
    assert lat.cell_count >= 100  # at least one cell per column of the 10 x 10 footprint


def test_worst_quality_is_reported() -> None:
    lat = lattice_of(sphere_mesh(1.0), 6)
    assert 0.0 < lat.worst_quality <= 1.0
    assert lat.worst_quality == pytest.approx(KUHN_QUALITY, rel=1e-9)
    regular = np.array([(1, 1, 1), (1, -1, -1), (-1, 1, -1), (-1, -1, 1)], float)
    assert tet_quality(regular, np.array([[0, 1, 2, 3]]))[0] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "vertices, polygons, message",
    [
        (np.zeros((0, 3)), [], "no vertices or no faces"),
        (np.eye(3), [], "no vertices or no faces"),
        (np.array([(0, 0, 0), (1, 0, 0), (0, np.nan, 1)]), [[0, 1, 2]], "non-finite"),
        (np.ones((3, 3)), [[0, 1, 2]], "zero size"),
    ],
    ids=["empty", "no-faces", "nan", "zero-size"],
)
def test_meshes_without_a_body_are_refused(vertices, polygons, message) -> None:
    with pytest.raises(ValueError, match=message):
        lattice_of(ClothMesh.from_polygons(vertices, polygons), 4)


def test_a_flat_plane_is_refused_and_a_curved_one_is_not() -> None:
    with pytest.raises(ValueError, match="needs a volume") as info:
        lattice_of(sheet_mesh(4, 4), 4)
    assert "thickness" in str(info.value) and "\n" not in str(info.value)
    lat = lattice_of(sheet_mesh(4, 4, z=lambda x, y: 0.2 * x), 4)
    assert not lat.closed and lat.cell_count > 0
