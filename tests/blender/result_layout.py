"""A recording stand-in for ``bpy.types.UILayout``, for the result rows' draw functions: every
label, operator, property and picture is logged with its icon and whether it is drawn as an
alert, and each icon, property and operator named is checked to exist."""

from __future__ import annotations

from typing import Any

import bpy

ICONS = set(bpy.types.UILayout.bl_rna.functions["label"].parameters["icon"].enum_items.keys())


class Layout:
    """Logs ("label", text, icon, alert), ("operator", idname, text, icon), ("prop", name) and
    ("picture", icon_value, scale) into ``log``."""

    def __init__(self, log: list, parent: Layout | None = None) -> None:
        self.log, self.parent = log, parent
        self.enabled, self.alert, self.scale_y, self.operator_context = True, False, 1.0, "EXEC_DEFAULT"

    @property
    def alerted(self) -> bool:
        return self.alert or (self.parent is not None and self.parent.alerted)

    def _child(self, *args: Any, **kwargs: Any) -> Layout:
        return Layout(self.log, self)

    row = column = box = grid_flow = split = _child

    def label(self, text: str = "", icon: str = "NONE", **kwargs: Any) -> None:
        assert icon in ICONS, icon
        self.log.append(("label", text, icon, self.alerted))

    def prop(self, data: Any, name: str, **kwargs: Any) -> None:
        assert name in data.bl_rna.properties, name
        self.log.append(("prop", name))

    def operator(self, idname: str, text: str = "", icon: str = "NONE", **kwargs: Any) -> OperatorProperties:
        module, name = idname.split(".")
        assert getattr(bpy.types, f"{module.upper()}_OT_{name}", None) is not None, idname
        assert icon in ICONS, icon
        self.log.append(("operator", idname, text, icon))
        return OperatorProperties(idname, self.log)

    def template_icon(self, icon_value: int = 0, scale: float = 1.0) -> None:
        assert icon_value > 0
        self.log.append(("picture", icon_value, scale))


class OperatorProperties:
    """What ``Layout.operator`` returns: a property set on it must exist on the operator; each
    one set is logged as ("set", idname, name, value)."""

    def __init__(self, idname: str, log: list) -> None:
        object.__setattr__(self, "_about", (idname, log))

    def __setattr__(self, name: str, value: Any) -> None:
        idname, log = self._about
        module, op = idname.split(".")
        assert name in getattr(getattr(bpy.ops, module), op).get_rna_type().properties, (idname, name)
        log.append(("set", idname, name, value))


def drawn(draw: Any, ob: bpy.types.Object, record: dict | None, width_chars: int = 60) -> tuple[bool, list]:
    """(what ``draw`` returned, its log) for one ``draw_*(layout, ob, record, width_chars)``."""
    log: list = []
    result = draw(Layout(log), ob, record, width_chars)
    return result, log


def labels(log: list) -> list[str]:
    return [entry[1] for entry in log if entry[0] == "label"]


def operators(log: list) -> list[str]:
    return [entry[1] for entry in log if entry[0] == "operator"]
