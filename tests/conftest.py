"""Shared pytest setup: an isolated Blender user profile, the add-on registered once, Warp on CPU.

Environment variables are set at import time, before ``bpy`` is imported anywhere, so no test
ever reads or writes a real Blender configuration or extension repository.
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGE_NAME = "fit_to_target"  # stable import name of the repository root package

SESSION_TMP = Path(tempfile.mkdtemp(prefix="fit_to_target_tests_"))
atexit.register(shutil.rmtree, SESSION_TMP, ignore_errors=True)

for _var, _sub in (
    ("BLENDER_USER_RESOURCES", "resources"),
    ("BLENDER_USER_CONFIG", "resources/config"),
    ("BLENDER_USER_SCRIPTS", "resources/scripts"),
    ("BLENDER_USER_EXTENSIONS", "resources/extensions"),
):
    os.environ[_var] = str(SESSION_TMP / _sub)
    (SESSION_TMP / _sub).mkdir(parents=True, exist_ok=True)

os.environ.setdefault(
    "WARP_CACHE_PATH",
    str(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "fit_to_target" / "warp"),
)

if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # plain `import warp_core` for core tests

import bpy  # noqa: E402  (must follow the environment setup above)
import warp as wp  # noqa: E402

wp.config.quiet = True
wp.config.log_level = wp.LOG_WARNING  # module-load messages


def import_addon_package() -> ModuleType:
    """Import the repository root as ``fit_to_target``, whatever the checkout directory is called."""
    if PACKAGE_NAME in sys.modules:
        return sys.modules[PACKAGE_NAME]
    link_parent = SESSION_TMP / "import_root"
    link_parent.mkdir(exist_ok=True)
    link = link_parent / PACKAGE_NAME
    if not link.exists():
        link.symlink_to(REPO_ROOT, target_is_directory=True)
    sys.path.insert(0, str(link_parent))
    return importlib.import_module(PACKAGE_NAME)


@pytest.fixture(scope="session", autouse=True)
def addon_module() -> Iterator[ModuleType]:
    """The add-on package (dev copy from this checkout), registered for the whole session."""
    module = import_addon_package()
    module.register()
    yield module
    module.unregister()


@pytest.fixture(autouse=True)
def empty_scene() -> None:
    """Every test starts from an empty factory scene; registered classes survive this."""
    bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)


@pytest.fixture
def wp_device() -> str:
    """Warp device for tests: always the CPU, so results do not depend on the machine."""
    return "cpu"
