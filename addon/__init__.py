"""Blender side of Fit to Target: everything that imports bpy lives under this package.

``ui`` is what Blender shows (settings, panel, operators, preset menus); ``scene`` reads a
fit's inputs from the scene and writes its results back; ``models`` holds each material
model's scene side, by name (``models/<model>/``, as in ``warp_core/models/``); ``cli`` is
the batch command. ``mesh_read`` turns scene meshes into arrays for the models and the scene
code; ``request``, ``session``, ``job`` and ``warp_setup`` are shared by the panel and the
batch command.

Each module listed in ``_MODULES`` exposes a ``classes`` tuple; they are registered in
order and unregistered in reverse. A module may also define ``register()`` /
``unregister()`` for what is not a class (properties on Blender types, CLI commands); those
run after all classes are registered and before any is unregistered. Registering twice in
one process is a no-op, so a test session (or Blender's own reload) can call ``register()``
again safely.
"""

import bpy

from .cli import command
from .models.soft_body import props as soft_body_props
from .ui import (
    bake_operators,
    fabric_operators,
    fabric_panel,
    fit_operators,
    map_operators,
    object_operators,
    panel,
    physics_link,
    preset_menus,
    preset_operators,
    properties,
    result_operators,
    tracks_ui,
)

_MODULES = (
    properties,
    soft_body_props,
    fit_operators,
    object_operators,
    bake_operators,
    result_operators,
    map_operators,
    tracks_ui,
    panel,
    fabric_operators,
    fabric_panel,
    preset_operators,
    preset_menus,
    physics_link,
    command,
)

_registered: list[type] = []
_hooked: list = []  # modules whose register() ran


def _all_classes() -> list[type]:
    return [cls for module in _MODULES for cls in module.classes]


def register() -> None:
    if _registered:
        return
    try:
        for cls in _all_classes():
            bpy.utils.register_class(cls)
            _registered.append(cls)
        for module in _MODULES:
            if hasattr(module, "register"):
                module.register()
                _hooked.append(module)
    except Exception:
        unregister()
        raise


def unregister() -> None:
    while _hooked:
        _hooked.pop().unregister()
    while _registered:
        cls = _registered.pop()
        if getattr(cls, "is_registered", True):
            bpy.utils.unregister_class(cls)
