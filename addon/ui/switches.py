"""The Auto / Limit switches of the fit settings: the tolerances, the time budget and the error
colors' frame, each a check box over the value it switches.

Before the switches existed, 0 in the value itself meant automatic (or no limit), and files
saved then hold only the value. So each switch's getter falls back to that reading where the
file holds no state of the switch: such files keep their meaning without a conversion step
(no load handler, nothing to forget on files appended or linked from them).
"""

from __future__ import annotations

from collections.abc import Callable

import bpy

# the ``get`` and ``set`` keywords of the switch's BoolProperty
Accessors = dict[str, Callable]


def explicit_switch(value_name: str, start_value: float) -> Accessors:
    """``get`` and ``set`` of a switch on whether the setting ``value_name`` is used (True) or is
    automatic / unlimited (False).

    The switch's state is the ID property ``<value_name>_explicit`` of the settings, saved
    with the file. Without it (a file of an earlier version, or a switch never touched) the
    value is used when it was set above 0, as earlier versions read it. A value of 0 or less
    never counts as used. The value is kept while the switch is off, shown greyed, and comes
    back when it is switched on; one never set above 0 starts from ``start_value``."""
    key = f"{value_name}_explicit"

    def is_explicit(s: bpy.types.PropertyGroup) -> bool:
        stored = s.get(key)
        chosen = bool(stored) if stored is not None else s.is_property_set(value_name)
        return chosen and getattr(s, value_name) > 0

    def set_explicit(s: bpy.types.PropertyGroup, explicit: bool) -> None:
        s[key] = bool(explicit)
        if explicit and getattr(s, value_name) <= 0:
            setattr(s, value_name, start_value)

    return {"get": is_explicit, "set": set_explicit}


def auto_switch(value_name: str, start_value: float) -> Accessors:
    """:func:`explicit_switch` the other way round: on while the value is automatic."""
    explicit = explicit_switch(value_name, start_value)
    is_explicit, set_explicit = explicit["get"], explicit["set"]

    def is_auto(s: bpy.types.PropertyGroup) -> bool:
        return not is_explicit(s)

    def set_auto(s: bpy.types.PropertyGroup, auto: bool) -> None:
        set_explicit(s, not auto)

    return {"get": is_auto, "set": set_auto}


def last_frame_switch(frame_name: str) -> Accessors:
    """``get`` and ``set`` of a switch on for "the last target frame" over a frame setting where 0
    means just that, as the bake reads it: switched on it sets 0, switched off it starts
    from the last target frame (else the scene's current frame)."""

    def is_last(s: bpy.types.PropertyGroup) -> bool:
        return getattr(s, frame_name) <= 0

    def set_last(s: bpy.types.PropertyGroup, last: bool) -> None:
        if last:
            setattr(s, frame_name, 0)
        elif getattr(s, frame_name) <= 0:
            frames = [int(t.frame) for t in s.targets]
            scene = getattr(bpy.context, "scene", None)
            current = int(scene.frame_current) if scene is not None else 1
            setattr(s, frame_name, max(frames) if frames else max(current, 1))

    return {"get": is_last, "set": set_last}
