"""Fit settings on the object, the target operators, and what the sidebar panel draws."""

from __future__ import annotations

import json
import types

import blf
import bpy
import pytest
from addon_scenes import (
    PARAMETER_NAMES,
    addon_module,
    clamped_cloth,
    fit_request,
    fit_session,
    get_model,
    job_module,
    select,
)
from soft_body_scenes import soft_object

properties = addon_module("ui.properties")
panel = addon_module("ui.panel")
physics_link = addon_module("ui.physics_link")
records = addon_module("scene.records")
registry = addon_module("models.registry")
models_base = addon_module("models.base")
warp_setup = addon_module("warp_setup")
steps = addon_module("scene.steps")


def test_settings_defaults() -> None:
    ob = clamped_cloth()
    s = ob.fit_to_target
    assert s.model == "AUTO" and s.loss == "VERTEX" and s.max_iterations == 30
    assert not s.use_time_budget and s.device == "AUTO" and s.start_values_json == ""
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
    """Records what the panel draws; checks that every property and operator it names exists.

    ``log`` is flat and shared by the whole panel: ("label", text, icon), ("prop", name),
    ("operator", idname, enabled), ("list", propname), ("progress", text, factor), and
    ("layout", kind, sub-layout) for each sub-layout. Each layout also keeps ``entries``
    (what was drawn into it, with the property-split state it was drawn with) and
    ``children``, so tests can walk the tree."""

    def __init__(
        self, log: list, parent: Layout | None = None, kind: str = "panel", heading: str = ""
    ) -> None:
        self.log, self.parent, self.kind, self.heading = log, parent, kind, heading
        self.entries: list[tuple] = []
        self.children: list[Layout] = []
        self.enabled = self.active = True
        self.alert = False
        self.scale_y, self.operator_context, self.alignment = 1.0, "EXEC_DEFAULT", "EXPAND"
        self._split: bool | None = None
        self._decorate: bool | None = None

    # a sub-layout inherits the property split and decorators of its parent, as in Blender
    @property
    def use_property_split(self) -> bool:
        if self._split is not None:
            return self._split
        return self.parent.use_property_split if self.parent is not None else False

    @use_property_split.setter
    def use_property_split(self, value: bool) -> None:
        self._split = bool(value)

    @property
    def use_property_decorate(self) -> bool:
        if self._decorate is not None:
            return self._decorate
        return self.parent.use_property_decorate if self.parent is not None else True

    @use_property_decorate.setter
    def use_property_decorate(self, value: bool) -> None:
        self._decorate = bool(value)

    def is_enabled(self) -> bool:
        return self.enabled and (self.parent is None or self.parent.is_enabled())

    def _child(self, kind: str, heading: str = "") -> Layout:
        child = Layout(self.log, self, kind, heading)
        self.children.append(child)
        self.log.append(("layout", kind, child))
        if heading:
            self.log.append(("heading", heading))
        return child

    def row(self, align: bool = False, heading: str = "", **kwargs) -> Layout:
        return self._child("row", heading)

    def column(self, align: bool = False, heading: str = "", **kwargs) -> Layout:
        return self._child("column", heading)

    def box(self) -> Layout:
        return self._child("box")

    def grid_flow(self, **kwargs) -> Layout:
        return self._child("grid")

    def split(self, factor: float = 0.0, **kwargs) -> Layout:
        assert 0.0 <= factor < 1.0
        return self._child("split")

    def panel(self, idname: str, default_closed: bool = False) -> tuple[Layout, Layout]:
        """A layout panel, drawn open (so that its content is checked too)."""
        assert idname.isidentifier(), idname
        return self._child("panel header"), self._child("panel body")

    def separator(self, **kwargs) -> None:
        pass

    def label(self, text: str = "", icon: str = "NONE", **kwargs) -> None:
        self.log.append(("label", text, icon))
        self.entries.append(("label", text, icon))

    def prop(self, data, name: str, text: str | None = None, **kwargs) -> None:
        assert name in data.bl_rna.properties, name
        self.log.append(("prop", name))
        self.entries.append(("prop", name, self.use_property_split, text, data))

    def prop_search(self, data, name: str, search_data, search_name: str, text: str | None = None, **kwargs):
        assert name in data.bl_rna.properties and search_name in search_data.bl_rna.properties
        self.log.append(("prop_search", name, search_name))
        self.entries.append(("prop_search", name, self.use_property_split, text, data))

    def operator(self, idname: str, text: str = "", **kwargs) -> OperatorProperties:
        module, name = idname.split(".")
        cls = getattr(bpy.types, f"{module.upper()}_OT_{name}", None)
        assert cls is not None, idname
        self.log.append(("operator", idname, self.is_enabled()))
        self.entries.append(("operator", idname, text))
        return OperatorProperties(cls, idname, text, self.log)

    def template_list(self, listtype, listid, data, propname, active_data, active_propname, **kwargs) -> None:
        assert hasattr(bpy.types, listtype) and propname in data.bl_rna.properties
        assert active_propname in active_data.bl_rna.properties
        self.log.append(("list", propname))

    def progress(self, factor: float = 0.0, type: str = "BAR", text: str = "") -> None:
        assert 0.0 <= factor <= 1.0
        self.log.append(("progress", text, factor))

    def walk(self):
        """This layout and every layout under it."""
        yield self
        for child in self.children:
            yield from child.walk()


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


