"""The Weight Map sub-panel: its settings on the object and the request they make, the checks
of the regions, what the sub-panel draws, the result rows of a fitted map, and Show Fitted
Weights entering Weight Paint mode on the group the weights were written to."""

from __future__ import annotations

import importlib
import json
import types

import bpy
import numpy as np
import pytest
from addon_scenes import add_targets_from_blender, addon_module, clamped_cloth, fit_request, select
from blender_ref import addon_package
from result_layout import drawn, labels, operators
from test_addon_panel import ICON_PX, INSET_PX, WIDTHS_PX, Layout, SidebarContext, draw_panel, text_width_px

panel = addon_module("ui.panel")
panel_maps = addon_module("ui.panel_maps")
map_properties = addon_module("ui.map_properties")
map_result_ui = addon_module("ui.map_result_ui")
panel_result = addon_module("ui.panel_result")
checks = addon_module("scene.checks")
errors = addon_module("errors")
maps_module = importlib.import_module(f"{addon_package().__name__}.warp_core.fit.problem.maps")
MapRequest = fit_request.MapRequest

N = 6  # the sheet's vertices per side


def paint_regions(ob: bpy.types.Object, body_weight: float) -> dict[str, list[int]]:
    """Two painted groups: "Collar" (the two rows at +y, weight 1) and "Body" (the other rows,
    ``body_weight``); group -> its vertices."""
    y = np.array([v.co.y for v in ob.data.vertices])
    collar = np.flatnonzero(y >= np.sort(np.unique(y))[-2]).tolist()
    body = sorted(set(range(len(y))) - set(collar))
    ob.vertex_groups.new(name="Collar").add(collar, 1.0, "REPLACE")
    ob.vertex_groups.new(name="Body").add(body, body_weight, "REPLACE")
    return {"Collar": collar, "Body": body}


def painted_cloth() -> bpy.types.Object:
    """A clamped 6 x 6 sheet with a target at frame 10 and two painted groups (Body at 0.8)."""
    ob = clamped_cloth(n=N)
    target = clamped_cloth(name="Cloth target", n=N, location=(0.0, 0.0, 0.5))
    item = ob.fit_to_target.targets.add()
    item.kind, item.object, item.frame = "OBJECT", target, 10
    paint_regions(ob, 0.8)
    select([ob], ob)
    return ob


def add_region(ob: bpy.types.Object, group: str) -> None:
    """Press + with ``group`` the active vertex group (the row takes its name)."""
    ob.vertex_groups.active_index = ob.vertex_groups[group].index
    assert bpy.ops.object.fit_to_target_add_map_region() == {"FINISHED"}


