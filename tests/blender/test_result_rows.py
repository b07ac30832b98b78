"""What the panel says about a fit's result: out of date after its inputs change (and not after
Apply, Revert or scrubbing), the loss curve (pixels, image, RMSE from the loss), what the
targets determine, and the start values a preset gave."""

from __future__ import annotations

import json
import time

import bpy
import numpy as np
import pytest
from addon_scenes import add_targets_from_blender, addon_module, clamped_cloth, select
from blender_ref import cloth_scene, grid_mesh
from result_layout import drawn, labels, operators

staleness = addon_module("scene.staleness")
loss_curve = addon_module("scene.loss_curve")
result_ui = addon_module("ui.result_ui")
presets = addon_module("presets")

TRUTH = {"tension_stiffness": 40.0, "compression_stiffness": 40.0, "bending_stiffness": 1.0}


def fitted() -> tuple[bpy.types.Object, bpy.types.Object]:
    """A small clamped sheet fitted (converged, applied) to one target made by Blender's cloth."""
    bpy.context.scene.frame_end = 8
    ob = clamped_cloth(n=6, frame_end=8)
    (target,) = add_targets_from_blender(ob, TRUTH, [8])
    select([ob], ob)
    assert bpy.ops.object.fit_to_target() == {"FINISHED"}
    assert ob.fit_to_target.applied
    return ob, target


def record_of(ob: bpy.types.Object) -> dict:
    return json.loads(ob.fit_to_target.result_json)


def changed(ob: bpy.types.Object) -> list[str]:
    """What the panel would find changed, after the depsgraph update Blender runs before a redraw."""
    bpy.context.view_layer.update()
    return staleness.changed_parts(ob, record_of(ob))


def test_out_of_date_follows_the_inputs_not_apply_revert_or_the_timeline() -> None:
    ob, target = fitted()
    record = record_of(ob)
    assert set(record["fingerprint"]) == set(staleness.PARTS)
    assert changed(ob) == []
    assert drawn(result_ui.draw_staleness, ob, record) == (False, [])

    # Apply and Revert write the modifier (and a bake switches it off): not an input
    assert bpy.ops.object.fit_to_target_revert() == {"FINISHED"}
    assert changed(ob) == []
    assert bpy.ops.object.fit_to_target_apply() == {"FINISHED"}
    assert changed(ob) == []
    bpy.context.scene.frame_set(5)
    assert changed(ob) == []

    saved = tuple(target.location)
    target.location.x += 0.01  # the target moved after the fit
    assert changed(ob) == ["targets"]
    shown, log = drawn(result_ui.draw_staleness, ob, record, 30)
    assert shown and all(entry[3] for entry in log)  # an alert
    assert " ".join(labels(log)) == "Out of date: targets changed \u2014 fit again"
    assert [entry[2] for entry in log] == ["ERROR", "BLANK1"]  # wrapped at 30 characters
    target.location = saved
    assert changed(ob) == []

    s = ob.fit_to_target
    s.loss = "SURFACE"
    assert changed(ob) == ["fit settings"]
    s.loss = "VERTEX"
    s.tolerance = 1e-3
    assert changed(ob) == ["fit settings"]
    s.tolerance = 0.0
    s.fit_bending_stiffness = False
    assert changed(ob) == ["fit settings"]
    s.fit_bending_stiffness = True
    s.max_iterations, s.device = 3, "cpu"  # how long and where, not what is matched
    assert changed(ob) == []

    mod = cloth_scene.find_cloth_modifier(ob)
    mod.point_cache.frame_end = 20
    assert changed(ob) == ["frame range"]
    mod.point_cache.frame_end = 8
    saved = tuple(ob.location)
    ob.location.z += 0.1
    assert changed(ob) == ["cloth motion"]
    ob.location = saved
    saved = tuple(ob.data.vertices[3].co)
    ob.data.vertices[3].co.z += 0.001
    assert changed(ob) == ["cloth mesh"]
    ob.data.vertices[3].co = saved
    assert changed(ob) == []
    item = s.targets.add()
    item.kind, item.object, item.frame = "OBJECT", target, 6
    assert changed(ob) == ["targets"]