class SidebarContext:
    """``bpy.context`` seen from a sidebar ``width_px`` wide at UI scale 1 (headless, the
    context has no region)."""

    def __init__(self, width_px: int) -> None:
        self.region = types.SimpleNamespace(width=width_px, type="UI")
        self.preferences = types.SimpleNamespace(system=types.SimpleNamespace(ui_scale=1.0))

    def __getattr__(self, name: str):
        return getattr(bpy.context, name)


def panel_classes() -> list[type]:
    """The main panel, then its sub-panels in the order Blender shows them."""
    return [
        panel.FIT_PT_main,
        panel.FIT_PT_targets,
        panel.FIT_PT_parameters,
        panel.FIT_PT_maps,
        panel.FIT_PT_solver,
        panel.FIT_PT_result,
    ]


def draw_panel(cls: type, context, log: list) -> Layout:
    layout = Layout(log)
    cls.draw(types.SimpleNamespace(layout=layout), context)
    return layout


def draw(context=None) -> list:
    """What the Fit panel and the sub-panels Blender shows (their poll passes) draw."""
    context = context or bpy.context
    log: list = []
    for cls in panel_classes():
        if cls is panel.FIT_PT_main or cls.poll(context):
            draw_panel(cls, context, log)
    return log


def labels(log: list) -> list[str]:
    return [entry[1] for entry in log if entry[0] == "label"]


def texts(log: list) -> list[str]:
    """Labels and row headings: every text the panel shows of its own."""
    return [entry[1] for entry in log if entry[0] in ("label", "heading")]


def props(log: list) -> list[str]:
    return [entry[1] for entry in log if entry[0] == "prop"]


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
    assert "Fits Tension Stiffness, Bending Stiffness; Compression Stiffness follows" in labels(log)
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
        "with the Cloth model (Model: Blender Cloth in the panel)"
    ) in labels(log)
    assert fit_button(log)[2] is False
    # the soft-body model's check boxes and its values on the object
    assert {("prop", "fit_young_modulus"), ("prop", "young_modulus"), ("prop", "lattice_cells")} <= set(log)
    ob.fit_to_target.model = "BLENDER_CLOTH"

    # after a fit: before -> after, error drop, warnings, Apply/Revert/Bake
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
    assert text[text.index("Tension Stiffness") + 1] == "15 \u2192 40"
    assert "\u2192 40" in text  # beside the modifier's value in the Parameters rows
    assert "RMSE 29.1 mm \u2192 0.0028 mm" in text
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

    # while a fit runs: progress bar with iteration and loss, and Cancel; no result meanwhile
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
        assert log.index(bar) == 1  # at the top of the main panel, in its box
        assert bar[1] == session.progress_text() and "Cloth" in bar[1]  # the session words it
        assert bar[2] == pytest.approx(session.factor, abs=0.01) and bar[2] > 0.0
        assert ("operator", "object.fit_to_target_cancel", True) in log
        assert not [entry for entry in log if entry[:2] == ("operator", "object.fit_to_target")]
        assert not panel.FIT_PT_result.poll(bpy.context)
        job.cancel()
        assert "Cancelling after this iteration..." in labels(draw())
    finally:
        fit_session.end_session()


