"""Acting on a fit's result and targets: Show / Hide Fit Error (fixed tolerance scale, viewport
shading switched and put back), Add Current Frame (one target, in the cache range, one per
frame), Jump to Target Frame, and Revert keeping or removing the bake."""

from __future__ import annotations

import json
from pathlib import Path

import bpy
import numpy as np
import pytest
from addon_scenes import (
    add_targets_from_blender,
    addon_module,
    clamped_cloth,
    model_trajectory,
    modifier_stack,
    modifier_values,
    select,
    target_positions,
)
from blender_ref import cloth_scene
from footage_scenes import bind_all, footage_scene
from result_layout import Layout, drawn, labels, operators

error_ramp = addon_module("scene.error_ramp")
error_overlay = addon_module("scene.error_overlay")
staleness = addon_module("scene.staleness")
result_ui = addon_module("ui.result_ui")

TRUTH = {"tension_stiffness": 40.0, "compression_stiffness": 40.0, "bending_stiffness": 1.0}


def fitted() -> bpy.types.Object:
    """A small clamped sheet fitted (converged, applied) to one target at frame 8."""
    bpy.context.scene.frame_end = 8
    ob = clamped_cloth(n=6, frame_end=8)
    add_targets_from_blender(ob, TRUTH, [8])
    select([ob], ob)
    assert bpy.ops.object.fit_to_target() == {"FINISHED"}
    assert json.loads(ob.fit_to_target.result_json)["outcome"] == "converged"
    return ob


def error_colors(ob: bpy.types.Object) -> np.ndarray:
    attr = ob.data.color_attributes[error_overlay.ERROR_ATTRIBUTE]
    assert (attr.domain, attr.data_type) == ("POINT", "FLOAT_COLOR")
    colors = np.empty(len(ob.data.vertices) * 4, dtype=np.float32)
    attr.data.foreach_get("color", colors)
    return colors.reshape(-1, 4)


def viewport_shading() -> list[tuple[str, str]]:
    return [
        (area.spaces.active.shading.type, area.spaces.active.shading.color_type)
        for window in bpy.context.window_manager.windows
        for area in window.screen.areas
        if area.type == "VIEW_3D"
    ]


def test_the_ramp_is_fixed_to_the_tolerance() -> None:
    tolerance = 2e-4
    ratios = np.array([0.0, 1e-3, 1.0, np.sqrt(3.0), 3.0, np.sqrt(30.0), 10.0, 1e3, np.inf, np.nan])
    rgba = error_ramp.error_ramp(ratios * tolerance, tolerance)
    assert rgba.shape == (10, 4) and rgba.dtype == np.float32
    np.testing.assert_allclose(rgba[:3], [error_ramp.GREEN] * 3)
    np.testing.assert_allclose(rgba[3], [0.5, 1.0, 0.0, 1.0], atol=1e-6)  # halfway to yellow (log scale)
    np.testing.assert_allclose(rgba[4], error_ramp.YELLOW, atol=1e-6)
    np.testing.assert_allclose(rgba[5], [1.0, 0.5, 0.0, 1.0], atol=1e-6)  # halfway to red
    np.testing.assert_allclose(rgba[6:9], [error_ramp.RED] * 3, atol=1e-6)
    np.testing.assert_allclose(rgba[9], error_ramp.NOT_COMPARED)
    with pytest.raises(ValueError, match="positive"):
        error_ramp.error_ramp(ratios, 0.0)