def test_an_animated_target_counts_by_its_keys_not_the_current_frame() -> None:
    ob, target = fitted()
    target.keyframe_insert("location", frame=1)
    target.location.y += 0.2
    target.keyframe_insert("location", frame=8)
    fingerprint = staleness.fit_fingerprint(ob)
    for frame in (1, 4, 8):
        bpy.context.scene.frame_set(frame)
        bpy.context.view_layer.update()
        assert staleness.fit_fingerprint(ob) == fingerprint, frame
    fcurve = next(f for f in target.animation_data.action.layers[0].strips[0].channelbags[0].fcurves)
    fcurve.keyframe_points[1].co.y += 0.05
    target.update_tag()
    bpy.context.view_layer.update()
    now = staleness.fit_fingerprint(ob)
    assert [p for p in staleness.PARTS if now[p] != fingerprint[p]] == ["targets"]


def test_a_large_target_keeps_the_check_cheap() -> None:
    """A 65,536-vertex target: its mesh is read once after each edit of it (milliseconds), then
    cached; moving it, or another object, reads only transforms."""
    ob = clamped_cloth(n=6, frame_end=8)
    mesh = grid_mesh(256, 256, 1.0, 1.0)
    me = bpy.data.meshes.new("Scan")
    me.from_pydata(mesh.vertices.tolist(), [], [p.tolist() for p in mesh.polygons()])
    scan = bpy.data.objects.new("Scan", me)
    bpy.context.scene.collection.objects.link(scan)
    other = bpy.data.objects.new("Other", None)
    bpy.context.scene.collection.objects.link(other)
    item = ob.fit_to_target.targets.add()
    item.kind, item.object, item.frame = "OBJECT", scan, 8
    assert len(scan.data.vertices) == 65536
    bpy.context.view_layer.update()

    def seconds() -> float:
        t0 = time.perf_counter()
        staleness.fit_fingerprint(ob)
        return time.perf_counter() - t0

    staleness.forget()
    first = seconds()
    before = staleness.fit_fingerprint(ob)["targets"]
    cached = min(seconds() for _ in range(5))
    other.location.x = 1.0
    bpy.context.view_layer.update()
    after_other = seconds()
    scan.location.x = 1.0
    bpy.context.view_layer.update()
    after_move = seconds()  # its transform read again, not its mesh
    moved = staleness.fit_fingerprint(ob)["targets"]
    scan.data.vertices[100].co.z = 0.01
    bpy.context.view_layer.update()
    after_edit = seconds()
    edited = staleness.fit_fingerprint(ob)["targets"]
    print(
        f"fingerprint with a 65,536-vertex target: {first * 1e3:.1f} ms uncached, {cached * 1e3:.2f} ms "
        f"cached, {after_other * 1e3:.2f} ms after another object moved, {after_move * 1e3:.2f} ms after "
        f"the target moved, {after_edit * 1e3:.1f} ms after a vertex of it moved"
    )
    assert len({before, moved, edited}) == 3
    assert first < 0.25 and after_edit < 0.25
    assert cached < 0.005 and after_other < 0.005 and after_move < 0.005


