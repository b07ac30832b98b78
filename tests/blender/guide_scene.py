"""The artist guide's scene, on the real add-on: the demo scene with its targets added by *Add
Current Frame*, and what the Fit tab's panels draw for it, recorded as plain data that
``tools/panel_diagram.py`` turns into a picture.

``tools/guide_pictures.py`` uses it to write ``docs/images/guide-*``; the guide's test uses it
to check that those pictures are still what the panel code draws.

A recorded panel is a dict: ``title``, ``sub`` (a sub-panel), ``open`` and, drawn with the
:class:`Recorder` stand-in for ``bpy.types.UILayout``, ``header`` (what a sub-panel puts in
its header) and ``body`` (what ``draw`` puts in an open panel), each a tree of dicts: a
container ``{"kind": "column" | "row" | "box" | "split" | "grid", "items": [...], ...}`` or a
leaf (``label``, ``prop``, ``operator``, ``menu``, ``progress``, ``picture``, ``separator``,
``list``, ``group``). Property values are read from the real properties as they are drawn.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import blender_env  # noqa: F401  (an isolated Blender profile, before bpy)
import bpy  # noqa: I001
import numpy as np
from addon_scenes import addon_module, make_demo_module

panel = addon_module("ui.panel")
preset_menus = addon_module("ui.preset_menus")
result_ui = addon_module("ui.result_ui")
loss_curve = addon_module("scene.loss_curve")
staleness = addon_module("scene.staleness")

SIDEBAR_PX = 320
CLOTH = "Cloth"
# what a fit, Show Fit Error, Apply and Revert leave on the object's fit settings (what the
# Result sub-panel reads besides the scene)
STATE_FIELDS = ("result_json", "previous_values_json", "applied", "error_overlay_json", "bake_json")
# the sub-panels drawn open in each picture (a closed one shows its header only)
OPEN_BEFORE = ("FIT_PT_main", "FIT_PT_targets", "FIT_PT_parameters")
OPEN_RESULT = ("FIT_PT_main", "FIT_PT_result")
# Blender's display units for the scene's unit settings (metric, meters, kilograms, seconds)
UNIT_SYMBOLS = {"LENGTH": "m", "MASS": "kg", "TIME_ABSOLUTE": "s", "TIME": "s"}


class SidebarContext:
    """``bpy.context`` seen from a sidebar ``width_px`` wide at UI scale 1 (headless, the
    context has no region, and the panel would not wrap its labels)."""

    def __init__(self, width_px: int = SIDEBAR_PX) -> None:
        self.region = types.SimpleNamespace(width=width_px, type="UI")
        self.preferences = types.SimpleNamespace(system=types.SimpleNamespace(ui_scale=1.0))

    def __getattr__(self, name: str) -> Any:
        return getattr(bpy.context, name)


# -- the scene ---------------------------------------------------------------------------------------


def build_guide_scene(folder: Path) -> bpy.types.Object:
    """The demo scene (``assets/make_demo.py``, saved into ``folder``) with its targets taken
    away and added again as an artist does: select the target, then the cloth, go to the
    target's frame, *Add Current Frame*. Ends at frame 1 with the cloth active. The add-on
    must be registered."""
    demo = make_demo_module()
    demo.build_demo(folder / "demo.blend")
    scene = bpy.context.scene
    cloth = bpy.data.objects[CLOTH]
    targets = [(int(t.frame), t.object) for t in cloth.fit_to_target.targets]
    cloth.fit_to_target.targets.clear()
    for frame, target in targets:
        for ob in bpy.context.view_layer.objects:
            ob.select_set(ob in (target, cloth))
        bpy.context.view_layer.objects.active = cloth
        scene.frame_set(frame)
        if bpy.ops.object.fit_to_target_add_target() != {"FINISHED"}:
            raise RuntimeError(f"Add Current Frame refused {target.name} at frame {frame}")
    for ob in bpy.context.view_layer.objects:
        ob.select_set(ob == cloth)
    scene.frame_set(1)
    return cloth


def fit_state(ob: bpy.types.Object) -> dict[str, Any]:
    """:data:`STATE_FIELDS` of the object's fit settings, the result without the fingerprint
    of the scene it read (the picture is of a result that is not out of date; a scene built
    again elsewhere need not hash alike to the last bit)."""
    s = ob.fit_to_target
    state = {name: getattr(s, name) for name in STATE_FIELDS}
    record = json.loads(state["result_json"])
    record.pop("fingerprint", None)
    state["result_json"] = json.dumps(record)
    return state


def changed_parts(ob: bpy.types.Object) -> list[str]:
    """What has changed since the object's last fit read the scene (as the panel's *Out of
    date* row names it)."""
    return staleness.changed_parts(ob, json.loads(ob.fit_to_target.result_json))


def restore_fit_state(ob: bpy.types.Object, state: dict[str, Any]) -> None:
    """Put :func:`fit_state`'s fields back on the object, draw its loss-curve image, and go to
    the scene's first frame (where :func:`build_guide_scene` leaves it)."""
    for name in STATE_FIELDS:
        setattr(ob.fit_to_target, name, state[name])
    loss_curve.record_curve_image(ob)
    bpy.context.scene.frame_set(bpy.context.scene.frame_start)