def test_show_fit_error_green_when_matched_red_when_not_and_hide_puts_it_back() -> None:
    ob = fitted()
    record = json.loads(ob.fit_to_target.result_json)
    screen = bpy.context.window_manager.windows[0].screen
    views = [a for a in screen.areas if a.type == "VIEW_3D"]
    views[0].spaces.active.shading.type = "MATERIAL"  # the artist's shading, to be put back
    before = viewport_shading()
    ob.data.color_attributes.new("Paint", "BYTE_COLOR", "CORNER")
    ob.data.color_attributes.active_color = ob.data.color_attributes["Paint"]
    assert drawn(result_ui.draw_error_legend, ob, record)[1][0][1] == "object.fit_to_target_show_error"

    bpy.context.scene.frame_set(8)
    assert bpy.ops.object.fit_to_target_show_error() == {"FINISHED"}
    # matched to a fraction of its tolerance: every vertex green, the tolerance the fit's
    assert np.all(error_colors(ob) == np.float32(error_ramp.GREEN))
    state = error_overlay.overlay_state(ob)
    assert state["frame"] == 8 and state["tolerance"] == record["tolerance_m"]
    assert state["max_error"] == pytest.approx(record["max_error_m"], rel=0.05)
    assert ob.data.color_attributes.active_color.name == error_overlay.ERROR_ATTRIBUTE
    assert viewport_shading() == [("SOLID", "VERTEX")] * len(before)
    shown, log = drawn(result_ui.draw_error_legend, ob, record)
    tolerance_mm = record["tolerance_m"] * 1e3
    assert labels(log)[0] == "Error at target frame 8"
    assert labels(log)[1:] == [
        f"Green: up to {tolerance_mm:.4g} mm (1x tolerance)",
        f"Yellow: at {3 * tolerance_mm:.4g} mm (3x tolerance)",
        f"Red: from {10 * tolerance_mm:.4g} mm (10x tolerance)",
    ]
    assert operators(log) == ["object.fit_to_target_show_error", "object.fit_to_target_hide_error"]

    # a stiffness far off: the free end misses the target by many tolerances
    mod = cloth_scene.find_cloth_modifier(ob)
    mod.settings.tension_stiffness = mod.settings.compression_stiffness = 5.0
    bpy.context.scene.frame_set(3)  # no target here: the nearest target frame is coloured
    assert bpy.ops.object.fit_to_target_show_error() == {"FINISHED"}
    colors = error_colors(ob)
    error = np.linalg.norm(model_trajectory(ob, 8)[-1] - target_positions(ob)[8], axis=1)
    expected = error_ramp.error_ramp(error, record["tolerance_m"])
    np.testing.assert_allclose(colors, expected, atol=2e-3)
    red = error >= 10 * record["tolerance_m"]
    assert red.sum() >= 6 and np.all(colors[red] == np.float32(error_ramp.RED))
    state = error_overlay.overlay_state(ob)
    assert (state["frame"], state["asked_frame"]) == (8, 3)
    legend = labels(drawn(result_ui.draw_error_legend, ob, record)[1])
    assert "Error at frame 8, the target frame nearest frame 3" in legend

    assert bpy.ops.object.fit_to_target_hide_error() == {"FINISHED"}
    assert error_overlay.ERROR_ATTRIBUTE not in ob.data.color_attributes
    assert ob.data.color_attributes.active_color.name == "Paint"
    assert viewport_shading() == before and before[0] == ("MATERIAL", "MATERIAL")
    assert ob.fit_to_target.error_overlay_json == ""
    with pytest.raises(RuntimeError, match="shows no fit error"):
        bpy.ops.object.fit_to_target_hide_error()


def test_show_fit_error_without_targets_is_refused_and_changes_nothing() -> None:
    ob = clamped_cloth(n=6, frame_end=8)
    select([ob], ob)
    shading = viewport_shading()
    with pytest.raises(RuntimeError, match="'Cloth' has no targets"):
        bpy.ops.object.fit_to_target_show_error()
    assert viewport_shading() == shading and not ob.data.color_attributes
    assert ob.fit_to_target.error_overlay_json == ""


def targets_of(ob: bpy.types.Object) -> list[tuple[str, int]]:
    return [(t.object.name, t.frame) for t in ob.fit_to_target.targets]


