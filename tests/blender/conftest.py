"""Blender tests: the add-on registered once in an isolated profile, an empty scene per test."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import blender_env
import bpy  # noqa: E402,I001  (must follow blender_env, which sets up the profile)
import pytest


@pytest.fixture(scope="session", autouse=True)
def addon_module() -> Iterator[ModuleType]:
    """The add-on package (dev copy from this checkout), registered for the whole session."""
    module = blender_env.import_addon_package()
    module.register()
    yield module
    module.unregister()


@pytest.fixture(autouse=True)
def empty_scene() -> None:
    """Every test starts from an empty factory scene; registered classes survive this."""
    bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
