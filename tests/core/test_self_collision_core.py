"""Self collisions in the model (Blender's cloth self-collision, ``self_collision.py``):
physical checks on one mesh of two layers (a pinned sheet, a free one 5 cm above), the
stage's bookkeeping (graphs and kernel-by-kernel runs agree bit for bit, so do reruns, more
partners than room gives the same result, the self-collision group and the off switch
leave the cloth falling through), and alongside a collider. Blender's own self-collision
is compared in tests/blender/test_self_collision.py."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from warp_core.mesh import ClothMesh, grid_mesh
from warp_core.models.blender_cloth import self_collision as self_collision_module
from warp_core.models.blender_cloth.colliders import ClothCollider
from warp_core.models.blender_cloth.params import ClothParams
from warp_core.models.blender_cloth.simulator import ClothSimulator

FRAMES = 20
N = 6  # vertices per side of each layer


def two_layers(gap: float = 0.05) -> ClothMesh:
    """A pinned 6 x 6 sheet of 1 m (vertices 0..35), and a free one ``gap`` above it."""
    sheet = grid_mesh(N, N, 1.0, 1.0)
    polygons = [p.tolist() for p in sheet.polygons()] + [(p + N * N).tolist() for p in sheet.polygons()]
    vertices = np.concatenate([sheet.vertices, sheet.vertices + [0.0, 0.0, gap]])
    weights = np.concatenate([np.ones(N * N), np.zeros(N * N)])
    return ClothMesh.from_polygons(vertices, polygons, pin_weights=weights)


def run(params: ClothParams, graphs: bool = True, precision: str = "float64") -> np.ndarray:
    sim = ClothSimulator(two_layers(), params, precision=precision)
    sim.graphs_enabled = graphs
    return sim.rollout(1 + FRAMES).numpy()


def test_free_sheet_rests_on_the_pinned_one_in_the_self_band():
    params = ClothParams(use_self_collision=True)
    gap = run(params)[-1, N * N :, 2]
    band = 2.0 * params.self_distance_min
    assert gap.min() > 0.8 * band and gap.max() < band, gap
    fallen = run(ClothParams())[-1, N * N :, 2]
    assert fallen.max() < -0.3  # without self collisions it falls through


def test_excluded_free_sheet_falls_through():
    params = ClothParams(use_self_collision=True, self_collision_excluded=tuple(range(N * N, 2 * N * N)))
    assert run(params)[-1, N * N :, 2].max() < -0.3


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_graphs_kernel_launches_and_reruns_agree_bit_for_bit(precision: str):
    params = ClothParams(use_self_collision=True, collision_quality=3)
    a = run(params, graphs=True, precision=precision)
    b = run(params, graphs=False, precision=precision)
    c = run(params, graphs=True, precision=precision)
    assert np.array_equal(a, b) and np.array_equal(a, c)


def test_more_partners_than_room_gives_the_same_result(monkeypatch):
    params = ClothParams(use_self_collision=True)
    wide = run(params)
    monkeypatch.setattr(self_collision_module, "DEFAULT_SLOTS", 1)
    narrow = run(params)
    assert np.array_equal(wide, narrow)


def test_self_collisions_alongside_a_collider():
    # a plane under both layers; the free sheet still rests on the pinned one
    h = 1.5
    corners = np.array([[-h, -h, -0.1], [h, -h, -0.1], [h, h, -0.1], [-h, h, -0.1]])
    plane = ClothCollider("Plane", np.array([[0, 1, 2], [0, 2, 3]]), corners[None])
    both = run(ClothParams(use_self_collision=True, colliders=(plane,)))
    alone = run(ClothParams(use_self_collision=True))
    assert np.array_equal(both, alone)  # the plane is out of reach: the same launches


def test_tape_gradient_is_refused_with_self_collisions():
    sim = ClothSimulator(two_layers(), ClothParams(use_self_collision=True), precision="float64")
    with wp.Tape(), pytest.raises(ValueError, match="self collisions have no tape gradient"):
        sim.rollout(3)


def test_settings_round_trip_with_self_collisions():
    params = ClothParams(use_self_collision=True, self_friction=2.0, self_collision_excluded=(1, 2))
    assert ClothParams.from_dict(params.as_dict()) == params


def test_self_contacts_are_probed_before_a_fit_calls_them_a_match():
    """Self contacts may decide the motion as collider contacts do: the fit's start-gap probe
    (``verdict.sensitivity``) runs on them, and the probe's shifted start moves the resting
    sheet by far less than its band (measured 3.7e-7 m for the 1e-6 m shift: it rests, it
    does not slide off)."""
    params = ClothParams(use_self_collision=True)
    sim = ClothSimulator(two_layers(), params, precision="float64")
    assert sim.contact_probe and not ClothSimulator(two_layers(), ClothParams()).contact_probe
    x = sim.rollout(1 + FRAMES, [1 + FRAMES]).numpy()
    shifted = sim.rollout_shifted(np.array([0.0, 0.0, 1e-6]), 1 + FRAMES, [1 + FRAMES], None).numpy()
    moved = np.abs(shifted - x).max()
    assert 0.0 < moved < 1e-3 * params.self_distance_min, moved
