"""The model's object collisions against Blender's own cloth (bpy 5.0.1) on the scenes of
``collision_scenes``, 60 frames from the add-on's exported inputs.

Where the cloth comes to rest on a collider, or a collider lifts it, the model follows
Blender's result to within 1 % of the motion. Where it slides off edges or a curved top,
Blender's own collision response is discontinuous (closest features at equal distance
decide where the impulse goes), so a change in the last bit moves the result by centimetres:
there the model must agree up to the first contacts and stay within a few times its own
float32-vs-float64 spread, the scene's rounding sensitivity."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from blender_ref import addon_package
from collision_scenes import collision_case

simulator = importlib.import_module(f"{addon_package().__name__}.warp_core.models.blender_cloth.simulator")


def compare(name: str) -> dict[str, float]:
    """Largest vertex distance to Blender's result over the frames (share of Blender's
    largest displacement), per frame, and the model's own float32-vs-float64 spread."""
    mesh, params, goals, blender = collision_case(name)
    frames = len(blender)
    runs = {}
    for precision in ("float64", "float32"):
        sim = simulator.ClothSimulator(mesh, params, precision=precision)
        rollout = sim.rollout(frames, goals=goals)
        runs[precision] = rollout.numpy()
        if precision == "float64":
            first_contact = rollout.extras["contacts"]["frames"][0]
    motion = float(np.linalg.norm(blender - blender[0], axis=2).max())
    error = np.linalg.norm(runs["float64"] - blender, axis=2).max(axis=1)
    spread = np.linalg.norm(runs["float32"] - runs["float64"], axis=2).max(axis=1)
    return {
        "relative": float(error.max()) / motion,
        "error": error,
        "spread": float(spread.max()),
        "spread_per_frame": spread,
        "motion": motion,
        "first_contact": first_contact,
    }


@pytest.mark.parametrize(
    ("name", "limit"),
    [
        ("moving_plane", 1e-2),  # measured 1.2e-3 of 0.37 m
        ("pinned_over_sphere", 1e-2),  # measured 1.8e-3 of 0.45 m
        ("deforming_collider_quality_1", 1e-2),  # measured 4.5e-3 of 0.32 m
    ],
)
def test_model_follows_blender_where_the_cloth_rests_or_is_lifted(name: str, limit: float) -> None:
    c = compare(name)
    assert c["relative"] <= limit, (name, c["relative"])


@pytest.mark.parametrize(
    ("name", "factor"),
    [
        ("sheet_on_cube", 3.0),  # measured 1.9x; the whole run 3.3 % of the motion, the spread 1.8 %
        ("drape_on_sphere", 3.0),  # measured 1.5x; the whole run 26 % of the motion, the spread 27 %
    ],
)
def test_model_follows_blender_up_to_its_own_rounding_sensitivity_where_the_cloth_slides(
    name: str, factor: float
) -> None:
    """At every frame within ``factor`` times the largest float32-vs-float64 spread of the
    model up to that frame (or 0.1 % of the motion before any)."""
    c = compare(name)
    floor = np.maximum(np.maximum.accumulate(c["spread_per_frame"]), 1e-3 * c["motion"])
    ratio = float((c["error"] / floor).max())
    assert c["first_contact"] >= 5  # the sheet falls a while first
    assert ratio <= factor, (name, ratio)