def test_curve_pixels_draw_a_descending_line_over_the_tolerance() -> None:
    values, tolerance = [1e-2, 1e-3, 1e-4, 1e-5], 1e-4
    pixels = loss_curve.curve_pixels(values, tolerance, 200, 100)
    assert pixels.shape == (100, 200, 4) and pixels.dtype == np.float32
    curve = np.all(np.abs(pixels - np.float32(loss_curve.CURVE_RGBA)) < 1e-6, axis=2)
    columns = np.flatnonzero(curve.any(axis=0))
    rows = np.array([np.flatnonzero(curve[:, c]).mean() for c in columns])
    # row 0 is the bottom: the first (largest) RMSE near the top, the line falling all along
    assert rows[0] > 80 and rows[-1] < 20
    assert np.all(np.diff(rows) <= 1.0), rows
    # the points are a decade apart each: equally spaced rows on the log scale
    left, right = columns.min() + 2, columns.max() - 2  # the end points' dots are 2 px wide
    at = [rows[np.argmin(np.abs(columns - (left + k * (right - left) / 3)))] for k in range(4)]
    assert np.allclose(np.diff(at), np.diff(at).mean(), atol=1.5), at
    # the tolerance's dashed line: one row, where the curve passes 1e-4 (the third point)
    line = np.all(np.abs(pixels - np.float32(loss_curve.TOLERANCE_RGBA)) < 1e-6, axis=2)
    (line_row,) = np.flatnonzero(line.sum(axis=1) > 50)
    assert abs(line_row - at[2]) <= 1.5
    assert 0.3 * 200 < line[line_row].sum() < 0.9 * 200  # dashed
    # no tolerance: no line; one value: a dot, no line
    assert not np.all(
        np.abs(loss_curve.curve_pixels(values, None, 200, 100) - np.float32(loss_curve.TOLERANCE_RGBA))
        < 1e-6,
        axis=2,
    ).any()
    single = loss_curve.curve_pixels([3e-3], 1e-3, 64, 32)
    assert np.all(np.abs(single - np.float32(loss_curve.CURVE_RGBA)) < 1e-6, axis=2).sum() == 25


def test_the_record_keeps_the_rmse_per_iteration_and_its_image() -> None:
    ob, _ = fitted()
    record = record_of(ob)
    history = record["rmse_history_m"]
    assert len(history) == len(record["loss_history"]) == record["iterations"] + 1
    # from the loss (0.5 * points * RMSE^2): the ends are the record's own RMSEs
    assert history[-1] == pytest.approx(record["rmse_m"], rel=1e-9)
    assert history[0] == pytest.approx(record["initial_rmse_m"], rel=1e-6)
    assert loss_curve.rmse_history(
        {k: v for k, v in record.items() if k != "rmse_history_m"}
    ) == pytest.approx(history)

    image = loss_curve.curve_image(ob)
    assert image is not None and image.name == "Cloth Fit Loss"
    assert not image.use_fake_user and image.packed_file is None
    width, height = loss_curve.IMAGE_SIZE
    pixels = np.empty(width * height * 4, dtype=np.float32)
    image.pixels.foreach_get(pixels)
    expected = loss_curve.curve_pixels(history, record["tolerance_m"], width, height).ravel()
    assert np.abs(pixels - expected).max() <= 1.0 / 255 + 1e-6
    assert tuple(image.preview.image_size) == loss_curve.PREVIEW_SIZE
    # updated in place, as a running fit does
    again = loss_curve.update_curve_image(ob, loss_curve.relative_rmse(record["loss_history"][:2]), None)
    assert again == image and len([i for i in bpy.data.images if i.get(loss_curve.IMAGE_TAG)]) == 1

    shown, log = drawn(result_ui.draw_loss_curve, ob, record)
    assert shown
    assert (
        f"RMSE {history[0] * 1e3:.4g} mm \u2192 {history[-1] * 1e3:.4g} mm "
        f"in {record['iterations']} iterations" in labels(log)
    )
    assert f"Tolerance {record['tolerance_m'] * 1e3:.4g} mm (the dashed line)" in labels(log)
    assert operators(log) == ["object.fit_to_target_show_loss_curve"]
    # gone (a file opened, an undo): the panel still says it, and the record draws it again
    bpy.data.images.remove(image)
    assert drawn(result_ui.draw_loss_curve, ob, record)[1] == log
    image = loss_curve.record_curve_image(ob)
    image.pixels.foreach_get(pixels)
    assert np.abs(pixels - expected).max() <= 1.0 / 255 + 1e-6
    # headless there is no window to open it in: a clear refusal, the image drawn anyway
    with pytest.raises(RuntimeError, match="open an Image Editor and pick image 'Cloth Fit Loss'"):
        bpy.ops.object.fit_to_target_show_loss_curve()
    # with an Image Editor open, it shows the curve there
    area = bpy.context.window_manager.windows[0].screen.areas[0]
    area.type = "IMAGE_EDITOR"
    assert bpy.ops.object.fit_to_target_show_loss_curve() == {"FINISHED"}
    assert area.spaces.active.image == image


