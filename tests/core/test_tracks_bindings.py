"""Footage bindings refined on the surface they were bound to: the refinement never takes a
binding out of its triangle and the triangles across its edges (coordinates re-expressed in
the triangle it crosses into), a binding that moved far is named, and a track whose error its
binding explains is named as a binding problem, not as mistracked markers."""

from __future__ import annotations

import numpy as np
import pytest
from test_tracks_fit import FRAMES, hanging_sheet, look_at

from warp_core import ClothParams, ClothSimulator, grid_mesh
from warp_core.fit import FitProblem, FitSettings, fit
from warp_core.targets import Reprojection
from warp_core.tracks.binding import closest_surface_point
from warp_core.tracks.camera import Intrinsics, project
from warp_core.tracks.domain import DIRECTIONS, BindingDomain, triangle_step
from warp_core.tracks.targets import FootageTargets, TrackBinding

TRUTH = ClothParams(tension_stiffness=30.0, bending_stiffness=1.0)


def triangle_at(mesh, point: np.ndarray) -> tuple[tuple[int, int, int], np.ndarray]:
    """The mesh triangle holding ``point`` (on the flat sheet at rest) and its barycentrics."""
    k, bary, dist = closest_surface_point(point, mesh.vertices, mesh.triangles())
    assert dist < 1e-12
    return tuple(int(v) for v in mesh.triangles()[k]), bary


def domain_of(mesh, tri: tuple[int, int, int]) -> set[frozenset[int]]:
    """The triangle and every mesh triangle sharing an edge with it."""
    return {frozenset(tri)} | {frozenset(t) for t in mesh.triangles().tolist() if len(set(t) & set(tri)) == 2}


def pulled(domain: BindingDomain, rest: np.ndarray, target: np.ndarray):
    """Where the single binding of ``domain`` (on the flat sheet ``rest``) ends when it is
    solved as footage bindings are, for the squared distance of its point from ``target``."""

    def descend(at, mask):
        vertices, bary = at[0].copy(), at[1].copy()
        for _ in range(20):
            corners = rest[vertices[0]]
            jac = (DIRECTIONS @ corners).T  # d point / d step (3, 2)
            r = bary[0] @ corners - target
            step = triangle_step(bary, (jac.T @ jac)[None], (jac.T @ r)[None])
            bary = np.maximum(bary + step @ DIRECTIONS, 0.0)
            bary /= bary.sum()
        return vertices, bary

    def cost(at):
        return np.array([np.sum((at[1][0] @ rest[at[0][0]] - target) ** 2)])

    start = (domain.home.copy(), np.array([[1 / 3, 1 / 3, 1 / 3]]))
    vertices, bary = domain.solve(start, np.array([True]), descend, cost)
    return tuple(int(v) for v in vertices[0]), bary[0]


def test_a_binding_crosses_an_edge_into_the_neighbour_and_no_further() -> None:
    mesh = grid_mesh(6, 6, 1.0, 1.0)
    rest, tris = mesh.vertices, mesh.triangles()
    home, _ = triangle_at(mesh, np.array([0.02, 0.03, 0.0]))
    allowed = domain_of(mesh, home)
    domain = BindingDomain(np.array([home]), tris)
    assert {frozenset(t) for t in domain.reach(0)} | {frozenset(home)} == allowed
    # a target across an edge: the point goes there, expressed in that triangle's vertices
    for target in (np.array([0.02, 0.15, 0.0]), np.array([-0.13, 0.03, 0.0]), np.array([0.08, 0.03, 0.0])):
        assert frozenset(triangle_at(mesh, target)[0]) in allowed
        tri, bary = pulled(domain, rest, target)
        assert frozenset(tri) in allowed and frozenset(tri) != frozenset(home)
        assert bary.min() >= 0.0 and bary.sum() == pytest.approx(1.0)
        np.testing.assert_allclose(bary @ rest[list(tri)], target, atol=1e-12)
    # a target far off: the point stops on the domain's border, at the domain point nearest it
    ring = np.array([sorted(t) for t in allowed])
    far = (np.array([0.45, 0.4, 0.0]), np.array([-0.4, -0.3, 0.0]), np.array([0.02, 0.5, 0.0]))
    for target in (*far, np.array([0.02, -0.15, 0.0])):  # the last in a triangle sharing a corner
        tri, bary = pulled(domain, rest, target)
        assert frozenset(tri) in allowed and bary.min() >= 0.0
        _, _, nearest = closest_surface_point(target, rest, ring)
        assert np.linalg.norm(bary @ rest[list(tri)] - target) == pytest.approx(nearest, abs=1e-9)


