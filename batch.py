"""Fit to Target, headless (render farms, scripts, CI).

    python batch.py SCENE.blend [ARGS]                      # the bpy module from PyPI
    blender -b SCENE.blend --python batch.py -- [ARGS]      # a Blender binary
    blender --command fit_to_target SCENE.blend [ARGS]      # with the extension installed

All three run ``addon.cli.command.main``: same arguments, output, report and exit codes
(``python batch.py --help`` lists them). Inside a Blender binary that has the extension
enabled, the installed copy is used; otherwise this checkout is loaded as the package
``fit_to_target`` and registered.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parent
PACKAGE = "fit_to_target"  # the extension id (blender_manifest.toml)


def load_addon() -> ModuleType:
    """The add-on package, registered: an enabled installed copy if there is one, else this checkout."""
    import bpy

    for name in bpy.context.preferences.addons.keys():
        if name == PACKAGE or name.endswith("." + PACKAGE):
            return importlib.import_module(name)  # enabled, hence registered
    module = sys.modules.get(PACKAGE)
    if module is None:
        spec = importlib.util.spec_from_file_location(
            PACKAGE, REPO_ROOT / "__init__.py", submodule_search_locations=[str(REPO_ROOT)]
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[PACKAGE] = module
        spec.loader.exec_module(module)
    module.register()
    return module


def command_line(argv: list[str] | None = None, in_blender: bool | None = None) -> list[str]:
    """The arguments meant for us: after ``--`` inside a Blender binary (whose own arguments
    come first), else everything after the script name."""
    argv = list(sys.argv if argv is None else argv)
    if in_blender is None:
        import bpy

        in_blender = bool(bpy.app.binary_path)  # empty in the bpy module
    if in_blender:
        return argv[argv.index("--") + 1 :] if "--" in argv else []
    return argv[1:]


def main() -> int:
    # quiet Warp before anything initializes it (its banner is not part of our output)
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING
    argv = command_line()
    addon = load_addon()
    cli = importlib.import_module(f"{addon.__name__}.addon.cli.command")
    return cli.main(argv)


if __name__ == "__main__":
    sys.exit(main())
