"""The model's cloth self-collision (``self_collision.py``) among Collision objects against
Blender's own cloth (bpy 5.0.1), 60 frames in float64 from the add-on's exported inputs, on
the scenes of ``self_collision_scenes``: a sheet folding onto itself on the ground, a
pleated curtain pushed together by a moving plate, a sleeve collapsing on the ground.

Where Blender's own result moves by less than 1 % of the motion when the cloth starts 1 µm
higher (the sleeve), the model follows it to within 1 % of the motion; where it moves more
(the fold lands on the ground and then on itself; the curtain's pleats buckle between the
walls), the model stays within 1.5 times that spread. In every scene the cloth meets itself
over most of the frames (counted in Blender's result), and the same model with
self-collision off lets it pass through itself and ends several times further away."""

from __future__ import annotations

import functools
import importlib

import bpy
import numpy as np
from blender_ref import ClothMesh, addon_package
from collision_scenes import FRAMES, export_problem_inputs, run_blender_cloth
from self_collision_scenes import SCENES

simulator = importlib.import_module(f"{addon_package().__name__}.warp_core.models.blender_cloth.simulator")


def _point_triangle_distance(p: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Distance from points ``p`` to triangles ``abc`` (broadcast over leading axes),
    through the closest point of each triangle (Ericson's regions)."""

    def dot(u: np.ndarray, w: np.ndarray) -> np.ndarray:
        return np.einsum("...i,...i->...", u, w)

    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = dot(ab, ap), dot(ac, ap)
    bp, cp = p - b, p - c
    d3, d4 = dot(ab, bp), dot(ac, bp)
    d5, d6 = dot(ab, cp), dot(ac, cp)
    va = d3 * d6 - d5 * d4
    vb = d5 * d2 - d1 * d6
    vc = d1 * d4 - d3 * d2
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = va + vb + vc
        v = vb / denom
        w = vc / denom
        closest = a + ab * v[..., None] + ac * w[..., None]  # inside the face
        t_ab = d1 / (d1 - d3)
        t_ac = d2 / (d2 - d6)
        t_bc = (d4 - d3) / ((d4 - d3) + (d5 - d6))
    regions = [
        (vc <= 0) & (d1 >= 0) & (d3 <= 0), a + ab * t_ab[..., None],
        (vb <= 0) & (d2 >= 0) & (d6 <= 0), a + ac * t_ac[..., None],
        (va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0), b + (c - b) * t_bc[..., None],
        (d1 <= 0) & (d2 <= 0), a,
        (d3 >= 0) & (d4 <= d3), b,
        (d6 >= 0) & (d5 <= d6), c,
    ]  # fmt: skip
    for mask, point in zip(regions[0::2], regions[1::2], strict=True):
        closest = np.where(mask[..., None], point, closest)
    return np.linalg.norm(p - closest, axis=-1)


def self_contacts(mesh: ClothMesh, positions: np.ndarray, distance: float) -> np.ndarray:
    """Per frame, the pairs of the cloth's triangles that share no vertex (the pairs
    Blender's self collision tests) with a corner of one nearer than ``distance`` to the
    other."""
    tris = mesh.triangles()
    incidence = np.zeros((len(tris), mesh.vertex_count), np.int32)
    np.put_along_axis(incidence, tris.astype(np.int64), 1, axis=1)
    apart = np.triu(incidence @ incidence.T == 0)  # each pair once
    counts = []
    for x in positions:
        # (N, T): each vertex to each triangle; then (T, T): the nearest corner of one to the other
        d = _point_triangle_distance(
            x[:, None, :], x[tris[:, 0]][None], x[tris[:, 1]][None], x[tris[:, 2]][None]
        )
        near = d[tris].min(axis=1)
        counts.append(int((apart & (np.minimum(near, near.T) < distance)).sum()))
    return np.asarray(counts)


def blender_run(name: str, nudge_m: float = 0.0) -> tuple[bpy.types.Scene, bpy.types.Object, np.ndarray]:
    """The scene ``name`` built afresh (the cloth ``nudge_m`` higher) and Blender's result,
    (FRAMES, N, 3) from the start frame."""
    scene, ob = SCENES[name]()
    ob.location.z += nudge_m
    return scene, ob, run_blender_cloth(scene, ob)


@functools.cache
def comparison(name: str) -> dict[str, float]:
    """Largest vertex distance to Blender's result over the frames as a share of Blender's
    largest displacement (``motion``), with the model's self-collision on and off;
    Blender's own such distance to its run started 1 µm higher (``spread``); and, in
    Blender's result, the frames with triangle pairs in self contact (within twice the
    self distance, as ``self_contacts`` counts them), the first such frame and the most
    such pairs in one frame."""
    _, _, nudged = blender_run(name, 1e-6)
    scene, ob, blender = blender_run(name)  # left built for the export
    mesh, params, goals = export_problem_inputs(scene, ob)
    # the export carries the colliders and the self-collision settings
    assert params.use_self_collision and params.colliders, params
    motion = float(np.linalg.norm(blender - blender[0], axis=2).max())
    out: dict[str, float] = {"motion": motion}
    for on in (True, False):
        sim = simulator.ClothSimulator(mesh, params.replace(use_self_collision=on), precision="float64")
        ours = sim.rollout(FRAMES, goals=goals).numpy()
        out["on" if on else "off"] = float(np.linalg.norm(ours - blender, axis=2).max()) / motion
    out["spread"] = float(np.linalg.norm(nudged - blender, axis=2).max()) / motion
    contacts = self_contacts(mesh, blender, 2.0 * params.self_distance_min)
    out["contact_frames"] = int((contacts > 0).sum())
    out["first_contact"] = 1 + int(np.flatnonzero(contacts)[0]) if contacts.any() else -1  # cache from 1
    out["contact_pairs"] = int(contacts.max())
    return out


def test_sleeve_collapsing_on_the_ground_follows_blender() -> None:
    # measured: 4.1e-3 of 0.33 m with self-collision, Blender's own 1 µm spread 1.9e-3;
    # without self-collision 7.5e-2 (18x: the upper wall falls through the lower one onto
    # the ground); self contacts from frame 11 on, in 50 of the 60 frames, up to 626 pairs
    # of its 264 triangles. Other sleeves measured 0.4 to 1.04 times Blender's spread
    # (radius 12 to 18 cm, lowest line 3 to 15 cm up; 1.8e-2 of the motion at 12 cm, where
    # the spread is 1.7e-2)
    c = comparison("sleeve_collapses_on_ground")
    assert c["on"] <= 1e-2, c
    assert c["off"] >= 10.0 * c["on"], c
    assert c["contact_frames"] >= 40 and c["contact_pairs"] >= 300, c


def test_sheet_folding_onto_itself_on_the_ground_stays_within_blenders_own_spread() -> None:
    # measured: 1.25e-2 of 0.50 m with self-collision, Blender's own 1 µm spread 1.98e-2;
    # without self-collision 0.10 (8.1x: the raised half falls through the lying one onto
    # the ground); self contacts from frame 7 on, in 54 of the 60 frames, up to 622 pairs
    # of its 196 triangles. Other folds measured 0.3 to 1.8 times Blender's spread (angles
    # 100 to 150 degrees, drops from 3.6 to 30 cm); at 100 degrees, 1.7, the model's runs
    # started up to 0.1 mm higher ended 1.6 to 14 % of the motion from Blender's, and
    # Blender's own 1.6 to 3.6 %. The 1 µm spread leaves out Blender's float32 rounding,
    # which settles ties on the flat landing (a float32 model follows it there)
    c = comparison("sheet_folds_on_ground")
    assert c["spread"] > 1e-2, c  # else the 1 % bound would apply
    assert c["on"] <= 1.5 * c["spread"], c
    assert c["off"] >= 5.0 * c["on"], c
    assert c["contact_frames"] >= 40 and c["contact_pairs"] >= 300, c


def test_curtain_pushed_into_folds_stays_within_blenders_own_spread() -> None:
    # measured: 21 % of 0.68 m with self-collision, Blender's own 1 µm spread 28 % (the
    # pleats buckle between the walls and ride up the plate); without self-collision 75 %
    # (3.5x: the pleats pass through each other); self contacts from frame 14 on, in 47 of
    # the 60 frames, up to 1055 pairs of its 270 triangles. Other walls, pleats and plates
    # (walls 60 to 100 mm out, pleats 20 to 40 mm, the plate stopping 0 to 0.3 m from the
    # middle, its top 0.6 to 1.1 m up) measured 0.7 to 1.6 times Blender's spread; without
    # the walls, 0.8 (a rod, the curtain swung aside) and 2.2 (a plate 0.6 m deep, the
    # curtain's foot shoved up it)
    c = comparison("curtain_pushed_together")
    assert c["spread"] > 1e-2, c
    assert c["on"] <= 1.5 * c["spread"], c
    assert c["off"] >= 2.5 * c["on"], c
    assert c["contact_frames"] >= 35 and c["contact_pairs"] >= 500, c
