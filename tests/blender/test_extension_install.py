"""The packaged extension validates, installs into Blender, enables, and uninstalls cleanly."""

from __future__ import annotations

import importlib.util
import os
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import bpy

REPO_ROOT = Path(__file__).resolve().parents[2]
PKG_ID = "fit_to_target"
REPO_MODULE = "user_default"
EXT_MODULE = f"bl_ext.{REPO_MODULE}.{PKG_ID}"


def _load_build_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fit_to_target_build_script", REPO_ROOT / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _user_repo_index() -> int:
    repos = bpy.context.preferences.extensions.repos
    for index, repo in enumerate(repos):
        if repo.module == REPO_MODULE:
            return index
    raise AssertionError(f"no '{REPO_MODULE}' extension repository in {[r.module for r in repos]}")


def _installed_modules() -> list[str]:
    return [name for name in sys.modules if name == EXT_MODULE or name.startswith(EXT_MODULE + ".")]


def test_build_install_enable_uninstall(addon_module, tmp_path: Path) -> None:
    build = _load_build_script()
    zip_path = build.build_without_wheels(tmp_path)
    build.validate(zip_path)  # raises BuildError if Blender's validator rejects the package

    names = set(zipfile.ZipFile(zip_path).namelist())
    required = [
        "blender_manifest.toml",
        "__init__.py",
        "addon/__init__.py",
        "warp_core/__init__.py",
        # one module of each subpackage: every package directory ships, not only the top level
        *(f"addon/{sub}/__init__.py" for sub in ("cli", "models", "scene", "ui")),
        "addon/ui/panel.py",
        "addon/models/blender_cloth/scene_model.py",
        "warp_core/presets/files.py",
        "warp_core/models/blender_cloth/__init__.py",
    ]
    for name in required:
        assert name in names, f"{name} missing from {zip_path.name}"
    leaked = sorted(n for n in names if n.startswith(("tests/", ".", "wheels/", "dist/")) or ".whl" in n)
    assert not leaked, f"files that must not ship: {leaked}"
    assert not {"dev", "build.py", "requirements.txt", "requirements-dev.txt"} & names

    repo_index = _user_repo_index()
    repo_dir = Path(bpy.context.preferences.extensions.repos[repo_index].directory)
    # conftest points Blender's user extensions at a session temp dir, never a real profile.
    assert repo_dir.is_relative_to(os.environ["BLENDER_USER_EXTENSIONS"]), repo_dir

    # The session registered the dev copy; the installed copy defines the same class names.
    addon_module.unregister()
    installed = False
    try:
        assert not hasattr(bpy.types, "FIT_PT_main")
        result = bpy.ops.extensions.package_install_files(
            filepath=str(zip_path), repo=REPO_MODULE, enable_on_install=True
        )
        installed = True
        assert result == {"FINISHED"}
        assert (repo_dir / PKG_ID / "blender_manifest.toml").is_file()
        assert EXT_MODULE in bpy.context.preferences.addons.keys()
        assert EXT_MODULE in sys.modules
        assert bpy.types.FIT_PT_main.__module__ == f"{EXT_MODULE}.addon.ui.panel"

        result = bpy.ops.extensions.package_uninstall(repo_index=repo_index, pkg_id=PKG_ID)
        installed = False
        assert result == {"FINISHED"}
        assert EXT_MODULE not in bpy.context.preferences.addons.keys()
        assert not _installed_modules()
        assert not hasattr(bpy.types, "FIT_PT_main")
        assert not (repo_dir / PKG_ID).exists()
    finally:
        if installed:
            bpy.ops.extensions.package_uninstall(repo_index=repo_index, pkg_id=PKG_ID)
        addon_module.register()
    assert bpy.types.FIT_PT_main.__module__ == f"{addon_module.__name__}.addon.ui.panel"
