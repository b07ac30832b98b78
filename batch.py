"""Fit to Target, headless (render farms, scripts, CI).

    .venv/bin/python batch.py SCENE.blend [ARGS]            # the project's environment (./dev setup)
    blender -b SCENE.blend --python batch.py -- [ARGS]      # a Blender binary (Warp installed for it)
    blender --command fit_to_target SCENE.blend [ARGS]      # with the extension installed

All three run ``addon.cli.command.main``: same arguments, output, report and exit codes
(``batch.py --help`` lists them). Inside a Blender binary that has the extension
enabled, the installed copy is used; otherwise this checkout is loaded as the package
``fit_to_target`` and registered.

SIGINT and SIGTERM are caught from the first line on: a signal while ``bpy`` loads (which
takes a second and must not be interrupted half-way) is kept and stops the run at its
first checkpoint, before anything is opened or written.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import signal
import sys
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parent
PACKAGE = "fit_to_target"  # the extension id (blender_manifest.toml)
EXIT_USAGE = 2
SELF_SIGNAL_ENV = "FIT_TO_TARGET_SELF_SIGNAL"  # test hook, see addon/cli/signals.py

PENDING_SIGNALS: list[int] = []


def _remember(signum: int, _frame: object) -> None:
    PENDING_SIGNALS.append(signum)


def catch_signals() -> None:
    """Record SIGINT/SIGTERM until the command installs its own handlers."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _remember)


def open_standard_descriptors() -> None:
    """Descriptors 0-2 on the null device where they were closed (``batch.py ... >&-``),
    before ``bpy`` opens anything: a file it opened would otherwise get one of them, and
    every line printed would go into that file."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


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


def missing_module_message(name: str) -> str:
    if name == "bpy":
        how = "run it with the project's environment (./dev setup, then .venv/bin/python batch.py ...)"
    else:
        how = (
            "run it with the project's environment (./dev setup, then .venv/bin/python batch.py ...), or "
            "in a Blender that has the extension installed (blender --command fit_to_target ...) or Warp "
            "installed for its Python (see docs/headless.md)"
        )
    return f"fit-to-target: error: this Python ({sys.executable}) has no '{name}' module: {how}"


def main() -> int:
    catch_signals()
    open_standard_descriptors()
    wanted, _, name = os.environ.get(SELF_SIGNAL_ENV, "").partition(":")
    if wanted == "import" and name:
        signal.raise_signal(getattr(signal, name))
    try:
        import bpy  # noqa: F401  (the slow import the early handlers protect)
        import warp as wp
    except ImportError as e:
        print(missing_module_message(e.name or str(e)), file=sys.stderr)
        return EXIT_USAGE
    # quiet Warp before anything initializes it (its banner is not part of our output)
    wp.config.log_level = wp.LOG_WARNING
    argv = command_line()
    addon = load_addon()
    cli = importlib.import_module(f"{addon.__name__}.addon.cli.command")
    code = cli.main(argv, pending_signals=PENDING_SIGNALS)
    if PENDING_SIGNALS and code == 0:  # a signal after the command had removed its handlers
        return 128 + PENDING_SIGNALS[0]
    return code


if __name__ == "__main__":
    sys.exit(main())