def test_panels_are_laid_out_as_blenders_property_panels() -> None:
    """Sub-panels of the Fit tab; every property drawn with the property split, no decorators."""
    ob = clamped_cloth()
    bpy.context.view_layer.objects.active = ob
    ob.fit_to_target.result_json = json.dumps({"name": "Cloth", "params": {"mass": 0.5}, "rmse_m": 1e-3})
    for cls in panel_classes()[1:]:
        assert (cls.bl_parent_id, cls.bl_category, cls.bl_region_type) == ("FIT_PT_main", "Fit", "UI")
        assert cls.poll(bpy.context) and getattr(bpy.types, cls.__name__) is cls
    for cls in panel_classes():
        root = draw_panel(cls, bpy.context, [])
        assert root.use_property_split and not root.use_property_decorate, cls
        drawn = [e for layout in root.walk() for e in layout.entries if e[0] in ("prop", "prop_search")]
        assert drawn and all(split for _, _, split, _, _ in drawn), (cls, drawn)
    # the result sub-panel only with a result
    ob.fit_to_target.result_json = ""
    assert not panel.FIT_PT_result.poll(bpy.context) and panel.FIT_PT_parameters.poll(bpy.context)


def test_targets_list_searches_the_cloths_shape_keys() -> None:
    ob = clamped_cloth()
    s = ob.fit_to_target
    s.targets.add().kind = "SHAPE_KEY"
    log: list = []
    ul = panel.FIT_UL_targets
    ul.draw_item(None, bpy.context, Layout(log), s, s.targets[0], 0, s, "active_target_index", 0)
    assert ("prop", "shape_key") in log  # no shape keys yet: the name as text, to be fixed
    ob.shape_key_add(name="Basis")
    ob.shape_key_add(name="Draped")
    log = []
    ul.draw_item(None, bpy.context, Layout(log), s, s.targets[0], 0, s, "active_target_index", 0)
    assert ("prop_search", "shape_key", "key_blocks") in log and ("prop", "frame") in log


# -- every panel in every state, at two sidebar widths ----------------------------------------------

LONG_REASON = (
    "RMSE 12 mm is 40 % of the motion: the targets move in ways these settings cannot reproduce; "
    "check the targets' frames and the cloth's other settings, then fit again with more parameters"
)
LONG_WARNING = (
    "'Cloth': Self Collision (settings.use_self_collision) is on; the fit does not simulate it, so the "
    "fitted values may make up for it"
)


def _cloth_with_target(name: str = "Cloth", x: float = 0.0) -> bpy.types.Object:
    ob = clamped_cloth(name=name, location=(x, 0.0, 1.0))
    target = clamped_cloth(name=f"{name} target", location=(x, 0.0, 0.5))
    item = ob.fit_to_target.targets.add()
    item.kind, item.object, item.frame = "OBJECT", target, 10
    select([ob], ob)
    return ob


def _record(**extra) -> dict:
    return {
        "name": "Cloth",
        "model": "blender_cloth",
        "iterations": 12,
        "seconds": 4.5,
        "params": {"tension_stiffness": 40.0, "air_damping": 2.0},
        "initial_params": {"tension_stiffness": 15.0, "air_damping": 1.0},
        "initial_rmse_m": 0.02,
        "rmse_m": 4e-4,
        "tolerance_m": 1e-3,
        "warnings": [LONG_WARNING],
        **extra,
    }


def state_nothing_active() -> None:
    bpy.context.view_layer.objects.active = None


def state_not_a_mesh() -> None:
    empty = bpy.data.objects.new("A camera rig with a very long name for the sidebar", None)
    bpy.context.scene.collection.objects.link(empty)
    bpy.context.view_layer.objects.active = empty


def state_no_targets() -> None:
    select([clamped_cloth()], bpy.data.objects["Cloth"])


def state_targets() -> None:
    _cloth_with_target()


