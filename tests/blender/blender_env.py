"""An isolated Blender user profile and the add-on package, for tests that run real bpy.

Environment variables are set at import time, before ``bpy`` is imported anywhere, so no test
ever reads or writes a real Blender configuration, extension repository or cache folder. Import
this module before ``bpy``.
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE_NAME = "fit_to_target"  # stable import name of the repository root package

SESSION_TMP = Path(tempfile.mkdtemp(prefix="fit_to_target_tests_"))
atexit.register(shutil.rmtree, SESSION_TMP, ignore_errors=True)

for _var, _sub in (
    ("BLENDER_USER_RESOURCES", "resources"),
    ("BLENDER_USER_CONFIG", "resources/config"),
    ("BLENDER_USER_SCRIPTS", "resources/scripts"),
    ("BLENDER_USER_EXTENSIONS", "resources/extensions"),
    # Blender makes its thumbnail folders under the XDG cache as it starts; the Warp kernel
    # cache was placed by the top-level conftest before this runs, so it is not affected
    ("XDG_CACHE_HOME", "cache"),
):
    os.environ[_var] = str(SESSION_TMP / _sub)
    (SESSION_TMP / _sub).mkdir(parents=True, exist_ok=True)


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
