"""Labels of variable text wrapped to the sidebar's width (Blender's labels never wrap: what
does not fit is cut off with an ellipsis)."""

from __future__ import annotations

import textwrap
from typing import Any

import bpy

# Pixels per character of Blender's UI font at UI scale 1.0 (11 px). blf.dimensions, which
# works headless, measures 5.0-5.5 px per character over the panel's messages and 6.5 over
# a line of digits and units ("RMSE 29.1 mm -> 0.0028 mm"); 7 keeps lines of capitals and
# digits inside the region as well.
AVERAGE_CHAR_PX = 7.0
# Taken from the region's width before wrapping: the panel's and a box's borders, a
# sub-panel's inset and the scroll bar.
MARGIN_PX = 40.0
# An icon in front of a label is about three characters wide.
ICON_CHARS = 3
# No line narrower than this, however narrow the sidebar: a word per line helps nobody.
MIN_CHARS = 16
# Without a region (a script or a test drawing the panel) nothing is cut: no wrapping.
UNLIMITED_CHARS = 10_000


def width_chars(context: Any) -> int:
    """How many characters of a label fit across the region ``context`` draws in."""
    region = getattr(context, "region", None)
    width_px = getattr(region, "width", 0) or 0
    if width_px <= 1:  # no region, or one not laid out yet
        return UNLIMITED_CHARS
    preferences = getattr(context, "preferences", None)
    scale = float(getattr(getattr(preferences, "system", None), "ui_scale", 0.0) or 1.0)
    return max(MIN_CHARS, int((width_px - MARGIN_PX * scale) / (AVERAGE_CHAR_PX * scale)))


def wrap_lines(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken between words (inside a word
    only when it alone is longer than a line); nothing is dropped but the spaces at breaks."""
    return textwrap.wrap(text, max(width, 1), break_on_hyphens=False) or [""]


def wrapped_label(layout: bpy.types.UILayout, text: str, width_chars: int, icon: str = "NONE") -> None:
    """``text`` as labels of at most ``width_chars`` characters, the icon in front of the
    first and the following lines indented to its text."""
    has_icon = icon != "NONE"
    lines = wrap_lines(text, width_chars - (ICON_CHARS if has_icon else 0))
    col = layout.column(align=True)
    for k, line in enumerate(lines):
        col.label(text=line, icon=icon if k == 0 else ("BLANK1" if has_icon else "NONE"))
