"""Bad input: each case gives one clear report and changes nothing (modifier values, modifier
stack, fit state on the object, files next to the .blend)."""

from __future__ import annotations

import json
from pathlib import Path

import bpy
import numpy as np
import pytest
from addon_scenes import addon_module, bake, clamped_cloth, fit_request, prepare, snapshot
from blender_ref import ClothMesh, grid_mesh, make_cloth_object, pin_row_weights

bake_operators = addon_module("ui.bake_operators")


def _fit_error(ob_for_snapshot: bpy.types.Object | None, folder: Path | None) -> str:
    """Run the Fit operator expecting an error; check it is one line and nothing changed."""
    before = snapshot(ob_for_snapshot, folder) if ob_for_snapshot is not None else None
    with pytest.raises(RuntimeError) as info:
        bpy.ops.object.fit_to_target()
    text = str(info.value).strip()
    assert text.startswith("Error: ") and "\n" not in text, text
    if ob_for_snapshot is not None:
        assert snapshot(ob_for_snapshot, folder) == before
    return text.removeprefix("Error: ")


@pytest.fixture
def cloth(tmp_path: Path) -> tuple[bpy.types.Object, bpy.types.Object, Path]:
    """A saved 8x8 cloth (cache 1-20) and a same-topology target object at frame 10."""
    ob = clamped_cloth(frame_end=20)
    target = clamped_cloth(name="Target", location=(0.0, 0.0, 0.5))
    target.modifiers.clear()
    item = ob.fit_to_target.targets.add()
    item.kind, item.object, item.frame = "OBJECT", target, 10
    bpy.context.view_layer.objects.active = ob
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "scene.blend"))
    return bpy.data.objects["Cloth"], bpy.data.objects["Target"], tmp_path


def test_non_mesh_active_object() -> None:
    empty = bpy.data.objects.new("Empty", None)
    bpy.context.scene.collection.objects.link(empty)
    bpy.context.view_layer.objects.active = empty
    assert _fit_error(None, None) == "'Empty' is an empty object, not a mesh with a Cloth modifier"
    bpy.context.view_layer.objects.active = None
    assert _fit_error(None, None) == "No active object: select a mesh with a Cloth modifier"


def test_mesh_without_cloth_modifier(cloth) -> None:
    ob, target, folder = cloth
    bpy.context.view_layer.objects.active = target
    before = snapshot_plain(target)
    message = _fit_error(None, None)
    assert message == "'Target' has no Cloth modifier: add one in Properties > Physics"
    assert snapshot_plain(target) == before


def snapshot_plain(ob: bpy.types.Object) -> tuple:
    return ([(m.name, m.type) for m in ob.modifiers], ob.fit_to_target.result_json)


def test_no_targets(cloth) -> None:
    ob, _, folder = cloth
    ob.fit_to_target.targets.clear()
    message = _fit_error(ob, folder)
    assert message == "'Cloth' has no targets: select a target mesh and press Add Current Frame"


def test_target_vertex_count_differs_with_same_topology_loss(cloth) -> None:
    ob, target, folder = cloth
    small = clamped_cloth(name="Small", n=5, location=(0.0, 0.0, 0.5))
    small.modifiers.clear()
    ob.fit_to_target.targets[0].object = small
    message = _fit_error(ob, folder)
    assert message == (
        "target 'Small' at frame 10 has 25 vertices, the cloth has 64: a target of another topology "
        "needs the surface loss (Loss: Surface in the Solver panel)"
    )
    # the check is about the loss: with the surface loss the same target is accepted
    ob.fit_to_target.loss = "SURFACE"
    prepared = prepare.prepare_fit(bpy.context.scene, ob, fit_request.request_from_object(ob))
    assert prepared.problem.loss_kind == "surface" and len(prepared.problem.targets[0].positions) == 25