def test_settings_make_the_request() -> None:
    ob = painted_cloth()
    s = ob.fit_to_target
    assert (s.map_fit, s.map_kind, s.map_mode, s.map_group) == (False, "STRUCTURAL", "REGIONS", "")
    assert s.map_smoothness == pytest.approx(maps_module.DEFAULT_SMOOTHNESS, rel=1e-6)
    assert fit_request.request_from_object(ob).maps == []  # Fit Map off

    s.map_fit, s.map_kind = True, "SHEAR"
    add_region(ob, "Collar")
    add_region(ob, "Body")
    add_region(ob, "Body")  # listed already: an empty row to pick a group in
    assert [r.group for r in s.map_regions] == ["Collar", "Body", ""]
    assert s.active_map_region_index == 2
    assert bpy.ops.object.fit_to_target_remove_map_region() == {"FINISHED"}
    assert [r.group for r in s.map_regions] == ["Collar", "Body"] and s.active_map_region_index == 1
    request = fit_request.request_from_object(ob)
    assert request.maps == [MapRequest("shear", "", ["Collar", "Body"], None)]
    assert request.ties == {"compression_stiffness": "tension_stiffness"}  # Compression = Tension
    s.map_kind = "STRUCTURAL"  # the map sets compression with tension: no tie left to keep
    request = fit_request.request_from_object(ob)
    assert (request.fit, request.ties) == (["tension_stiffness", "bending_stiffness"], {})

    s.map_kind, s.map_mode, s.map_smoothness, s.map_group = "BENDING", "FREE", 0.02, "Body"
    (asked,) = fit_request.request_from_object(ob).maps
    assert (asked.kind, asked.group, asked.regions) == ("bending", "Body", [])
    assert asked.smoothness == 0.02  # as typed, not its float32 0.0199999996

    # a soft body's Map menu has its own kinds: Bending (the cloth's third) is none of them
    s.model = "SOFT_BODY"
    assert panel.FIT_PT_maps.poll(bpy.context)
    items = map_properties.map_kind_items("soft_body")
    assert [item[:2] for item in items] == [("STIFFNESS", "Stiffness"), ("DAMPING", "Damping")]
    assert s.map_kind == ""
    with pytest.raises(errors.FitInputError, match=r"^'Cloth': pick the map to fit in Weight Map"):
        fit_request.request_from_object(ob)
    s.map_kind, s.map_mode = "DAMPING", "REGIONS"
    assert fit_request.request_from_object(ob).maps == [MapRequest("damping", "Body", ["Collar", "Body"])]
    with pytest.raises(TypeError):
        s.map_kind = "SHEAR"  # not a soft body's map
    s.model = "BLENDER_CLOTH"
    assert s.map_kind == "SHEAR"  # the same place in the cloth's menu
    assert panel.FIT_PT_maps.poll(bpy.context)


def test_regions_are_checked() -> None:
    ob = painted_cloth()
    s = ob.fit_to_target
    s.map_fit = True
    with pytest.raises(
        errors.FitInputError, match=r"'Cloth': the structural map in Regions mode has no regions"
    ):
        fit_request.request_from_object(ob)
    assert "add the painted vertex groups" in checks.why_not_fittable(bpy.context, busy=None)

    add_region(ob, "Collar")
    s.map_regions.add().group = "Sleeve"  # a name typed in, no such group
    request = fit_request.request_from_object(ob)
    assert request.maps[0].regions == ["Collar", "Sleeve"]
    groups = [g.name for g in ob.vertex_groups]
    with pytest.raises(errors.FitInputError) as caught:
        checks.check_request(bpy.context.scene, ob, request, check_device=False)
    assert str(caught.value) == (
        "'Cloth' has no vertex group 'Sleeve' for a region of the structural map: paint one of that name, "
        "or pick an existing group"
    )
    assert checks.why_not_fittable(bpy.context, busy=None) == str(caught.value)  # the panel says it
    assert [g.name for g in ob.vertex_groups] == groups  # nothing made or changed

    s.map_regions[1].group = "Body"
    s.map_group = "Collar"  # the weights would overwrite a painted region
    with pytest.raises(errors.FitInputError, match=r"'Cloth'.*over region 'Collar': choose another"):
        checks.check_request(bpy.context.scene, ob, fit_request.request_from_object(ob), check_device=False)
    s.map_group = ""
    assert checks.why_not_fittable(bpy.context, busy=None) is None

    s.map_regions[1].group = ""  # a row left empty
    with pytest.raises(errors.FitInputError, match=r"'Cloth': region 2 of the structural map names no"):
        fit_request.request_from_object(ob)


def entries(root: Layout) -> list[tuple]:
    return [e for layout in root.walk() for e in layout.entries]


def props(log: list) -> list[str]:
    """The settings drawn, in order (properties and searches)."""
    return [e[1] for e in log if e[0] in ("prop", "prop_search")]


