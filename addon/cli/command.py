"""The batch command's entry point, one code path behind

* ``.venv/bin/python batch.py SCENE.blend [ARGS]`` (a Python with the ``bpy`` module),
* ``blender -b SCENE.blend --python batch.py -- [ARGS]``,
* ``blender --command fit_to_target SCENE.blend [ARGS]`` (registered by the add-on; Blender
  only accepts identifiers as command names, so the id uses underscores).

Outputs are checked before any work and written atomically (:mod:`.outputs`). SIGINT and
SIGTERM stop the run at its next checkpoint with a partial report (:mod:`.signals`). What
it prints goes through streams a closed reader cannot break (:mod:`.streams`).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from typing import TextIO

import bpy

from ...warp_core.errors import abridged, one_line
from ..errors import addressed_to_batch
from .args import COMMAND_ID, EXIT_USAGE, PROG, UsageError, build_parser
from .paths import usage_report_path
from .run import BatchRun
from .run_info import RunClock
from .signals import Interrupted, SignalGuard, signal_name
from .streams import OutputStream, ignore_broken_pipes, open_standard_streams
from .writes import usage_report, write_refusal


def main(
    argv: list[str],
    out: TextIO | None = None,
    err: TextIO | None = None,
    pending_signals: list[int] | None = None,
) -> int:
    """Run the command line ``argv`` (without the program name); returns the exit code.

    ``pending_signals`` are SIGINT/SIGTERM numbers that arrived before this was called
    (``batch.py`` records them while bpy loads): the run stops at its first checkpoint."""
    open_standard_streams()
    stdout = OutputStream(out or sys.stdout)
    stderr = OutputStream(err or sys.stderr)
    guard = SignalGuard(threading.Event(), _fileno(stderr))
    guard.install()  # first, so that no signal between here and the run is lost
    broken_pipe = ignore_broken_pipes()
    run: BatchRun | None = None
    clock = RunClock()
    try:
        guard.adopt(pending_signals if pending_signals is not None else [])
        with contextlib.redirect_stdout(stdout):  # --help
            args = build_parser().parse_args(argv)
        run = BatchRun(args, stdout, stderr, guard, list(argv), clock)
        with addressed_to_batch():
            code = run.run()
        if guard.signum is not None:  # after the last checkpoint: every output was written
            name = signal_name(guard.signum)
            print(f"{PROG}: {name} arrived after the run had finished; its outputs are complete", file=stderr)
            return 128 + guard.signum
        return code
    except KeyboardInterrupt:  # no handler of ours (not the main thread)
        print(f"{PROG}: interrupted: nothing more was written", file=stderr, flush=True)
        return 130
    except Interrupted as stop:
        if run is None:
            print(f"{PROG}: interrupted by {signal_name(stop.signum)}: nothing was written", file=stderr)
            return stop.exit_code
        try:
            return run.interrupted(stop)
        except Interrupted:  # yet another signal while the partial report was written
            return stop.exit_code
    except UsageError as e:
        message = abridged(one_line(e))
        print(f"{PROG}: error: {message}", file=stderr, flush=True)
        _report_refusal(argv, run, clock, message, stderr)
        return EXIT_USAGE
    except SystemExit as e:  # --help
        return 128 + guard.signum if guard.signum is not None else int(e.code or 0)
    finally:
        if run is not None:
            run.close()  # on every way out: no staged cache left, no lock held
        guard.restore()
        if broken_pipe is not None:
            signal.signal(signal.SIGPIPE, broken_pipe)


def _report_refusal(
    argv: list[str], run: BatchRun | None, clock: RunClock, message: str, stderr: TextIO
) -> None:
    """Exit 2 writes the report, naming the bad input: where the run's checks allowed it, else
    where ``--report`` names a file that may be written (:func:`.paths.usage_report_path`)."""
    if run is not None and run.plan is not None:
        run.refused(message)
        return
    path = usage_report_path(list(argv))
    if path is not None:
        why = write_refusal(path, usage_report(list(argv), clock, message), locked=False)
        if why is not None:
            print(f"{PROG}: the report was not written: {why}", file=stderr, flush=True)


def _fileno(stream: TextIO | OutputStream) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):  # StringIO in tests
        return None


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