def test_matched_ranges_and_undetermined_values() -> None:
    ob, _ = fitted()
    record = record_of(ob)
    by_name = {e["name"]: e for e in record["identifiability"]}
    tension = by_name["tension_stiffness"]
    low, high = (tension["value"] * f for f in tension["matched_range"])
    shown, log = drawn(result_ui.draw_matched, ob, record, 200)
    assert shown
    assert f"Tension Stiffness {tension['value']:.4g}: matched from {low:.4g} to {high:.4g}" in labels(log)

    record["undetermined"] = ["bending_stiffness"]
    record["params"]["bending_stiffness"] = 0.5
    shown, log = drawn(result_ui.draw_matched, ob, record, 200)
    assert "Bending Stiffness: the targets do not determine it (left at its start value 0.5)" in labels(log)
    assert not [t for t in labels(log) if t.startswith("Bending stiffness 0.5")]
    record["params"]["bending_stiffness"] = 0.73
    text = " ".join(labels(drawn(result_ui.draw_matched, ob, record, 30)[1]))
    assert "(0.5 \u2192 0.73, not to be trusted)" in text
    assert all(len(t) <= 30 for t in labels(drawn(result_ui.draw_matched, ob, record, 30)[1]))


def test_start_values_from_a_preset_are_shown_and_cleared() -> None:
    ob = clamped_cloth()
    bpy.context.view_layer.objects.active = ob
    assert drawn(result_ui.draw_start_values, ob, None) == (False, [])
    name = next(p.name for p in presets.all_presets() if p.model == "blender_cloth")
    assert bpy.ops.fit.preset_use_as_start(name=name) == {"FINISHED"}
    s = ob.fit_to_target
    assert s.start_values_json and s.start_values_name == name
    shown, log = drawn(result_ui.draw_start_values, ob, None)
    assert shown and labels(log) == [f"Fit starts from preset '{name}'"]
    assert operators(log) == ["object.fit_to_target_clear_start_values"]
    assert bpy.ops.object.fit_to_target_clear_start_values() == {"FINISHED"}
    assert s.start_values_json == "" and s.start_values_name == ""
    assert drawn(result_ui.draw_start_values, ob, None) == (False, [])
    with pytest.raises(RuntimeError, match="no start values to clear"):
        bpy.ops.object.fit_to_target_clear_start_values()


def test_a_shared_fit_member_follows_its_lead_settings() -> None:
    """A member of a shared fit ran with the lead's parameters and tolerance, not its own panel
    settings: it is not out of date for that, but is when the lead's settings change."""
    bpy.context.scene.frame_end = 8
    lead = clamped_cloth(name="Lead", n=6, frame_end=8)
    member = clamped_cloth(name="Member", n=6, frame_end=8, location=(2.0, 0.0, 1.0))
    for ob in (lead, member):
        add_targets_from_blender(ob, TRUTH, [8])
    member.fit_to_target.fit_tension_stiffness = False  # its own panel differs; the lead's decide
    select([lead, member], lead)
    assert bpy.ops.object.fit_to_target(shared=True) == {"FINISHED"}
    assert record_of(member).get("shared") and record_of(member)["fit"] == record_of(lead)["fit"]
    assert changed(lead) == [] and changed(member) == []
    lead.fit_to_target.tolerance = 1e-3
    assert changed(lead) == ["fit settings"] and changed(member) == ["fit settings"]
