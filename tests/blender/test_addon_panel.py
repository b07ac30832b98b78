"""Fit settings on the object, the target operators, and what the sidebar panel draws."""

from __future__ import annotations

import json
import types

import bpy
import pytest
from addon_scenes import PARAMETER_NAMES, addon_module, clamped_cloth, fit_request, fit_session, job_module

properties = addon_module("ui.properties")
panel = addon_module("ui.panel")
registry = addon_module("models.registry")
models_base = addon_module("models.base")
warp_setup = addon_module("warp_setup")


def test_settings_defaults() -> None:
    ob = clamped_cloth()
    s = ob.fit_to_target
    assert s.model == "AUTO" and s.loss == "VERTEX" and s.max_iterations == 30
    assert s.time_budget == 0.0 and s.device == "AUTO" and s.start_values_json == ""
    ticked = [n for n in PARAMETER_NAMES if getattr(s, f"fit_{n}")]
    assert ticked == ["tension_stiffness", "bending_stiffness"]
    assert fit_request.fitted_parameters(s, registry.object_model(ob)) == (
        ["tension_stiffness", "bending_stiffness"],
        {"compression_stiffness": "tension_stiffness"},
    )
    items = [item[0] for item in properties.device_items()]
    assert items[:2] == ["AUTO", "cpu"] and all(i.startswith("cuda:") for i in items[2:])
    assert warp_setup.resolve_device("AUTO") == ("cuda:0" if len(items) > 2 else "cpu")


def test_ties() -> None:
    ties = registry.scene_model("blender_cloth").ties

    def resolve(chosen, on):
        return models_base.resolve_ties(chosen, on, ties)

    on = {"tie_compression": True, "tie_damping": True}
    assert resolve(["compression_stiffness", "mass"], on) == (
        ["compression_stiffness", "mass"],
        {"tension_stiffness": "compression_stiffness"},
    )
    assert resolve(["shear_damping", "tension_damping"], on) == (
        ["tension_damping"],
        {"compression_damping": "tension_damping", "shear_damping": "tension_damping"},
    )
    assert resolve(["tension_stiffness", "compression_stiffness"], {}) == (
        ["tension_stiffness", "compression_stiffness"],
        {},
    )
    assert resolve(["bending_stiffness"], on) == (["bending_stiffness"], {})


def test_add_current_frame_and_remove() -> None:
    cloth = clamped_cloth()
    other = clamped_cloth(name="Shape", location=(2.0, 0.0, 0.0))
    scene = bpy.context.scene
    bpy.context.view_layer.objects.active = cloth
    with pytest.raises(RuntimeError, match="Select the target mesh too"):
        bpy.ops.object.fit_to_target_add_target()
    other.select_set(True)
    cloth.select_set(True)
    scene.frame_set(12)
    assert bpy.ops.object.fit_to_target_add_target() == {"FINISHED"}
    other.select_set(False)
    cloth.shape_key_add(name="Basis")
    cloth.shape_key_add(name="Draped")
    cloth.active_shape_key_index = 1
    scene.frame_set(20)
    assert bpy.ops.object.fit_to_target_add_target() == {"FINISHED"}
    targets = [
        (t.kind, t.object.name if t.object else "", t.shape_key, t.frame) for t in cloth.fit_to_target.targets
    ]
    assert targets == [("OBJECT", "Shape", "", 12), ("SHAPE_KEY", "", "Draped", 20)]
    assert cloth.fit_to_target.active_target_index == 1
    assert bpy.ops.object.fit_to_target_remove_target() == {"FINISHED"}
    assert [t.frame for t in cloth.fit_to_target.targets] == [12]


# -- drawing the panel with a recording layout ------------------------------------------------------


