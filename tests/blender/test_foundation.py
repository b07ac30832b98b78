"""Layout rules the rest of the project relies on."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import bpy

REPO_ROOT = Path(__file__).resolve().parents[2]
WARP_CORE = REPO_ROOT / "warp_core"

# Modules that exist only inside Blender (or the bpy wheel).
BLENDER_ONLY = {
    "bpy",
    "bpy_extras",
    "bmesh",
    "mathutils",
    "gpu",
    "gpu_extras",
    "blf",
    "idprop",
    "addon_utils",
}


def _blender_imports(path: Path) -> list[str]:
    """``file:line: statement`` for every import of a Blender-only module (or of ``addon``) in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(REPO_ROOT)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            # `from ..addon import x` reaches the bpy side of the package.
            if node.level >= 2 and module.split(".")[0] == "addon":
                found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
                continue
            names = [module] if node.level == 0 else []
        else:
            continue
        if any(name.split(".")[0] in BLENDER_ONLY for name in names):
            found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_warp_core_never_imports_bpy() -> None:
    files = sorted(WARP_CORE.rglob("*.py"))
    assert files, f"no Python files under {WARP_CORE}"
    offending = [hit for path in files for hit in _blender_imports(path)]
    assert not offending, "warp_core/ must not import Blender modules:\n" + "\n".join(offending)


def test_warp_core_imports_without_bpy() -> None:
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(REPO_ROOT)!r})\n"
        "for name in ('bpy', 'mathutils', 'bmesh'):\n"
        "    sys.modules[name] = None  # any import of these now raises ImportError\n"
        "import warp_core\n"
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"`import warp_core` without bpy failed:\n{proc.stdout}{proc.stderr}"


def test_panel_registered(addon_module) -> None:
    assert hasattr(bpy.types, "FIT_PT_main")
    panel = bpy.types.FIT_PT_main
    assert panel.__module__ == f"{addon_module.__name__}.addon.ui.panel"
    assert (panel.bl_space_type, panel.bl_region_type, panel.bl_category) == ("VIEW_3D", "UI", "Fit")


def test_register_twice_is_harmless(addon_module) -> None:
    addon_module.register()
    assert hasattr(bpy.types, "FIT_PT_main")