def test_sub_panel_draws_the_settings() -> None:
    ob = painted_cloth()
    s = ob.fit_to_target
    order = [cls.__name__ for cls in panel.classes if issubclass(cls, bpy.types.Panel)]
    assert order.index("FIT_PT_maps") == order.index("FIT_PT_parameters") + 1
    cls = panel.FIT_PT_maps
    assert (cls.bl_parent_id, cls.bl_category, cls.bl_region_type) == ("FIT_PT_main", "Fit", "UI")
    assert bpy.types.FIT_PT_maps is cls

    header: list = []
    cls.draw_header(types.SimpleNamespace(layout=Layout(header)), bpy.context)
    assert header == [("prop", "map_fit")]

    root = draw_panel(cls, bpy.context, log := [])
    assert root.use_property_split and not root.use_property_decorate and root.active is False  # greyed
    assert all(e[2] for e in entries(root) if e[0] in ("prop", "prop_search"))  # label | value
    assert props(log) == ["map_kind", "map_mode", "map_group"]
    assert ("list", "map_regions") in log
    assert {e[1] for e in log if e[0] == "operator"} == {
        "object.fit_to_target_add_map_region",
        "object.fit_to_target_remove_map_region",
    }
    text = [e[1] for e in log if e[0] == "label"]
    assert (
        "Sets Tension Stiffness and Compression Stiffness (weight 0), Max Tension and Max Compression "
        in (" ".join(text) + " ")
    )
    assert "Add the painted vertex groups whose value the fit finds, one value each" in text
    assert "Writes to a new group 'Fit Structural Stiffness'" in text

    # the region rows: each a search among the cloth's vertex groups, red when not one of them
    s.map_fit = True
    add_region(ob, "Collar")
    s.map_regions.add().group = "Sleeve"
    rows = []
    for index, item in enumerate(s.map_regions):
        row_log: list = []
        row = Layout(row_log)
        panel_maps.FIT_UL_map_regions.draw_item(
            None, bpy.context, row, s, item, 0, s, "active_map_region_index", index
        )
        ((*_, data),) = [e for e in entries(row) if e[0] == "prop_search"]
        assert row_log[1] == ("prop_search", "group", "vertex_groups") and data == item
        rows.append((item.group, row.children[0].alert))
    assert rows == [("Collar", False), ("Sleeve", True)]

    # free: the smoothness, no list; the modifier's group of the kind is where the weights go
    s.map_mode, s.map_kind = "FREE", "SHEAR"
    ob.modifiers["Cloth"].settings.vertex_group_shear_stiffness = "Body"
    root = draw_panel(cls, bpy.context, log := [])
    assert root.active is True
    assert props(log) == [
        "map_kind",
        "map_mode",
        "map_smoothness",
        "map_group",
    ]
    assert ("list", "map_regions") not in log
    text = [e[1] for e in log if e[0] == "label"]
    assert "Writes to 'Body', the Cloth's Shear Group" in text
    assert "Sets Shear Stiffness (weight 0), Max Shearing (weight 1)" in text
    s.map_group = "Collar"  # chosen: nothing to explain
    assert not [t for t in labels_of(cls) if t.startswith("Writes to")]


def test_every_label_fits_the_sidebar() -> None:
    """The sub-panel's and the map rows' labels, measured in Blender's UI font, fit a 300 px
    sidebar (the panel's labels of variable text wrap)."""
    ob = painted_cloth()
    s = ob.fit_to_target
    s.map_fit = True
    ob.fit_to_target.applied = True
    record = {"name": "Cloth", "model": "blender_cloth", "maps": RECORD_MAPS}
    for width in WIDTHS_PX:
        context = SidebarContext(width)
        for mode in ("REGIONS", "FREE"):
            s.map_mode = mode
            log: list = []
            draw_panel(panel.FIT_PT_maps, context, log)
            drawn_rows = drawn(map_result_ui.draw_maps, ob, record, panel.width_chars(context))[1]
            shown = [(e[1], e[2]) for e in log if e[0] == "label"] + [(e[1], e[2]) for e in drawn_rows]
            assert len(shown) > 6
            for text, icon in shown:
                used = text_width_px(text) + (ICON_PX if icon != "NONE" else 0)
                assert used <= width - INSET_PX, (width, text)