def test_a_border_edge_is_a_wall_and_a_vertex_binding_stays() -> None:
    mesh = grid_mesh(4, 4, 1.0, 1.0)
    corner, _ = triangle_at(mesh, np.array([-0.45, -0.45, 0.0]) + np.array([0.02, 0.01, 0.0]))
    domain = BindingDomain(np.array([corner]), mesh.triangles())
    tri, bary = pulled(domain, mesh.vertices, np.array([-0.4, -0.9, 0.0]))  # beyond the -y border
    point = bary @ mesh.vertices[list(tri)]
    assert bary.min() >= 0.0 and point[1] == pytest.approx(-0.5, abs=1e-12)
    assert point[0] == pytest.approx(-0.4, abs=1e-9)  # slid along the border to the nearest point
    # a hand-picked vertex (one vertex three times) has no triangle to move in
    held = BindingDomain(np.array([[5, 5, 5]]), mesh.triangles())
    assert (
        held.reach(0) == []
        and held.across_edges(np.array([[5, 5, 5]]), np.eye(3)[:1], np.array([True])) == []
    )


def markers(
    mesh, x: np.ndarray, points: list[tuple[tuple[int, int, int], np.ndarray]], start_frame: bool = True
):
    """Noise-free markers of surface points (triangle, barycentric) at the start frame (the
    sheet at rest) and every frame of the rollout ``x``, seen by a circling camera."""
    intr = Intrinsics(width=640, height=480, focal_px=700.0, principal_px=(320.0, 240.0))
    frames = ([1] if start_frame else []) + FRAMES
    shapes = ([mesh.vertices] if start_frame else []) + list(x)
    cameras, marker_frame, marker_track, pixels = {}, [], [], []
    for f, positions in zip(frames, shapes, strict=True):
        angle = 0.03 * f
        cameras[f] = look_at(
            np.array([2.5 * np.sin(angle), -2.5 * np.cos(angle), 0.3]), np.array([0, 0, -0.3])
        )
        for k, (tri, bary) in enumerate(points):
            marker_frame.append(f)
            marker_track.append(k)
            pixels.append(project((bary @ positions[list(tri)])[None], cameras[f], intr)[0])
    return intr, cameras, np.array(marker_frame), np.array(marker_track), np.array(pixels)


def sheet_footage(shift: dict[int, tuple[int, np.ndarray]], jumps: dict[int, list[int]]):
    """A hanging sheet's markers of 8 points (track k at the centre of triangle 6k + 3); the
    tracks in ``shift`` are bound elsewhere (triangle index, barycentric), the markers of
    ``jumps`` (track -> marker numbers of that track) thrown 15 px off."""
    mesh = hanging_sheet()
    tris = mesh.triangles()
    x = ClothSimulator(mesh, TRUTH, precision="float64").simulate(max(FRAMES), FRAMES)
    truth = [(tuple(int(v) for v in tris[6 * k + 3]), np.full(3, 1 / 3)) for k in range(8)]
    intr, cameras, frame, track, pixels = markers(mesh, x, truth)
    for k, numbers in jumps.items():
        rows = np.flatnonzero(track == k)[numbers]
        pixels[rows] += np.array([15.0, -4.0])
    bindings = []
    for k, (tri, bary) in enumerate(truth):
        if k in shift:
            tri, bary = tuple(int(v) for v in tris[shift[k][0]]), shift[k][1]
        bindings.append(TrackBinding(f"track{k}", tri, tuple(bary)))
    targets = FootageTargets(intr, bindings, cameras, frame, track, pixels, np.ones(len(frame)))
    return mesh, x, targets