class Layout:
    """Records what the panel draws; checks that every property and operator it names exists."""

    def __init__(self, log: list, parent: Layout | None = None) -> None:
        self.log, self.parent = log, parent
        self.enabled, self.scale_y, self.operator_context = True, 1.0, "EXEC_DEFAULT"

    @property
    def active(self) -> bool:
        return self.enabled and (self.parent is None or self.parent.active)

    def _child(self, *args, **kwargs) -> Layout:
        return Layout(self.log, self)

    row = column = box = grid_flow = split = _child

    def label(self, text: str = "", icon: str = "NONE", **kwargs) -> None:
        self.log.append(("label", text, icon))

    def prop(self, data, name: str, **kwargs) -> None:
        assert name in data.bl_rna.properties, name
        self.log.append(("prop", name))

    def operator(self, idname: str, text: str = "", **kwargs) -> OperatorProperties:
        module, name = idname.split(".")
        cls = getattr(bpy.types, f"{module.upper()}_OT_{name}", None)
        assert cls is not None, idname
        self.log.append(("operator", idname, self.active))
        return OperatorProperties(cls, idname, text, self.log)

    def template_list(self, listtype, listid, data, propname, active_data, active_propname, **kwargs) -> None:
        assert hasattr(bpy.types, listtype) and propname in data.bl_rna.properties
        assert active_propname in active_data.bl_rna.properties
        self.log.append(("list", propname))

    def progress(self, factor: float = 0.0, type: str = "BAR", text: str = "") -> None:
        assert 0.0 <= factor <= 1.0
        self.log.append(("progress", text, factor))


class OperatorProperties:
    """What ``layout.operator`` returns: setting a property the operator lacks fails, and
    each one set is recorded as ("operator property", idname, button text, name, value)."""

    def __init__(self, cls, idname: str, text: str, log: list) -> None:
        object.__setattr__(self, "_about", (cls, idname, text, log))

    def __setattr__(self, name: str, value) -> None:
        cls, idname, text, log = self._about
        module, op = idname.split(".")
        assert name in getattr(getattr(bpy.ops, module), op).get_rna_type().properties, (idname, name)
        log.append(("operator property", idname, text, name, value))


def draw(context=None) -> list:
    log: list = []
    standin = types.SimpleNamespace(layout=Layout(log))
    for name in ("draw_settings", "draw_fit_button", "draw_progress", "draw_result", "draw_run"):
        setattr(standin, name, types.MethodType(getattr(panel.FIT_PT_main, name), standin))
    panel.FIT_PT_main.draw(standin, context or bpy.context)
    return log


def labels(log: list) -> list[str]:
    return [entry[1] for entry in log if entry[0] == "label"]


def fit_button(log: list) -> tuple:
    return next(entry for entry in log if entry[:2] == ("operator", "object.fit_to_target"))