def test_add_current_frame_adds_exactly_one_target_in_the_cache_range() -> None:
    cloth = clamped_cloth(frame_end=24)
    first = clamped_cloth(name="Scan A", location=(2.0, 0.0, 0.0))
    second = clamped_cloth(name="Scan B", location=(4.0, 0.0, 0.0))
    scene = bpy.context.scene
    select([cloth, first], cloth)
    scene.frame_set(12)
    assert bpy.ops.object.fit_to_target_add_target() == {"FINISHED"}
    assert targets_of(cloth) == [("Scan A", 12)]

    select([cloth, first, second], cloth)
    scene.frame_set(16)
    with pytest.raises(RuntimeError, match="2 other meshes are selected") as refused:
        bpy.ops.object.fit_to_target_add_target()
    assert "'Scan A'" in str(refused.value) and "'Scan B'" in str(refused.value)
    assert "select only the target mesh" in str(refused.value)
    assert targets_of(cloth) == [("Scan A", 12)]

    select([cloth, second], cloth)
    for frame in (30, 1):  # after the cache end; the cache start is the rest state
        scene.frame_set(frame)
        with pytest.raises(RuntimeError, match=f"frame {frame} is outside the cloth cache range 1-24") as e:
            bpy.ops.object.fit_to_target_add_target()
        assert "frames 2-24" in str(e.value) and "Physics > Cloth > Cache" in str(e.value)
    scene.frame_set(12)
    with pytest.raises(RuntimeError, match="already has a target at frame 12 \\('Scan A'\\)"):
        bpy.ops.object.fit_to_target_add_target()
    assert targets_of(cloth) == [("Scan A", 12)]
    scene.frame_set(20)
    assert bpy.ops.object.fit_to_target_add_target() == {"FINISHED"}
    assert targets_of(cloth) == [("Scan A", 12), ("Scan B", 20)]

    # Jump to Target Frame
    assert bpy.ops.object.fit_to_target_jump_to_target(index=0) == {"FINISHED"}
    assert scene.frame_current == 12 and cloth.fit_to_target.active_target_index == 0
    assert bpy.ops.object.fit_to_target_jump_to_target(index=1) == {"FINISHED"}
    assert scene.frame_current == 20 and cloth.fit_to_target.active_target_index == 1
    with pytest.raises(RuntimeError, match="No target 3: the active object has 2 target"):
        bpy.ops.object.fit_to_target_jump_to_target(index=2)
    assert scene.frame_current == 20
    log: list = []
    result_ui.draw_jump_button(Layout(log), 1)
    assert log == [
        ("operator", "object.fit_to_target_jump_to_target", "", "TIME"),
        ("set", "object.fit_to_target_jump_to_target", "index", 1),
    ]


@pytest.mark.parametrize("remove_bake", [False, True])
def test_revert_keeps_or_removes_the_bake(remove_bake: bool) -> None:
    ob = fitted()
    before = json.loads(ob.fit_to_target.previous_values_json)
    assert bpy.ops.object.fit_to_target_bake() == {"FINISHED"}
    baked_stack = modifier_stack(ob)
    assert [m[1] for m in baked_stack] == ["CLOTH", "MESH_CACHE"]

    if remove_bake:
        assert bpy.ops.object.fit_to_target_revert(remove_bake=True) == {"FINISHED"}
    else:  # what the panel's button calls (headless, the dialog runs with its defaults)
        assert bpy.ops.object.fit_to_target_revert("INVOKE_DEFAULT") == {"FINISHED"}
    values = modifier_values(ob)
    assert {k: values[k] for k in before} == before  # bit for bit
    assert not ob.fit_to_target.applied
    if remove_bake:
        assert [m[1] for m in modifier_stack(ob)] == ["CLOTH"] and ob.fit_to_target.bake_json == ""
        assert modifier_stack(ob)[0][2:] == (True, True)  # the cloth plays again
    else:
        assert modifier_stack(ob) == baked_stack and ob.fit_to_target.bake_json


def test_footage_targets_colour_each_tracked_vertex_by_its_track(tmp_path: Path) -> None:
    """Tracks as targets: each tracked vertex by its track's pixel error on the pixel tolerance
    (1 px when none is set), the others grey; a marker moved makes the result out of date."""
    scene = footage_scene(tmp_path)
    cloth = scene["cloth"]
    bind_all(cloth)
    fingerprint = staleness.fit_fingerprint(cloth)
    assert bpy.ops.object.fit_to_target_show_error() == {"FINISHED"}
    state = error_overlay.overlay_state(cloth)
    assert state["frame"] is None and state["unit"] == "px" and state["tolerance"] == 1.0
    colors = error_colors(cloth)
    tracked = sorted(
        {row.triangle[int(np.argmax(row.barycentric))] for row in cloth.fit_to_target.bindings if row.use}
    )
    grey = np.all(colors == np.float32(error_ramp.NOT_COMPARED), axis=1)
    assert sorted(np.flatnonzero(~grey)) == tracked
    # Blender's defaults are far from the footage's cloth: its tracks are off by many pixels
    assert np.all(colors[tracked] == np.float32(error_ramp.RED), axis=1).sum() >= len(tracked) // 2
    legend = labels(drawn(result_ui.draw_error_legend, cloth, None)[1])
    assert legend[-3:] == [
        "Green: up to 1 px (1x tolerance)",
        "Yellow: at 3 px (3x tolerance)",
        "Red: from 10 px (10x tolerance)",
    ]

    track = scene["clip"].tracking.tracks[0]
    track.markers[3].co.x += 0.01
    scene["clip"].update_tag()
    bpy.context.view_layer.update()
    now = staleness.fit_fingerprint(cloth)
    assert [p for p in staleness.PARTS if now[p] != fingerprint[p]] == ["targets"]