def test_refinement_keeps_each_binding_on_its_surface_and_says_how_far_it_moved() -> None:
    # track 0 bound in the triangle next to its own (the quad's other half), track 1 far off
    mesh, x, targets = sheet_footage({0: (2, np.full(3, 1 / 3)), 1: (15, np.full(3, 1 / 3))}, {})
    tris = mesh.triangles()
    loss = Reprojection(targets, FRAMES, 1.0, rest=(1, mesh.vertices), triangles=tris)
    refined = loss.track_bindings(x)
    for b in targets.bindings:
        moved = refined[b.track]
        assert min(moved["barycentric"]) >= 0.0, b.track
        assert frozenset(moved["triangle"]) in domain_of(mesh, b.vertices), b.track
    # across the edge into its true triangle: the true point, re-expressed there
    true_point = np.full(3, 1 / 3) @ mesh.vertices[tris[3]]
    got = np.asarray(refined["track0"]["barycentric"]) @ mesh.vertices[refined["track0"]["triangle"]]
    np.testing.assert_allclose(got, true_point, atol=1e-7)
    assert refined["track0"]["drift_m"] == pytest.approx(
        np.linalg.norm(true_point - np.full(3, 1 / 3) @ mesh.vertices[tris[2]]), rel=1e-6
    )
    # out of reach: on its domain's border, the rest of its error left for the report
    assert min(refined["track1"]["barycentric"]) == pytest.approx(0.0, abs=1e-12)
    assert loss.track_errors(x)["track1"] > 10.0 and loss.track_errors(x)["track0"] < 1e-4


def test_a_binding_problem_is_named_apart_from_mistracked_markers() -> None:
    # track 2 bound far from where its markers are, track 5 with three markers thrown off
    far_binding = {2: (27, np.full(3, 1 / 3))}
    mesh, x, targets = sheet_footage(far_binding, {5: [4, 7, 11]})
    problem = FitProblem(
        mesh, TRUTH, [], free_parameters=["tension_stiffness", "bending_stiffness"], tracks=targets
    )
    result = fit(problem, FitSettings(max_iterations=4, global_search=False))
    binding = [w for w in result.warnings if w.startswith("tracks off because of their bindings")]
    mistracked = [w for w in result.warnings if "markers are more than 6 px off" in w]
    moved = [w for w in result.warnings if w.startswith("bindings moved more than 3 %")]
    assert len(binding) == 1 and "'track2'" in binding[0] and "at the start frame" in binding[0]
    assert "'track5'" not in binding[0] and "bind it again" in binding[0]
    assert len(mistracked) == 1 and "'track5'" in mistracked[0] and "'track2'" not in mistracked[0]
    assert mistracked[0].startswith("3 of ") and "mute them" in mistracked[0]
    assert len(moved) == 1 and "'track2'" in moved[0] and "'track5'" not in moved[0]
    drift = result.track_bindings["track2"]["drift_m"]
    assert drift > 0.03 and all(min(b["barycentric"]) >= 0.0 for b in result.track_bindings.values())

    # without a marker at the start frame, what tells is that a binding elsewhere explains the track
    targets.marker_weight[(targets.marker_frame == 1) & (targets.marker_track == 2)] = 0.0
    loss = Reprojection(targets, FRAMES, 1.0, rest=(1, mesh.vertices), triangles=mesh.triangles())
    warnings = loss.track_warnings(x)
    binding = [w for w in warnings if w.startswith("tracks off because of their bindings")]
    assert len(binding) == 1 and "'track2'" in binding[0] and "bound elsewhere" in binding[0]