def test_panel_states() -> None:
    assert labels(draw()) == ["Select a mesh with a Cloth modifier"]

    ob = clamped_cloth()
    plain = bpy.data.objects.new("Plain", bpy.data.meshes.new("Plain"))
    bpy.context.scene.collection.objects.link(plain)
    bpy.context.view_layer.objects.active = plain
    log = draw()
    assert "'Plain' has no Cloth modifier: add one in Properties > Physics" in labels(log)
    assert fit_button(log)[2] is False  # disabled, and the line above says why

    bpy.context.view_layer.objects.active = ob
    log = draw()
    assert "'Cloth' has no targets: select a target mesh and press Add Current Frame" in labels(log)
    assert fit_button(log)[2] is False
    assert "Fits tension stiffness, bending stiffness; compression stiffness follows" in labels(log)
    assert ("list", "targets") in log

    target = clamped_cloth(name="Target")
    item = ob.fit_to_target.targets.add()
    item.kind, item.object, item.frame = "OBJECT", target, 10
    log = draw()
    assert fit_button(log)[2] is True and not [t for t in labels(log) if "no targets" in t]

    ob.fit_to_target.model = "SOFT_BODY"
    log = draw()
    assert (
        "'Cloth' has no Soft Body modifier: add one in Properties > Physics, or fit its Cloth modifier "
        "with the Cloth model (Model in the panel, --model blender_cloth in batch)"
    ) in labels(log)
    assert fit_button(log)[2] is False
    # the soft-body model's check boxes and its values on the object
    assert {("prop", "fit_young_modulus"), ("prop", "young_modulus"), ("prop", "lattice_cells")} <= set(log)
    ob.fit_to_target.model = "BLENDER_CLOTH"

    # after a fit: before -> after table, error drop, warnings, Apply/Revert/Bake
    record = {
        "name": "Cloth",
        "iterations": 7,
        "seconds": 3.2,
        "params": {"tension_stiffness": 40.0},
        "initial_params": {"tension_stiffness": 15.0},
        "initial_rmse_m": 0.0291,
        "rmse_m": 2.8e-6,
        "warnings": ["bending_stiffness: x2 changes the target frames by < 0.1 mm"],
    }
    ob.fit_to_target.result_json = json.dumps(record)
    ob.fit_to_target.applied = True
    ob.fit_to_target.previous_values_json = json.dumps({"tension_stiffness": 15.0})
    log = draw()
    text = labels(log)
    assert ["Tension stiffness", "15", "40"] == text[text.index("After") + 1 : text.index("After") + 4]
    assert "RMSE 29.1 mm -> 0.0028 mm" in text
    assert record["warnings"][0] in text
    assert not [t for t in text if "collision" in t]  # no colliders: no contact line
    buttons = {entry[1]: entry[2] for entry in log if entry[0] == "operator"}
    assert buttons["object.fit_to_target_apply"] is False  # already applied
    for contacts, line in (
        (
            {"frames": [4, 5, 6], "vertices": 30},
            "Touched collision objects: frames 4-6 (3 frames), 30 vertices",
        ),
        ({"frames": [9], "vertices": 2}, "Touched collision objects: frame 9, 2 vertices"),
        ({"frames": [], "vertices": 0}, "No contact with collision objects"),
    ):
        ob.fit_to_target.result_json = json.dumps({**record, "contacts": contacts})
        assert line in labels(draw())
    ob.fit_to_target.result_json = json.dumps(record)
    assert buttons["object.fit_to_target_revert"] is True
    assert buttons["object.fit_to_target_bake"] is True

    # while a fit runs: progress bar with iteration and loss, and Cancel
    prepared = types.SimpleNamespace(
        request=types.SimpleNamespace(object_name="Cloth"),
        settings=types.SimpleNamespace(max_iterations=30, time_budget_s=None),
    )
    job = job_module.FitJob(None, None)
    session = fit_session.begin_session([prepared], job)
    try:
        session.update([job_module.JobMessage("progress", iteration=0, loss=0.5)])
        session.update([job_module.JobMessage("progress", iteration=3, loss=0.01)])
        log = draw()
        (bar,) = [entry for entry in log if entry[0] == "progress"]
        assert bar[1] == "Cloth: iteration 3/30, loss 0.01" and bar[2] == pytest.approx(0.1)
        assert ("operator", "object.fit_to_target_cancel", True) in log
        assert not [entry for entry in log if entry[:2] == ("operator", "object.fit_to_target")]
        job.cancel()
        assert "Cancelling after this iteration..." in labels(draw())
    finally:
        fit_session.end_session()


def test_operator_names_do_not_clash_with_blenders_own() -> None:
    """In F3 search the add-on's operators sit beside Blender's: none may share a name with one
    of Blender's (a "Revert" beside File > Revert, a "Bake" beside Render > Bake)."""
    ours, theirs = {}, {}
    for area in dir(bpy.ops):
        for name in dir(getattr(bpy.ops, area)):
            rna = getattr(getattr(bpy.ops, area), name).get_rna_type()
            label = rna.name or name
            (ours if rna.identifier.startswith(("OBJECT_OT_fit_", "FIT_OT_")) else theirs)[label] = (
                rna.identifier
            )
    assert len(ours) > 5, ours
    clashes = {label: (ours[label], theirs[label]) for label in ours if label in theirs}
    assert clashes == {}, clashes