# -- recording what the panels draw ------------------------------------------------------------------


def sidebar_panels() -> list[type]:
    """The panels of the Fit tab in the order Blender shows them: the main panel, then its
    sub-panels in the order the add-on registers them."""
    classes = [*panel.classes, *preset_menus.classes]
    return [c for c in classes if isinstance(c, type) and issubclass(c, bpy.types.Panel)]


def record_sidebar(context: Any, open_panels: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every panel of the Fit tab that shows for ``context`` (its poll passes): its title, its
    header's buttons and, when its id is in ``open_panels``, what it draws."""
    out = []
    for cls in sidebar_panels():
        poll = getattr(cls, "poll", None)
        if poll is not None and not poll(context):
            continue
        entry: dict[str, Any] = {
            "title": cls.bl_label,
            "sub": bool(getattr(cls, "bl_parent_id", "")),
            "open": cls.bl_idname in open_panels,
            "header": None,
            "body": None,
        }
        if hasattr(cls, "draw_header_preset"):
            entry["header"] = _drawn(cls.draw_header_preset, context)
        if entry["open"]:
            entry["body"] = _drawn(cls.draw, context)
        out.append(entry)
    return out


def _drawn(draw: Any, context: Any) -> dict[str, Any]:
    layout = Recorder(context)
    with curve_picture_icons():
        draw(types.SimpleNamespace(layout=layout), context)
    return layout.tree()


@contextlib.contextmanager
def curve_picture_icons() -> Iterator[None]:
    """Headless, Blender gives image previews no icon (``icon_id`` 0), so the Result sub-panel
    would leave out the loss-curve picture it shows in a window. While recording, the object's
    curve image (when it has one) is seen with an icon, as it is there."""
    real = result_ui.curve_image

    def with_icon(ob: bpy.types.Object) -> Any:
        image = real(ob)
        return None if image is None else types.SimpleNamespace(preview=types.SimpleNamespace(icon_id=1))

    result_ui.curve_image = with_icon
    try:
        yield
    finally:
        result_ui.curve_image = real


class Recorder:
    """Records what a panel draws, as ``bpy.types.UILayout`` would lay it out (see the module
    docstring); each property and operator it names must exist."""

    def __init__(
        self, context: Any, kind: str = "column", parent: Recorder | None = None, **extra: Any
    ) -> None:
        self.context, self.kind, self.parent, self.extra = context, kind, parent, extra
        self.items: list[Any] = []
        self.enabled = self.active = True
        self.alert = False
        self.scale_y, self.scale_x, self.operator_context, self.alignment = 1.0, 1.0, "EXEC_DEFAULT", "EXPAND"
        self._split: bool | None = None
        self.use_property_decorate = False

    @property
    def use_property_split(self) -> bool:
        if self._split is not None:
            return self._split
        return self.parent.use_property_split if self.parent is not None else False

    @use_property_split.setter
    def use_property_split(self, value: bool) -> None:
        self._split = bool(value)

    def tree(self) -> dict[str, Any]:
        items = [item.tree() if isinstance(item, Recorder) else _leaf_tree(item) for item in self.items]
        flags = {"active": self.active, "enabled": self.enabled, "alert": self.alert, "scale_y": self.scale_y}
        return {"kind": self.kind, **self.extra, **flags, "split": self.use_property_split, "items": items}

    def _child(self, kind: str, **extra: Any) -> Recorder:
        child = Recorder(self.context, kind, self, **extra)
        self.items.append(child)
        return child

    def row(self, align: bool = False, heading: str = "", **kwargs: Any) -> Recorder:
        return self._child("row", heading=heading)

    def column(self, align: bool = False, heading: str = "", **kwargs: Any) -> Recorder:
        return self._child("column", heading=heading)

    def box(self) -> Recorder:
        return self._child("box")

    def grid_flow(self, columns: int = 0, **kwargs: Any) -> Recorder:
        return self._child("grid", columns=columns)

    def split(self, factor: float = 0.0, **kwargs: Any) -> Recorder:
        return self._child("split", factor=factor)

    def panel(self, idname: str, default_closed: bool = False) -> tuple[Recorder, Recorder | None]:
        """A layout panel, open or closed as Blender first shows it."""
        header = Recorder(self.context, "row", self)
        body = None if default_closed else Recorder(self.context, "column", self)
        self.items.append({"kind": "group", "header": header, "body": body})
        return header, body

    def separator(self, factor: float = 1.0, **kwargs: Any) -> None:
        self.items.append({"kind": "separator"})

    def label(self, text: str = "", icon: str = "NONE", **kwargs: Any) -> None:
        self.items.append({"kind": "label", "text": text, "icon": icon})

    def prop(self, data: Any, name: str, text: str | None = None, icon: str = "NONE", **kwargs: Any) -> None:
        rna = data.bl_rna.properties[name]
        leaf = {"kind": "prop", "name": rna.name if text is None else text, "icon": icon}
        leaf["split"] = self.use_property_split
        leaf.update(_value_of(data, name, rna, bool(kwargs.get("expand"))))
        self.items.append(leaf)

    def prop_search(self, data: Any, name: str, search_data: Any, search_name: str, **kwargs: Any) -> None:
        assert search_name in search_data.bl_rna.properties, search_name
        self.prop(data, name, text=kwargs.get("text"), icon=kwargs.get("icon", "NONE"))

    def operator(self, idname: str, text: str | None = None, icon: str = "NONE", **kwargs: Any) -> Any:
        module, name = idname.split(".")
        rna = getattr(getattr(bpy.ops, module), name).get_rna_type()
        self.items.append({"kind": "operator", "text": rna.name if text is None else text, "icon": icon})
        return _OperatorProperties(rna)

    def menu(self, menu: str, text: str | None = None, icon: str = "NONE", **kwargs: Any) -> None:
        cls = getattr(bpy.types, menu)
        self.items.append({"kind": "menu", "text": cls.bl_label if text is None else text, "icon": icon})

    def progress(self, factor: float = 0.0, type: str = "BAR", text: str = "") -> None:
        self.items.append({"kind": "progress", "text": text, "factor": round(float(factor), 3)})

    def template_icon(self, icon_value: int = 0, scale: float = 1.0) -> None:
        self.items.append({"kind": "picture", "scale": float(scale)})

    def template_list(
        self,
        listtype: str,
        listid: str,
        data: Any,
        propname: str,
        active_data: Any,
        active_propname: str,
        **kw: Any,
    ) -> None:
        """The list as Blender draws it: each item by the list class's ``draw_item``."""
        ui_list = getattr(bpy.types, listtype)
        active = getattr(active_data, active_propname)
        rows = []
        for index, item in enumerate(getattr(data, propname)):
            row = Recorder(self.context, "row")
            ui_list.draw_item(
                None, self.context, row, data, item, "NONE", active_data, active_propname, index
            )
            rows.append(row)
        self.items.append(
            {"kind": "list", "rows": rows, "active": active, "min_rows": int(kw.get("rows", 5))}
        )


class _OperatorProperties:
    """What ``operator`` returns: a property set on it must be one of the operator's."""

    def __init__(self, rna: Any) -> None:
        object.__setattr__(self, "_rna", rna)

    def __setattr__(self, name: str, value: Any) -> None:
        assert name in self._rna.properties, (self._rna.identifier, name)


def _leaf_tree(leaf: dict[str, Any]) -> dict[str, Any]:
    if leaf["kind"] == "group":
        body = leaf["body"]
        return {"kind": "group", "header": leaf["header"].tree(), "body": body.tree() if body else None}
    if leaf["kind"] == "list":
        return {**leaf, "rows": [row.tree() for row in leaf["rows"]]}
    return leaf


def _value_of(data: Any, name: str, rna: Any, expand: bool) -> dict[str, Any]:
    """How the property shows its value: a check box, a number or text field, a menu, or the
    expanded items of an enum."""
    value = getattr(data, name)
    if rna.type == "BOOLEAN":
        return {"widget": "check", "value": bool(value)}
    if rna.type == "ENUM":
        shown = bpy.types.UILayout.enum_item_name(data, name, value)
        if expand:
            items = [item.name for item in rna.enum_items]
            return {"widget": "expand", "value": shown, "options": items}
        return {"widget": "menu", "value": shown}
    if rna.type == "POINTER":
        return {"widget": "text", "value": value.name if value is not None else ""}
    if rna.type == "STRING":
        return {"widget": "text", "value": value}
    if rna.type == "INT":
        return {"widget": "field", "value": str(value)}
    return {"widget": "field", "value": _float_text(float(value), rna)}


def _float_text(value: float, rna: Any) -> str:
    """A float as Blender's number field shows it: ``precision`` decimals, or with a unit four
    significant digits and the unit's symbol (the scene's units are SI)."""
    symbol = UNIT_SYMBOLS.get(rna.unit)
    if symbol is None:
        return f"{value:.{max(int(rna.precision), 0)}f}"
    return f"{value:.4g} {symbol}"


# -- the loss curve ----------------------------------------------------------------------------------

units = importlib.import_module(f"{blender_env.PACKAGE_NAME}.warp_core.targets.units")


def curve_rgb(record: dict[str, Any], width_px: int, height_px: int) -> np.ndarray:
    """The add-on's loss curve of ``record`` (``curve_pixels`` of its RMSE per iteration and
    tolerance), as RGB uint8 (height, width, 3), top row first: the bytes Blender keeps of
    the curve image the panel shows."""
    values = loss_curve.rmse_history(record)
    if not values:
        raise ValueError(f"the record of '{record.get('name')}' keeps no loss history")
    tolerance = record.get(f"tolerance_{units.unit_of(record.get('unit')).symbol}")
    rgba = loss_curve.curve_pixels(values, tolerance, width_px, height_px)
    return np.round(rgba[::-1, :, :3] * 255.0).astype(np.uint8)