def state_running() -> None:
    ob = _cloth_with_target()
    prepared = types.SimpleNamespace(
        request=types.SimpleNamespace(object_name=ob.name),
        settings=types.SimpleNamespace(max_iterations=30, time_budget_s=60.0),
    )
    session = fit_session.begin_session([prepared], job_module.FitJob(None, None))
    session.update([job_module.JobMessage("progress", iteration=2, loss=0.3)])


def state_reading_the_scene() -> None:
    ob = _cloth_with_target()

    def export():  # a fit's scene read under way: frame 3 of 10
        yield steps.Step(3, 10, f"'{ob.name}': frame 3 of 10")
        yield steps.Step(4, 10, f"'{ob.name}': frame 4 of 10")

    run = steps.SteppedRun(export())
    run.advance(0.0)
    fit_session.begin_export([ob.name], run)


def state_out_of_date() -> None:
    ob = _cloth_with_target()
    stale = {part: "not what the scene holds now" for part in ("targets", "settings", "mesh")}
    ob.fit_to_target.result_json = json.dumps(_record(outcome="converged", fingerprint=stale))


def state_converged() -> None:
    ob = _cloth_with_target()
    ob.fit_to_target.result_json = json.dumps(_record(outcome="converged"))


def state_misfit() -> None:
    ob = _cloth_with_target()
    ob.fit_to_target.result_json = json.dumps(_record(outcome="misfit", outcome_reason=LONG_REASON))


def state_footage() -> None:
    ob = _cloth_with_target()
    s = ob.fit_to_target
    s.target_source = "TRACKS"
    for name in ("Track", "Track.001", "Track.002"):
        binding = s.bindings.add()
        binding.track, binding.how = name, "BUNDLE"
    errors = {f"Track.{k:03d}": 0.5 + k for k in range(8)}
    record = _record(unit="px", initial_rmse_px=6.0, rmse_px=0.8, tolerance_px=1.0, track_errors_px=errors)
    s.result_json = json.dumps(record)


def state_soft_body() -> None:
    ob = soft_object(name="Jelly")
    geometry = {"tets": 320, "nodes": 125, "cell_size_m": 0.1, "worst_quality": 0.41}
    record = _record(
        name="Jelly",
        model="soft_body",
        params={"young_modulus": 2.0e5, "damping": 0.01},
        initial_params={"young_modulus": 1.0e5, "damping": 0.02},
        geometry=geometry,
    )
    ob.fit_to_target.result_json = json.dumps(record)
    select([ob], ob)


def state_several_selected() -> None:
    objects = [_cloth_with_target(f"Flag with a long name {k}", 2.0 * k) for k in range(4)]
    select(objects, objects[0])


def state_shared_result() -> None:
    objects = [_cloth_with_target(f"Swatch {k}", 2.0 * k) for k in range(2)]
    names = [o.name for o in objects]
    shared = {
        "objects": names,
        "outcome": "converged",
        "determined_jointly": ["air_damping", "tension_stiffness"],
        "undetermined_alone": {names[0]: ["air_damping"], names[1]: ["tension_stiffness"]},
    }
    for ob in objects:
        record = _record(name=ob.name, outcome="converged", run_objects=names, shared=shared)
        ob.fit_to_target.result_json = json.dumps(record)
    select(objects, objects[0])


STATES = {name[len("state_") :]: f for name, f in list(globals().items()) if name.startswith("state_")}
WIDTHS_PX = (300, 600)
# Blender's UI font is 11 px at UI scale 1; an icon takes 20 px; the panel's borders, a box's
# and a sub-panel's inset and the scroll bar about 40 px of the sidebar's width.
FONT_PX, ICON_PX, INSET_PX = 11, 20, 40


def text_width_px(text: str) -> float:
    blf.size(0, FONT_PX)
    return blf.dimensions(0, text)[0]


@pytest.fixture
def state(request: pytest.FixtureRequest) -> str:
    STATES[request.param]()
    yield request.param
    fit_session.end_session()
    fit_session.end_export()


