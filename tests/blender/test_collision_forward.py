"""The model's object collisions against Blender's own cloth (bpy 5.0.1) on the scenes of
``collision_scenes``, 60 frames from the add-on's exported inputs.

Where the cloth comes to rest on a collider, or a collider lifts it, the model follows
Blender's result to within 1 % of the motion. Where it slides off edges or a curved top, or
a collider pushes it about at collision quality 2, contacts at equal distances decide where
the impulses go, and Blender's own result moves by several per cent of the motion when the
cloth starts 1 µm higher: there the model must agree up to the first contacts and stay
within a few times that spread of Blender's own."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from blender_ref import addon_package
from collision_scenes import blender_nudged, collision_case

simulator = importlib.import_module(f"{addon_package().__name__}.warp_core.models.blender_cloth.simulator")


def compare(name: str) -> dict[str, float]:
    """Largest vertex distance to Blender's result over the frames (share of Blender's
    largest displacement), the motion, and the first frame with contacts."""
    mesh, params, goals, blender = collision_case(name)
    rollout = simulator.ClothSimulator(mesh, params, precision="float64").rollout(len(blender), goals=goals)
    motion = float(np.linalg.norm(blender - blender[0], axis=2).max())
    error = np.linalg.norm(rollout.numpy() - blender, axis=2).max()
    return {
        "relative": float(error) / motion,
        "motion": motion,
        "first_contact": rollout.extras["contacts"]["frames"][0],
    }


@pytest.mark.parametrize(
    ("name", "limit"),
    [
        ("sheet_lands_on_cube", 1e-2),  # measured 3.1e-3 of 0.17 m
        ("moving_plane", 1e-2),  # measured 1.2e-3 of 0.37 m
        ("pinned_over_sphere", 1e-2),  # measured 2.8e-3 of 0.45 m
        ("deforming_collider_quality_1", 1e-2),  # measured 4.5e-3 of 0.32 m
    ],
)
def test_model_follows_blender_where_the_cloth_rests_or_is_lifted(name: str, limit: float) -> None:
    c = compare(name)
    assert c["relative"] <= limit, (name, c["relative"])


@pytest.mark.parametrize(
    ("name", "factor"),
    [
        # measured (model vs Blender, Blender vs itself started 1 um higher, largest distance
        # as a share of the motion): 3.3 % and 6.3 %; 26 % and 25 %; 11 % and 6.2 %; 12 % and 19 %
        ("sheet_on_cube", 2.5),
        ("drape_on_sphere", 2.5),
        ("drop_on_sphere", 2.5),
        ("deforming_collider", 2.5),
    ],
)
def test_model_follows_blender_up_to_blenders_own_sensitivity_where_contacts_decide(
    name: str, factor: float
) -> None:
    """Within ``factor`` times the largest distance between Blender's result and Blender's
    result with the cloth started 1 µm higher (or 0.1 % of the motion, if larger)."""
    c = compare(name)
    _, _, _, blender = collision_case(name)
    own = float(np.linalg.norm(blender_nudged(name) - blender, axis=2).max()) / c["motion"]
    assert c["first_contact"] >= 3  # the sheet falls or swings a while first
    assert c["relative"] <= factor * max(own, 1e-3), (name, c["relative"], own)