def labels_of(cls: type) -> list[str]:
    log: list = []
    draw_panel(cls, bpy.context, log)
    return [e[1] for e in log if e[0] == "label"]


RECORD_MAPS = {
    "structural": {
        "kind": "structural",
        "mode": "regions",
        "base": 15.0,
        "top": 42.5,
        "group": "Fit Structural Stiffness",
        "regions": {
            "Collar": {"value": 42.5, "determined": True},
            "Body": {"value": 15.0, "determined": False},
        },
        "weights": {"min": 0.0, "max": 1.0, "mean": 0.41},
        "vertices": 36,
        "settings": {"tension_stiffness": 15.0, "tension_stiffness_max": 42.5},
        "vertex_weights": [0.5] * 36,
    },
    "shear": {
        "kind": "shear",
        "mode": "free",
        "base": 2.0,
        "top": 31.25,
        "group": "Shear Out",
        "weights": {"min": 0.0, "max": 1.0, "mean": 0.3333},
        "vertices": 36,
        "undetermined_vertices": 7,
        "smoothness": 0.001,
        "settings": {"shear_stiffness": 2.0, "shear_stiffness_max": 31.25},
        "vertex_weights": [0.25] * 36,
    },
}


def test_result_rows_show_each_map() -> None:
    ob = painted_cloth()
    record = {"name": "Cloth", "model": "blender_cloth", "params": {"mass": 0.3}, "maps": RECORD_MAPS}
    ob.fit_to_target.applied = True
    shown, log = drawn(map_result_ui.draw_maps, ob, record)
    assert shown
    assert labels(log) == [
        "Structural map in vertex group 'Fit Structural Stiffness'",
        "Collar",
        "42.5",
        "Body",
        "15, not determined",
        "Shear map in vertex group 'Shear Out'",
        "Stiffness",
        "2 \u2192 31.25",
        "Weights",
        "0 \u2192 1, mean 0.333",
        "Not determined",
        "7 of 36 vertices",
    ]
    # a region's value as a fit parameter: by its region's name, with its map, not twice
    record["params"]["structural:Collar"] = 42.5
    record["identifiability"] = [
        {"name": "structural:Collar", "value": 42.5, "determined": True, "matched_range": [0.5, 2.0]}
    ]
    log = drawn(panel_result.draw_result, ob, record, 200)[1]
    assert labels(log).count("Collar") == 1 and "structural:Collar" not in labels(log)
    assert "Collar (Structural) 42.5: matched from 21.25 to 85" in labels(log)
    assert labels(log)[labels(log).index("Vertex Mass") + 1] == "- \u2192 0.3"
    ob.fit_to_target.applied = False  # not written yet: no group to name
    assert labels(drawn(map_result_ui.draw_maps, ob, record, 200)[1])[0] == (
        "Structural map (Apply writes its weights to a vertex group)"
    )
    assert drawn(map_result_ui.draw_maps, ob, {"name": "Cloth"}) == (False, [])

    # Show Fitted Weights, one per map, just before Show Fit Error
    log = drawn(panel_result.draw_result, ob, record)[1]
    ops = operators(log)
    assert ops.index("object.fit_to_target_show_weights") + 2 == ops.index("object.fit_to_target_show_error")
    assert [e[3] for e in log if e[0] == "set" and e[1] == "object.fit_to_target_show_weights"] == [
        "structural",
        "shear",
    ]
    one = {**record, "maps": {"shear": RECORD_MAPS["shear"]}}
    log = drawn(map_result_ui.draw_weights_buttons, ob, one)[1]
    assert [e[2] for e in log if e[0] == "operator"] == ["Show Fitted Weights"]
    assert "object.fit_to_target_show_weights" not in operators(
        drawn(panel_result.draw_result, ob, {"name": "Cloth"})[1]
    )


