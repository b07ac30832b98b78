"""The Fabric sub-panel (real bpy, the real fabric fit): lab numbers on a cloth object give its
Cloth settings in one undo step, bad numbers and objects are refused by name, the fit saves
as a preset, and the modal fit runs in a worker and cancels leaving everything as it was.

Each fit is the weight and a bending length on a 10x10 grid of 15 mm edges (7.5 mm in the
mesh, the object scaled by 2): about a second on the CPU.
"""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path

import bpy
import pytest
from addon_scenes import addon_module, modifier_values
from blender_ref import _PACKAGE, grid_mesh, make_cloth_object
from modal_standins import ContextProxy, OperatorStandIn, event
from test_addon_panel import draw_panel

fabric_operators = addon_module("ui.fabric_operators")
fabric_panel = addon_module("ui.fabric_panel")
presets = addon_module("presets")
cloth_scene = addon_module("models.blender_cloth.scene_model")
busy_with = addon_module("session").busy_with
vertex_mass = importlib.import_module(f"{_PACKAGE.__name__}.warp_core.rigs.fabric").vertex_mass
FIT_OP = fabric_operators.FIT_OT_fabric_fit
EDGE_M = 0.015
HANG_GUARD_S = 300.0  # only stops a hung worker; never judges speed


def cloth_grid(name: str = "Shirt") -> bpy.types.Object:
    ob = make_cloth_object(grid_mesh(11, 11, 0.075, 0.075), name=name)
    ob.scale = (2.0, 2.0, 2.0)  # the world's edge is what the rigs are built of
    bpy.context.view_layer.objects.active = ob
    bpy.context.view_layer.update()
    return ob


def settings_of(name: str = "Shirt") -> bpy.types.ClothSettings:
    return cloth_scene.find_cloth_modifier(bpy.data.objects[name]).settings


def drawn() -> list[tuple]:
    """What the Fabric sub-panel draws for the active object (``test_addon_panel``'s log)."""
    log: list = []
    root = draw_panel(fabric_panel.FIT_PT_fabric, bpy.context, log)
    assert root.use_property_split and not root.use_property_decorate
    return log


def drawn_labels() -> list[str]:
    return [entry[1] for entry in drawn() if entry[0] == "label"]


def fit_button_enabled() -> bool:
    return next(e[2] for e in drawn() if e[:2] == ("operator", "fit.fabric_fit"))