@pytest.mark.parametrize("state", list(STATES), indirect=True)
def test_every_panel_draws_in_every_state(state: str) -> None:
    for width in WIDTHS_PX:
        context = SidebarContext(width)
        for cls in panel_classes():
            shown = cls is panel.FIT_PT_main or cls.poll(context)
            log: list = []
            draw_panel(cls, context, log)  # also when hidden: a draw never fails
            if shown and cls is not panel.FIT_PT_main:
                assert log, (state, cls.__name__)  # a sub-panel that shows is not empty
    shown = {cls.__name__ for cls in panel_classes()[1:] if cls.poll(bpy.context)}
    mesh = state not in ("nothing_active", "not_a_mesh")
    assert {"FIT_PT_targets", "FIT_PT_parameters", "FIT_PT_solver"} <= shown if mesh else not shown
    assert ("FIT_PT_result" in shown) == (state in RESULT_STATES)


RESULT_STATES = ("converged", "misfit", "footage", "soft_body", "shared_result", "out_of_date")


@pytest.mark.parametrize("state", list(STATES), indirect=True)
def test_every_label_fits_the_sidebar(state: str) -> None:
    """Labels of variable text are wrapped to the sidebar's width: none is wider than it
    (measured in Blender's UI font), and the lines read together are the whole text."""
    for width in WIDTHS_PX:
        log = draw(SidebarContext(width))
        for entry in log:
            if entry[0] == "label":
                _, text, icon = entry
                used = text_width_px(text) + (ICON_PX if icon != "NONE" else 0)
                assert used <= width - INSET_PX, (width, text)
        shown = "".join(labels(log)).replace(" ", "")
        for text in long_texts(state):
            assert text.replace(" ", "") in shown, (width, text)
            assert width > 300 or text not in labels(log), (width, text)  # wrapped at 300 px


def long_texts(state: str) -> list[str]:
    """Texts of the state longer than a line of a 300 px sidebar."""
    ob = bpy.context.active_object
    out = {
        "no_targets": ["'Cloth' has no targets: select a target mesh and press Add Current Frame"],
        "misfit": [LONG_REASON, LONG_WARNING],
        "converged": [LONG_WARNING],
        "several_selected": [", ".join(sorted(o.name for o in bpy.context.selected_objects))],
    }.get(state, [])
    if state == "shared_result":
        shared = json.loads(ob.fit_to_target.result_json)["shared"]
        out.append(records.shared_summary(shared))
    return out


# -- tooltips, Blender's names, the Auto switches ---------------------------------------------------


def _property_groups() -> list:
    """The add-on's property groups: those on Object and Scene, and every group inside them."""
    found, todo = (
        {},
        [
            bpy.types.Object.bl_rna.properties["fit_to_target"].fixed_type,
            bpy.types.Object.bl_rna.properties["fit_to_target_soft_body"].fixed_type,
        ],
    )
    while todo:
        struct = todo.pop()
        found[struct.identifier] = struct
        for prop in struct.properties:
            if prop.type in ("POINTER", "COLLECTION") and prop.fixed_type.identifier.startswith("FIT_"):
                if prop.fixed_type.identifier not in found:
                    todo.append(prop.fixed_type)
    return list(found.values())


def _bad_tooltip(description: str) -> bool:
    return not description.strip() or "\n" in description or "--" in description


def test_every_property_and_operator_has_a_one_line_tooltip() -> None:
    groups = _property_groups()
    assert {"FIT_PG_settings", "FIT_PG_target", "FIT_PG_track_binding", "FIT_PG_soft_body"} <= {
        g.identifier for g in groups
    }
    bad = [
        (g.identifier, p.identifier, p.description)
        for g in groups
        for p in g.properties
        if p.identifier != "rna_type" and _bad_tooltip(p.description)
    ]
    shared = bpy.types.Scene.bl_rna.properties["fit_to_target_shared"]
    bad += [("Scene", shared.identifier, shared.description)] if _bad_tooltip(shared.description) else []
    assert bad == []
    operators = [
        getattr(getattr(bpy.ops, area), name).get_rna_type()
        for area in ("object", "fit")
        for name in dir(getattr(bpy.ops, area))
    ]
    ours = [rna for rna in operators if rna.identifier.startswith(("OBJECT_OT_fit_to_target", "FIT_OT_"))]
    assert len(ours) > 10 and "FIT_OT_show_panel" in {rna.identifier for rna in ours}
    assert [(rna.identifier, rna.description) for rna in ours if _bad_tooltip(rna.description)] == []


