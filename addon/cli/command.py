"""The batch command's entry point, one code path behind

* ``python batch.py SCENE.blend [ARGS]`` (the ``bpy`` module),
* ``blender -b SCENE.blend --python batch.py -- [ARGS]``,
* ``blender --command fit_to_target SCENE.blend [ARGS]`` (registered by the add-on; Blender
  only accepts identifiers as command names, so the id uses underscores).

``--save`` and ``--report`` are written atomically (temporary file + rename). A first
Ctrl+C stops after the current iteration and still writes the report; a second one stops now.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

import bpy

from ...warp_core.errors import one_line
from .args import COMMAND_ID, EXIT_INTERRUPTED, EXIT_USAGE, PROG, UsageError, build_parser
from .run import BatchRun


def main(argv: list[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the command line ``argv`` (without the program name); returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        args = build_parser().parse_args(argv)
        run = BatchRun(args, out, err)
        previous = _install_sigint(run.on_sigint)  # Ctrl+C: finish cleanly, from export to save
        try:
            return run.run()
        finally:
            _restore_sigint(previous)
    except KeyboardInterrupt:  # a second Ctrl+C
        print(f"{PROG}: interrupted: nothing was saved", file=err, flush=True)
        return EXIT_INTERRUPTED
    except UsageError as e:
        print(f"{PROG}: error: {one_line(e)}", file=err, flush=True)
        return EXIT_USAGE
    except SystemExit as e:  # --help
        return int(e.code or 0)


def _install_sigint(handler: Callable[[int, Any], None]) -> Any:
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        return signal.signal(signal.SIGINT, handler)
    except (ValueError, OSError):
        return None


def _restore_sigint(previous: Any) -> None:
    if previous is not None:
        signal.signal(signal.SIGINT, previous)


# -- `blender --command fit_to_target` ---------------------------------------------------------------

_handle = None


def _execute(argv: list[str]) -> int:
    return main(list(argv))


def register() -> None:
    global _handle
    if _handle is None and hasattr(bpy.utils, "register_cli_command"):
        _handle = bpy.utils.register_cli_command(COMMAND_ID, _execute)


def unregister() -> None:
    global _handle
    if _handle is not None:
        bpy.utils.unregister_cli_command(_handle)
        _handle = None


classes = ()