def test_show_fitted_weights() -> None:
    ob = painted_cloth()
    s = ob.fit_to_target
    entry = dict(RECORD_MAPS["shear"], group="Body")
    s.result_json = json.dumps({"name": "Cloth", "model": "blender_cloth", "maps": {"shear": entry}})
    active = ob.vertex_groups.active_index
    with pytest.raises(RuntimeError, match=r"fitted shear weights of 'Cloth' are not applied: press Apply"):
        bpy.ops.object.fit_to_target_show_weights()
    assert ob.vertex_groups.active_index == active and ob.mode == "OBJECT"

    s.applied = True
    with pytest.raises(
        RuntimeError, match=r"'Cloth' has no fitted structural map: its last fit found the shear"
    ):
        bpy.ops.object.fit_to_target_show_weights(kind="structural")
    assert bpy.ops.object.fit_to_target_show_weights() == {"FINISHED"}
    assert ob.vertex_groups.active.name == "Body" and ob.mode == "WEIGHT_PAINT"
    bpy.ops.object.mode_set(mode="OBJECT")

    # without a window (Blender run in the background): only the active group changes
    ob.vertex_groups.active_index = ob.vertex_groups["Collar"].index
    headless = types.SimpleNamespace(window=None, view_layer=bpy.context.view_layer)
    text = map_result_ui.show_weights(headless, ob, "Body")
    assert ob.vertex_groups.active.name == "Body" and ob.mode == "OBJECT"
    assert text == "'Body' is the active vertex group of 'Cloth': Weight Paint mode shows it"

    ob.vertex_groups.remove(ob.vertex_groups["Body"])
    with pytest.raises(RuntimeError, match=r"'Cloth' has no vertex group 'Body' any more"):
        bpy.ops.object.fit_to_target_show_weights()


def test_a_fitted_region_map_end_to_end() -> None:
    """Fit a structural map over two painted regions from the panel settings: the rows show
    the regions' values, Apply writes the weights (the softer region 0, the stiffer 1) and
    Show Fitted Weights paints that group."""
    bpy.context.scene.frame_end = 8
    ob = clamped_cloth(n=N, frame_end=8)
    members = paint_regions(ob, 1.0)
    add_targets_from_blender(ob, {"tension_stiffness": 40.0, "compression_stiffness": 40.0}, [8])
    select([ob], ob)
    s = ob.fit_to_target
    s.map_fit, s.max_iterations = True, 5
    add_region(ob, "Collar")
    add_region(ob, "Body")
    assert bpy.ops.object.fit_to_target() == {"FINISHED"}
    assert s.applied
    record = json.loads(s.result_json)
    entry = record["maps"]["structural"]
    values = {name: region["value"] for name, region in entry["regions"].items()}
    assert record["outcome"] == "converged"
    # one stiffness made the target: each region near it (one frame, five iterations)
    assert values == {"Collar": pytest.approx(40.0, rel=0.2), "Body": pytest.approx(40.0, rel=0.2)}
    group = entry["group"]
    assert group == "Fit Structural Stiffness" and group in ob.vertex_groups

    text = labels(drawn(map_result_ui.draw_maps, ob, record, 200)[1])
    assert text[0] == f"Structural map in vertex group '{group}'"
    for name, value in values.items():
        assert text[text.index(name) + 1] == f"{value:.6g}"

    softer = min(values, key=values.get)
    written = ob.vertex_groups[group]
    assert [written.weight(i) for i in members[softer]] == pytest.approx(
        [0.0] * len(members[softer]), abs=1e-6
    )
    stiffer = [i for name in values if name != softer for i in members[name]]
    assert [written.weight(i) for i in stiffer] == pytest.approx([1.0] * len(stiffer), abs=1e-6)

    ob.vertex_groups.active_index = ob.vertex_groups["pin"].index
    assert bpy.ops.object.fit_to_target_show_weights() == {"FINISHED"}
    assert ob.vertex_groups.active.name == group and ob.mode == "WEIGHT_PAINT"
    bpy.ops.object.mode_set(mode="OBJECT")