def test_fit_writes_the_cloth_settings_in_one_undo_step() -> None:
    ob = cloth_grid()
    assert fabric_panel.FIT_PT_fabric.poll(bpy.context)
    s = ob.fit_to_target_fabric
    assert (s.weight_gsm, s.use_bending_length, s.bending_length_mm) == (150.0, True, 25.0)
    assert "Mesh edge: 15 mm" in drawn_labels() and fit_button_enabled()
    # each optional number: a check box in a heading that names its unit, the value beside it
    assert {
        ("heading", "Bending Length (mm)"),
        ("prop", "use_bending_length"),
        ("prop", "load_n_per_m"),
    } <= set(e[:2] for e in drawn())
    window = bpy.context.window_manager.windows[0]
    with bpy.context.temp_override(window=window):
        bpy.ops.ed.undo_push(message="start")
        settings_of().mass = 0.25  # a state of its own between the pushes: what one undo returns to
        bpy.ops.ed.undo_push(message="before the fit")
        before = modifier_values(bpy.data.objects["Shirt"])
        # as a button calls it: an operator called from Python pushes its undo step only
        # when asked to (the third argument), one of its own with the UNDO option
        assert bpy.ops.fit.fabric_fit("EXEC_DEFAULT", True) == {"FINISHED"}

    record = json.loads(bpy.data.objects["Shirt"].fit_to_target_fabric.result_json)
    written = settings_of()
    assert written.mass == pytest.approx(vertex_mass(150.0, EDGE_M), rel=1e-6)
    assert written.bending_stiffness == pytest.approx(record["values"]["bending_stiffness"], rel=1e-6)
    assert written.bending_stiffness_max == pytest.approx(record["values"]["bending_stiffness"], rel=1e-6)
    assert written.quality == record["values"]["quality"] == 10
    assert record["edge_mm"] == pytest.approx(15.0, rel=1e-6)
    (row,) = record["rigs"]
    assert (row["rig"], row["number"], row["requested"], row["outcome"]) == (
        "cantilever",
        "bending_length_mm",
        25.0,
        "matched",
    )
    assert row["reading"] == pytest.approx(25.0, rel=0.01)
    shown = drawn_labels()
    assert "Last fit: matched on 15 mm edges" in shown
    assert f"Cantilever: 25 mm \u2192 {row['reading']:.4g} mm (matched)" in shown
    assert row["spread"] == 0.0  # one strip, one start
    # a drape's row reads the mean of its lifted starts and says how far they lay apart
    drape = {"rig": "drape", "number": "drape_coefficient", "requested": 0.3, "reading": 0.2921}
    stored = json.dumps({**record, "rigs": [row, {**drape, "outcome": "matched", "spread": 0.0129}]})
    bpy.data.objects["Shirt"].fit_to_target_fabric.result_json = stored
    assert "Drape: 0.3 \u2192 0.2921 (matched; single drapes 0.01 apart)" in drawn_labels()
    bpy.data.objects["Shirt"].fit_to_target_fabric.result_json = json.dumps(record)

    # Ctrl+Z: the one step the fit made goes, and with it every value it wrote and its rows
    with bpy.context.temp_override(window=window):
        assert bpy.ops.ed.undo() == {"FINISHED"}
    assert modifier_values(bpy.data.objects["Shirt"]) == before
    assert settings_of().mass == pytest.approx(0.25)
    assert bpy.data.objects["Shirt"].fit_to_target_fabric.result_json == ""


def test_bad_numbers_and_objects_are_refused_and_nothing_changes() -> None:
    ob = cloth_grid()
    before = modifier_values(ob)
    ob.fit_to_target_fabric.weight_gsm = 5.0
    with pytest.raises(RuntimeError, match=r"Weight = 5.0 is outside .*: change Weight in the Fabric panel"):
        bpy.ops.fit.fabric_fit()
    # the panel says so before the button is pressed, and greys it
    assert [t for t in drawn_labels() if t.startswith("Weight = 5.0 is outside")]
    assert not fit_button_enabled()
    ob.fit_to_target_fabric.weight_gsm = 150.0
    ob.fit_to_target_fabric.use_bending_length = False
    with pytest.raises(RuntimeError, match="Tick at least one lab number besides the weight"):
        bpy.ops.fit.fabric_fit()
    ob.fit_to_target_fabric.use_bending_length = True
    ob.scale = (20.0, 20.0, 20.0)  # 150 mm edges: past what the rigs are built for
    bpy.context.view_layer.update()
    with pytest.raises(
        RuntimeError, match="'Shirt' has edges of 150 mm on average; the fabric rigs need 1-50 mm"
    ):
        bpy.ops.fit.fabric_fit()
    assert modifier_values(ob) == before and ob.fit_to_target_fabric.result_json == ""

    plain = bpy.data.objects.new("Plain", bpy.data.meshes.new("Plain"))
    bpy.context.scene.collection.objects.link(plain)
    bpy.context.view_layer.objects.active = plain
    assert not fabric_panel.FIT_PT_fabric.poll(bpy.context)
    with pytest.raises(RuntimeError, match="'Plain' has no Cloth modifier: add one in Properties > Physics"):
        bpy.ops.fit.fabric_fit()
    assert not bpy.ops.fit.fabric_save_preset.poll()  # no fabric fit to save