def test_parameter_rows_use_blenders_names() -> None:
    ob = clamped_cloth()
    bpy.context.view_layer.objects.active = ob
    ob.fit_to_target.fit_air_damping = True
    log = draw()
    shown = texts(log)
    assert {"Air Viscosity", "Vertex Mass", "Max Tension", "Goal Damping"} <= set(shown), shown
    assert {"Stiffness", "Damping", "Shape", "Property Weights"} <= set(shown)
    assert not [t for t in shown if "air damping" in t.lower()], shown
    assert "Fits Tension Stiffness, Bending Stiffness, Air Viscosity; Compression Stiffness follows" in shown
    # each check box beside the modifier's own value
    rows = [
        (e[1], type(e[4]).__name__) for e in log_entries(draw_panel(panel.FIT_PT_parameters, bpy.context, []))
    ]
    for name in PARAMETER_NAMES:
        assert (f"fit_{name}", "FIT_PG_settings") in rows and (name, "ClothSettings") in rows, name
    # the check boxes' own names and tooltips are Blender's too; the core keeps its labels
    settings = bpy.types.Object.bl_rna.properties["fit_to_target"].fixed_type.properties
    assert settings["fit_air_damping"].name == "Fit Air Viscosity"
    assert "slows falling things down" in settings["fit_air_damping"].description
    assert settings["fit_mass"].name == "Fit Vertex Mass"
    assert settings["fit_young_modulus"].name == "Fit Young's Modulus"
    cloth = registry.scene_model("blender_cloth")
    assert {p.name: p.label for p in get_model("blender_cloth").parameters}["air_damping"] == "Air damping"
    grouped = [row.name for group in cloth.parameter_groups for row in group.rows]
    assert sorted(grouped) == sorted(p.name for p in get_model("blender_cloth").parameters)
    soft = registry.scene_model("soft_body")
    grouped = [row.name for group in soft.parameter_groups for row in group.rows]
    assert sorted(grouped) == sorted(p.name for p in get_model("soft_body").parameters)


def log_entries(root: Layout) -> list[tuple]:
    return [e for layout in root.walk() for e in layout.entries if e[0] == "prop"]


def _solver_rows(log: list) -> dict[str, tuple]:
    """Heading -> (switch, value, value active) of the Solver's rows with a switch."""
    root = draw_panel(panel.FIT_PT_solver, bpy.context, log)
    rows = {}
    for row in root.walk():
        if row.kind == "row" and row.heading and row.entries and len(row.children) == 1:
            (sub,) = row.children
            rows[row.heading] = (row.entries[0][1], sub.entries[0][1], sub.active)
    return rows


def test_auto_switches_and_the_request() -> None:
    ob = _cloth_with_target()
    s = ob.fit_to_target
    switches = (s.use_auto_tolerance, s.use_time_budget, s.use_auto_error_frame, s.use_auto_tolerance_px)
    assert switches == (True, False, True, True)
    request = fit_request.request_from_object(ob)
    assert (request.tolerance_m, request.time_budget_s, request.tolerance_px) == (None, None, None)
    # a check box and the value beside it, greyed while unused (no bare "0 m")
    assert _solver_rows([]) == {
        "Time Budget": ("use_time_budget", "time_budget", False),
        "Tolerance": ("use_auto_tolerance", "tolerance", False),
    }
    assert s.tolerance == pytest.approx(1e-3) and s.time_budget == pytest.approx(60.0)

    s.use_auto_tolerance = False
    assert _solver_rows([])["Tolerance"] == ("use_auto_tolerance", "tolerance", True)
    assert fit_request.request_from_object(ob).tolerance_m == pytest.approx(1e-3)
    s.tolerance = 2.5e-3
    assert fit_request.request_from_object(ob).tolerance_m == pytest.approx(2.5e-3)
    s.use_auto_tolerance = True  # the value is kept, unused
    assert fit_request.request_from_object(ob).tolerance_m is None and s.tolerance == pytest.approx(2.5e-3)
    s.use_auto_tolerance = False
    assert fit_request.request_from_object(ob).tolerance_m == pytest.approx(2.5e-3)
    s.tolerance = 0.0  # 0 is no tolerance to reach: automatic, as it always meant
    assert s.use_auto_tolerance and fit_request.request_from_object(ob).tolerance_m is None

    s.use_time_budget = True
    assert fit_request.request_from_object(ob).time_budget_s == pytest.approx(60.0)
    s.use_auto_tolerance_px = False
    assert fit_request.request_from_object(ob).tolerance_px == pytest.approx(1.0)
    # the error colors' frame: 0 is the last target frame, as the bake reads it
    assert s.error_frame == 0
    s.use_auto_error_frame = False
    assert s.error_frame == 10  # starts from the last target frame
    s.use_auto_error_frame = True
    assert s.error_frame == 0


