"""Blender side of Fit to Target: everything that imports bpy lives under this package.

Each submodule listed in ``_MODULES`` exposes a ``classes`` tuple; they are registered in
order and unregistered in reverse. Registering twice in one process is a no-op, so a test
session (or Blender's own reload) can call ``register()`` again safely.
"""

import bpy

from . import panel

_MODULES = (panel,)

_registered: list[type] = []


def _all_classes() -> list[type]:
    return [cls for module in _MODULES for cls in module.classes]


def register() -> None:
    if _registered:
        return
    try:
        for cls in _all_classes():
            bpy.utils.register_class(cls)
            _registered.append(cls)
    except Exception:
        unregister()
        raise


def unregister() -> None:
    while _registered:
        cls = _registered.pop()
        if getattr(cls, "is_registered", True):
            bpy.utils.unregister_class(cls)