def test_save_as_preset_writes_one_the_library_finds() -> None:
    cloth_grid()
    bpy.ops.fit.fabric_fit()
    name = "Shirting 150 Test"
    assert bpy.ops.fit.fabric_save_preset(name=name) == {"FINISHED"}
    preset = presets.find_preset(name)
    try:
        assert preset.name == name and not preset.builtin
        assert Path(preset.path).parent == presets.user_presets_dir()
        assert preset.values["mass"] == pytest.approx(vertex_mass(150.0, EDGE_M))
        assert preset.values["bending_stiffness"] == pytest.approx(settings_of().bending_stiffness, rel=1e-6)
        assert preset.provenance["lab_numbers"] == {"weight_gsm": 150.0, "bending_length_mm": 25.0}
        assert preset.provenance["mesh_edge_m"] == pytest.approx(0.015)
        assert "cantilever: bending_length_mm 25" in preset.notes
        with pytest.raises(RuntimeError, match="already exists"):  # no silent overwrite
            bpy.ops.fit.fabric_save_preset(name=name)
    finally:
        Path(preset.path).unlink()  # the test profile's library is shared by the session


def run_modal(op, ctx, first: str = "TIMER") -> set[str]:
    """Events as Blender's loop sends them: ``first``, then a timer every 20 ms until it ends."""
    result = FIT_OP.modal(op, ctx, event(first, "PRESS"))
    deadline = time.monotonic() + HANG_GUARD_S
    while result in ({"PASS_THROUGH"}, {"RUNNING_MODAL"}):
        assert time.monotonic() < deadline, "the fabric fit hung"
        time.sleep(0.02)
        result = FIT_OP.modal(op, ctx, event("TIMER"))
    return result


def test_modal_fit_runs_in_a_worker_and_esc_changes_nothing() -> None:
    ob = cloth_grid()
    before = modifier_values(ob)
    ctx, op = ContextProxy(), OperatorStandIn()
    assert FIT_OP.invoke(op, ctx, event("NOTHING")) == {"RUNNING_MODAL"}
    try:
        assert ctx.window_manager.handlers == [op] and len(ctx.window_manager.timers) == 1
        assert ctx.status[-1].startswith("Fit to Target: fabric of 'Shirt': ")
        # a second fit, or one of the panel's, waits for this one
        with pytest.raises(RuntimeError, match="A fabric fit of 'Shirt' is running"):
            bpy.ops.fit.fabric_fit()
        # nor does a fit or a bake start beside it: the fabric fit is about to write the
        # settings they read
        assert busy_with() == "A fabric fit of 'Shirt' is running"
        shown = drawn_labels()
        assert [t for t in shown if t.startswith("'Shirt': ")]
        assert FIT_OP.modal(op, ctx, event("RIGHTMOUSE", "PRESS")) == {"PASS_THROUGH"}  # clicks go on
        assert run_modal(op, ctx, first="ESC") == {"CANCELLED"}
    finally:
        if fabric_operators.active_fabric_fit() is not None:  # a failed check: never leak the run
            FIT_OP.cancel(op, ctx)
    assert op.reports == [({"WARNING"}, "Fabric fit of 'Shirt' cancelled: nothing was changed")]
    assert modifier_values(ob) == before and ob.fit_to_target_fabric.result_json == ""
    assert (
        fabric_operators.active_fabric_fit() is None
        and ctx.window_manager.timers == []
        and ctx.status[-1] is None
    )

    # the panel's Cancel button does what Esc does
    op = OperatorStandIn()
    assert FIT_OP.invoke(op, ctx, event("NOTHING")) == {"RUNNING_MODAL"}
    assert bpy.ops.fit.fabric_cancel() == {"FINISHED"}
    assert "Cancelling after this rig run..." in drawn_labels()
    assert run_modal(op, ctx) == {"CANCELLED"} and modifier_values(ob) == before

    # run to its end: the progress said the rig, and the values are written
    op = OperatorStandIn()
    assert FIT_OP.invoke(op, ctx, event("NOTHING")) == {"RUNNING_MODAL"}
    assert run_modal(op, ctx) == {"FINISHED"}
    assert any("cantilever: bending length 25 mm" in text for text in ctx.status if text)
    ((kind, message),) = op.reports
    assert kind == {"INFO"} and "Vertex Mass" in message and "cantilever reads" in message
    assert settings_of().mass == pytest.approx(vertex_mass(150.0, EDGE_M), rel=1e-6)