def test_files_of_earlier_versions_keep_their_values(tmp_path) -> None:
    """Earlier versions stored 0 for automatic / no limit and a value otherwise, and nothing
    of the switches: with the switches untouched, such values stay explicit and such zeros
    automatic, also after saving and loading the file."""
    ob = _cloth_with_target()
    s = ob.fit_to_target
    s.tolerance, s.time_budget, s.error_frame, s.tolerance_px = 4e-3, 90.0, 10, 2.0  # as stored then
    other = _cloth_with_target("Auto", 2.0)
    t = other.fit_to_target
    t.tolerance, t.time_budget, t.error_frame, t.tolerance_px = 0.0, 0.0, 0, 0.0

    def check() -> None:
        s = bpy.data.objects["Cloth"].fit_to_target
        assert not (s.use_auto_tolerance or s.use_auto_error_frame or s.use_auto_tolerance_px)
        assert s.use_time_budget and s.error_frame == 10
        request = fit_request.request_from_object(bpy.data.objects["Cloth"])
        assert request.tolerance_m == pytest.approx(4e-3) and request.time_budget_s == pytest.approx(90.0)
        assert request.tolerance_px == pytest.approx(2.0)
        t = bpy.data.objects["Auto"].fit_to_target
        assert t.use_auto_tolerance and t.use_auto_error_frame and t.use_auto_tolerance_px
        assert not t.use_time_budget
        request = fit_request.request_from_object(bpy.data.objects["Auto"])
        assert (request.tolerance_m, request.time_budget_s, request.tolerance_px) == (None, None, None)

    check()
    path = tmp_path / "earlier.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    bpy.ops.wm.open_mainfile(filepath=str(path))
    check()
    # switching keeps the value: explicit again shows the file's value
    s = bpy.data.objects["Cloth"].fit_to_target
    s.use_auto_tolerance = True
    s.use_auto_tolerance = False
    assert s.tolerance == pytest.approx(4e-3)
    t = bpy.data.objects["Auto"].fit_to_target
    t.use_auto_tolerance = False  # the file's 0 was automatic: a value to start from instead
    assert t.tolerance == pytest.approx(1e-3)


def test_a_way_from_blenders_physics_panels() -> None:
    for name in physics_link.PHYSICS_PANELS:
        assert physics_link.draw_physics_link in getattr(bpy.types, name).draw._draw_funcs, name
    log: list = []
    physics_link.draw_physics_link(types.SimpleNamespace(layout=Layout(log)), bpy.context)
    assert ("label", "Fit to Target", "NONE") in log and ("operator", "fit.show_panel", True) in log
    screen = bpy.context.window_manager.windows[0].screen
    views = [a for a in screen.areas if a.type == "VIEW_3D"]
    for area in views:
        area.spaces.active.show_region_ui = False
    try:
        assert bpy.ops.fit.show_panel() == {"FINISHED"}
        assert views and all(area.spaces.active.show_region_ui for area in views)
        # headless, the sidebar never draws its tabs: the tab is chosen later, by a timer
        assert bpy.app.timers.is_registered(physics_link.choose_fit_tab_later)
    finally:
        if bpy.app.timers.is_registered(physics_link.choose_fit_tab_later):
            bpy.app.timers.unregister(physics_link.choose_fit_tab_later)


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
