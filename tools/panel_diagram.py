"""Diagrams of the Fit tab's panels as SVG, drawn from what the panel code draws.

The input is the recording ``tests/blender/guide_scene.py`` makes of the real panel classes'
draw calls (see its docstring): a list of panels, each a tree of layouts and leaves.
:func:`diagram_svg` lays them out in a sidebar :data:`WIDTH_PX` wide as Blender roughly does
(rows of :data:`UNIT_PX`, a property's label left of its value under the property split) in
Blender's default dark theme: labels as text, properties as check boxes, fields and menus
holding their values, operators as buttons, progress bars, boxes, lists and collapsible
groups. An icon is a similar text glyph. No bpy, no clock: one recording, one file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any
from xml.sax.saxutils import escape, unescape

WIDTH_PX = 320
UNIT_PX = 20.0  # a row (Blender's UI unit at scale 1)
GAP_PX = 2.0  # between rows, and between the items of a row
HEADER_PX = 26.0  # a panel's header
MARGIN_PX = 6.0  # around the panels, and a sub-panel's inset
INDENT_PX = 10.0  # a panel's content from its sides
SPLIT = 0.4  # the label column's share of a row under the property split
CHAR_PX = 6.1  # an average character at the 11 px UI font
ICON_PX = 16.0
FONT = "Inter, 'DejaVu Sans', 'Segoe UI', Helvetica, Arial, sans-serif"

# Blender's default theme ("Blender Dark"), as bpy 5.0.1 reports it
STYLE = f"""
text{{font:11px {FONT};fill:#e6e6e6}}
.h{{font-weight:bold}}
.c{{text-anchor:middle}}
.e{{text-anchor:end}}
.a{{fill:#ff7a7a}}
.region{{fill:#303030}}
.panel{{fill:#3d3d3d}}
.sub{{fill:#363636}}
.group{{fill:#333333}}
.box{{fill:#2d2d2d;stroke:#262626}}
.w{{fill:#545454;stroke:#3d3d3d}}
.f{{fill:#1d1d1d;stroke:#3d3d3d}}
.m{{fill:#282828;stroke:#3d3d3d}}
.s{{fill:#4772b3;stroke:#3d3d3d}}
.p{{fill:#222222}}
.hi{{fill:#4772b3;opacity:.55}}
.pic{{fill:#1c1c1c;stroke:#777777;stroke-dasharray:4 3}}
.d{{opacity:.45}}
""".strip()

# text glyphs standing in for Blender's icons, as "ICON:glyph" ("BLANK1:": a space, nothing drawn)
GLYPHS = dict(
    pair.split(":", 1)
    for pair in (
        "ADD:+ BLANK1: CANCEL:\u2298 CHECKMARK:\u2713 COLOR:\u25cf ERROR:\u26a0 FILE_CACHE:\u25a4 "
        "FILE_REFRESH:\u21bb GRAPH:\u223f HIDE_ON:\u25cc IMAGE_DATA:\u25a3 INFO:i KEYFRAME:\u25c6 "
        "LOOP_BACK:\u21b6 MESH_DATA:\u25b2 MODIFIER:\u2699 OBJECT_DATA:\u25b2 PLAY:\u25b6 PRESET:\u2261 "
        "QUESTION:? REMOVE:\u2212 SORT_ASC:\u2193 TIME:\u25f7 X:\u2715"
    ).split()
)
# the error legend's icons are the colours they name
SWATCHES = {"STRIP_COLOR_01": "#e2453d", "STRIP_COLOR_03": "#e8c53a", "STRIP_COLOR_04": "#6ac24a"}


@dataclass(frozen=True)
class Look:
    """How a layout's content is drawn, handed down from its parents: greyed (inactive or
    disabled), alert, and the row height."""

    dim: bool = False
    alert: bool = False
    row_px: float = UNIT_PX


class Canvas:
    """The SVG elements drawn so far, in painting order."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def rect(self, x: float, y: float, w: float, h: float, cls: str, look: Look | None = None) -> None:
        dim = " d" if look is not None and look.dim else ""
        self.parts.append(_rect(x, y, w, h, f'rx="4" class="{cls}{dim}"'))

    def text(self, x: float, y: float, text: str, look: Look, cls: str = "") -> None:
        """``text`` with its baseline centred in a row of ``look.row_px`` from ``y``."""
        classes = " ".join(c for c in (cls, "a" if look.alert else "", "d" if look.dim else "") if c)
        attr = f' class="{classes}"' if classes else ""
        baseline = y + look.row_px / 2.0 + 4.0
        self.parts.append(f'<text x="{_n(x)}" y="{_n(baseline)}"{attr}>{escape(text)}</text>')


def _rect(x: float, y: float, w: float, h: float, attributes: str) -> str:
    return f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(max(w, 0.0))}" height="{_n(h)}" {attributes}/>'


def _n(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def text_px(text: str) -> float:
    return len(text) * CHAR_PX


def diagram_svg(panels: list[dict[str, Any]], title: str, metadata: dict[str, Any] | None = None) -> str:
    """The SVG of ``panels`` (the main panel, then its sub-panels) in a sidebar of
    :data:`WIDTH_PX`; ``title`` is its accessible name, ``metadata`` (optional) JSON kept in
    the file, such as the state it shows."""
    canvas = Canvas()
    x, w = MARGIN_PX, WIDTH_PX - 2 * MARGIN_PX
    y = MARGIN_PX
    main_at = len(canvas.parts)
    for entry in panels:
        y = _panel(canvas, entry, x, y, w)
    canvas.parts.insert(main_at, _rect(x, MARGIN_PX, w, y - MARGIN_PX, 'rx="5" class="panel"'))
    height = y + MARGIN_PX
    head = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH_PX}" height="{_n(height)}" '
        f'viewBox="0 0 {WIDTH_PX} {_n(height)}">',
        f"<title>{escape(title)}</title>",
        f"<style>{STYLE}</style>",
    ]
    if metadata is not None:
        head.append(f"<metadata>{escape(json.dumps(metadata, sort_keys=True))}</metadata>")
    head.append(f'<rect width="{WIDTH_PX}" height="{_n(height)}" class="region"/>')
    return "\n".join([*head, *canvas.parts, "</svg>"]) + "\n"


def metadata_of(svg: str) -> dict[str, Any] | None:
    """The JSON :func:`diagram_svg` kept in ``svg``, or None."""
    start, end = svg.find("<metadata>"), svg.find("</metadata>")
    if start < 0 or end < 0:
        return None
    return json.loads(unescape(svg[start + len("<metadata>") : end]))


def _panel(canvas: Canvas, entry: dict[str, Any], x: float, y: float, w: float) -> float:
    """A panel's header and, when open, its content; a sub-panel is inset on a darker ground.
    Returns where the next panel starts."""
    look = Look()
    sub = entry["sub"]
    px, pw = (x + MARGIN_PX / 2, w - MARGIN_PX) if sub else (x, w)
    ground_at = len(canvas.parts)
    canvas.text(px + 8, y + 3, "\u25be" if entry["open"] else "\u25b8", look)
    canvas.text(px + 22, y + 3, entry["title"], look, "h")
    if entry.get("header"):
        _layout(canvas, entry["header"], px + pw - 96, y + 3, 90, look)
    bottom = y + HEADER_PX
    if entry["open"] and entry.get("body"):
        bottom += _layout(canvas, entry["body"], px + INDENT_PX, bottom, pw - 2 * INDENT_PX, look) + 8
    if sub:
        canvas.parts.insert(ground_at, _rect(px, y, pw, bottom - y, 'rx="5" class="sub"'))
    return bottom + (GAP_PX if sub else 0.0)


def _layout(canvas: Canvas, node: dict[str, Any], x: float, y: float, w: float, look: Look) -> float:
    """Draw ``node`` at (x, y) in ``w``; returns its height."""
    kind = node["kind"]
    if "items" in node:
        look = replace(
            look,
            dim=look.dim or not (node["active"] and node["enabled"]),
            alert=look.alert or node["alert"],
            row_px=look.row_px * node["scale_y"],
        )
        if kind in ("row", "split", "grid"):
            return _across(canvas, node, x, y, w, look)
        if kind == "box":
            at = len(canvas.parts)
            h = _down(canvas, node, x + 4, y + 4, w - 8, look) + 8
            canvas.parts.insert(at, _rect(x, y, w, h, 'rx="5" class="box"'))
            return h
        return _down(canvas, node, x, y, w, look)
    return LEAVES[kind](canvas, node, x, y, w, look)


def _heading(
    canvas: Canvas, node: dict[str, Any], x: float, y: float, w: float, look: Look
) -> tuple[float, float]:
    """A row's heading in the label column (under the property split): where its items go."""
    if not (node.get("heading") and node["split"]):
        return x, w
    canvas.text(x + w * SPLIT - 6, y, node["heading"], look, "e")
    return x + w * SPLIT, w * (1 - SPLIT)


def _down(canvas: Canvas, node: dict[str, Any], x: float, y: float, w: float, look: Look) -> float:
    x, w = _heading(canvas, node, x, y, w, look)
    heights = []
    for item in node["items"]:
        h = _layout(canvas, item, x, y + sum(heights) + GAP_PX * len(heights), w, look)
        heights.append(h)
    return sum(heights) + GAP_PX * max(len(heights) - 1, 0)


def _across(canvas: Canvas, node: dict[str, Any], x: float, y: float, w: float, look: Look) -> float:
    items = node["items"]
    if not items:
        return 0.0
    x, w = _heading(canvas, node, x, y, w, look)
    if node["kind"] == "grid":
        columns = max(int(node.get("columns") or 1), 1)
        cell_w = w / columns
        rows = [items[k : k + columns] for k in range(0, len(items), columns)]
        top = y
        for row in rows:
            top += max(_layout(canvas, it, x + k * cell_w, top, cell_w, look) for k, it in enumerate(row))
        return top - y
    widths = _widths(node, items, w)
    heights, left = [], x
    for item, width in zip(items, widths, strict=True):
        heights.append(_layout(canvas, item, left, y, width, look))
        left += width + GAP_PX
    return max(heights)


def _widths(node: dict[str, Any], items: list[dict[str, Any]], w: float) -> list[float]:
    """Each item's width in a row: a split gives its first item its factor; otherwise icon
    buttons, bare check boxes and labels take what they need and the rest share the remainder."""
    free = w - GAP_PX * (len(items) - 1)
    factor = float(node.get("factor") or 0.0)
    if node["kind"] == "split" and factor > 0.0:
        rest = (free * (1 - factor)) / max(len(items) - 1, 1)
        return [free * factor] + [rest] * (len(items) - 1)
    fixed = [_fixed_width(item) for item in items]
    # a name field (an object, a text) takes twice the share of a number or a button
    weights = [
        0 if f is not None else 2 if item.get("widget") == "text" else 1
        for item, f in zip(items, fixed, strict=True)
    ]
    if not any(weights):
        return [float(f) for f in fixed if f is not None]
    share = max(free - sum(f for f in fixed if f is not None), 0.0) / sum(weights)
    return [share * weight if f is None else float(f) for f, weight in zip(fixed, weights, strict=True)]


def _fixed_width(item: dict[str, Any]) -> float | None:
    """The width an item needs whatever the row's: None for one that takes a share."""
    kind = item["kind"]
    if kind in ("operator", "menu") and not item["text"]:
        return UNIT_PX + 4
    if kind == "prop" and item["widget"] == "check" and not item["name"]:
        return UNIT_PX
    if kind == "label":
        return text_px(item["text"]) + (ICON_PX + 4 if item["icon"] != "NONE" else 0) + 6
    if kind in ("row", "column") and item["items"] and not item.get("heading"):
        inner = [_fixed_width(child) for child in item["items"]]
        if any(f is None for f in inner):
            return None
        if kind == "column":
            return max(f for f in inner if f is not None)
        return sum(f for f in inner if f is not None) + GAP_PX * (len(inner) - 1)
    return None


def _clip(text: str, width: float) -> str:
    """``text`` cut to ``width`` with an ellipsis, as Blender cuts what a button cannot hold."""
    most = max(int(width / CHAR_PX), 1)
    return text if len(text) <= most else text[: most - 1] + "\u2026"


def _glyph(canvas: Canvas, icon: str, x: float, y: float, look: Look) -> float:
    """The icon's stand-in at x; returns how far the text that follows starts."""
    if icon == "NONE":
        return x
    if icon in SWATCHES:
        top = y + look.row_px / 2 - 5
        canvas.parts.append(_rect(x + 2, top, 10, 10, f'fill="{SWATCHES[icon]}"'))
    elif GLYPHS.get(icon, "\u2022"):
        canvas.text(x + 7, y, GLYPHS.get(icon, "\u2022"), look, "c")
    return x + ICON_PX + 4


def _label(canvas: Canvas, node: dict[str, Any], x: float, y: float, w: float, look: Look) -> float:
    tx = _glyph(canvas, node["icon"], x, y, look)
    if node["text"]:
        canvas.text(tx, y, node["text"], look)
    return look.row_px


def _button(canvas: Canvas, node: dict[str, Any], x: float, y: float, w: float, look: Look) -> float:
    """An operator or a menu: its icon and text centred on a button."""
    h = look.row_px
    canvas.rect(x, y, w, h, "w", look)
    icon = node["icon"]
    text = _clip(node["text"], w - 8 - (ICON_PX + 4 if icon != "NONE" else 0))
    width = text_px(text) + (ICON_PX + 4 if icon != "NONE" else 0)
    left = x + max((w - width) / 2, 2)
    tx = _glyph(canvas, icon, left, y, look)
    if text:
        canvas.text(tx, y, text, look)
    return h


def _prop(canvas: Canvas, node: dict[str, Any], x: float, y: float, w: float, look: Look) -> float:
    h, name, widget, value = look.row_px, node["name"], node["widget"], node["value"]
    if widget == "check":
        bx = x + w * SPLIT if node["split"] and name else x
        canvas.rect(bx + 3, y + (h - 14) / 2, 14, 14, "s" if value else "w", look)
        if value:
            canvas.text(bx + 10, y, "\u2713", look, "c")
        if name:
            canvas.text(bx + 22, y, name, look)
        return h
    if node["split"] and name:
        canvas.text(x + w * SPLIT - 6, y, name, look, "e")
        x, w, name = x + w * SPLIT, w * (1 - SPLIT), ""
    if widget == "expand":
        options = node["options"]
        each = (w - GAP_PX * (len(options) - 1)) / max(len(options), 1)
        for k, option in enumerate(options):
            left = x + k * (each + GAP_PX)
            canvas.rect(left, y, each, h, "s" if option == value else "w", look)
            canvas.text(left + each / 2, y, option, look, "c")
        return h
    cls = {"menu": "m", "text": "f"}.get(widget, "w")
    canvas.rect(x, y, w, h, cls, look)
    if widget in ("menu", "text"):
        tx = _glyph(canvas, node["icon"], x + 4, y, look)
        room = x + w - tx - (18 if widget == "menu" else 4)
        canvas.text(tx, y, _clip(f"{name}: {value}" if name else value, room), look)
        if widget == "menu":
            canvas.text(x + w - 10, y, "\u25be", look, "c")
    elif name:
        canvas.text(x + 8, y, _clip(name, w / 2 - 8), look)
        canvas.text(x + w - 8, y, value, look, "e")
    else:
        canvas.text(x + w / 2, y, _clip(value, w - 8), look, "c")
    return h


def _progress(canvas: Canvas, node: dict[str, Any], x: float, y: float, w: float, look: Look) -> float:
    h = look.row_px
    canvas.rect(x, y, w, h, "p", look)
    canvas.rect(x, y, w * node["factor"], h, "s", look)
    canvas.text(x + w / 2, y, node["text"], look, "c")
    return h


def _picture(canvas: Canvas, node: dict[str, Any], x: float, y: float, w: float, look: Look) -> float:
    """The loss-curve picture's place: a box as tall as the picture, saying what it holds."""
    h = node["scale"] * UNIT_PX
    side = min(h, w)
    canvas.rect(x + (w - side) / 2, y, side, h, "pic", look)
    canvas.text(x + w / 2, y + h / 2 - look.row_px / 2, "loss curve picture", look, "c")
    return h


def _separator(canvas: Canvas, node: dict[str, Any], x: float, y: float, w: float, look: Look) -> float:
    return UNIT_PX * 0.3


def _list(canvas: Canvas, node: dict[str, Any], x: float, y: float, w: float, look: Look) -> float:
    """A UI list: a row per item as its ``draw_item`` drew it, the active one highlighted."""
    rows = node["rows"]
    h = max(len(rows), node["min_rows"]) * (UNIT_PX + 1) + 4
    canvas.rect(x, y, w, h, "box", look)
    for k, row in enumerate(rows):
        top = y + 2 + k * (UNIT_PX + 1)
        if k == node["active"]:
            canvas.rect(x + 2, top, w - 4, UNIT_PX, "hi", look)
        _layout(canvas, row, x + 3, top, w - 6, look)
    return h


def _group(canvas: Canvas, node: dict[str, Any], x: float, y: float, w: float, look: Look) -> float:
    """A collapsible group of rows (a layout panel): its header, and its rows when open."""
    h = UNIT_PX + 2
    canvas.rect(x - 4, y, w + 8, h, "group", look)
    canvas.text(x + 2, y + 1, "\u25be" if node["body"] is not None else "\u25b8", look)
    _layout(canvas, node["header"], x + 16, y + 1, w - 16, look)
    if node["body"] is None:
        return h
    return h + GAP_PX + _layout(canvas, node["body"], x, y + h + GAP_PX, w, look)


LEAVES = {
    "label": _label,
    "prop": _prop,
    "operator": _button,
    "menu": _button,
    "progress": _progress,
    "picture": _picture,
    "separator": _separator,
    "list": _list,
    "group": _group,
}