@pytest.mark.parametrize("frame", [1, 21, 300])
def test_target_frame_outside_cache_range(cloth, frame: int) -> None:
    ob, _, folder = cloth
    ob.fit_to_target.targets[0].frame = frame
    message = _fit_error(ob, folder)
    assert message.startswith(f"target frame {frame} is outside the cloth cache range 1-20")


def test_zero_area_face_is_surfaced(tmp_path: Path) -> None:
    """A degenerate polygon is refused before the fit, naming it; nothing changes."""
    base = grid_mesh(4, 4, 0.6, 0.6)
    extra = np.array([(0.5, 0.0, 0.0), (0.6, 0.0, 0.0), (0.7, 0.0, 0.0)])  # collinear triangle
    polygons = [p.tolist() for p in base.polygons()] + [[16, 17, 18]]
    mesh = ClothMesh.from_polygons(np.vstack([base.vertices, extra]), polygons)
    weights = np.concatenate([pin_row_weights(base, rows=2), np.zeros(3)])
    ob = make_cloth_object(mesh, pin_weights=weights, frame_end=10)
    target = make_cloth_object(mesh, name="Target")
    target.modifiers.clear()
    item = ob.fit_to_target.targets.add()
    item.kind, item.object, item.frame = "OBJECT", target, 5
    bpy.context.view_layer.objects.active = ob
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "degenerate.blend"))
    ob = bpy.data.objects["Cloth"]
    message = _fit_error(ob, tmp_path)
    assert message.startswith("'Cloth': zero-area polygon 9 (vertices 16, 17, 18)"), message


def test_bake_in_unsaved_file_uses_temp_dir_and_says_so(tmp_path: Path) -> None:
    ob = clamped_cloth(n=5, frame_end=12)
    bpy.context.scene.frame_end = 12
    bpy.context.view_layer.objects.active = ob
    assert not bpy.data.filepath
    standin = _StandIn()
    try:
        assert bake_operators.OBJECT_OT_fit_to_target_bake.execute(standin, bpy.context) == {"FINISHED"}
        ((kind, message),) = standin.reports
        state = json.loads(ob.fit_to_target.bake_json)
        path = Path(state["filepath"])
        assert kind == {"WARNING"}
        assert message.startswith("The .blend file is not saved: baked frames 1-12 to the temporary file ")
        assert str(path) in message and path.is_file()
        assert ob.modifiers[bake.CACHE_MODIFIER_NAME].filepath == str(path)  # absolute: no "//" base
        assert bpy.ops.object.fit_to_target_unbake() == {"FINISHED"}
        assert [m.type for m in ob.modifiers] == ["CLOTH"]
    finally:
        bake.cache_path(ob)[0].unlink(missing_ok=True)  # the temp folder outlives the test


def test_bake_errors_change_nothing(cloth) -> None:
    ob, _, folder = cloth
    # nothing after the cache start: the bake covers the cache range, the scene range and every
    # target frame, so all three end there
    bpy.context.scene.frame_end = 1
    cache = next(m for m in ob.modifiers if m.type == "CLOTH").point_cache
    cache.frame_end = cache.frame_start
    ob.fit_to_target.targets.clear()
    before = snapshot(ob, folder)
    with pytest.raises(RuntimeError, match="nothing to bake"):
        bpy.ops.object.fit_to_target_bake()
    assert snapshot(ob, folder) == before
    with pytest.raises(RuntimeError, match="has no fit result to apply"):
        bpy.ops.object.fit_to_target_apply()
    with pytest.raises(RuntimeError, match="no previous values to revert to"):
        bpy.ops.object.fit_to_target_revert()
    with pytest.raises(RuntimeError, match="is not baked"):
        bpy.ops.object.fit_to_target_unbake()
    assert snapshot(ob, folder) == before


class _StandIn:
    def __init__(self) -> None:
        self.reports: list = []

    def report(self, kind, message) -> None:
        self.reports.append((set(kind), message))

    def run(self, context, ob):
        return bake_operators.OBJECT_OT_fit_to_target_bake.run(self, context, ob)
