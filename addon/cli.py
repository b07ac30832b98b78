"""Headless fitting: one argument parser and one code path behind

* ``python batch.py SCENE.blend [ARGS]`` (the ``bpy`` module),
* ``blender -b SCENE.blend --python batch.py -- [ARGS]``,
* ``blender --command fit_to_target SCENE.blend [ARGS]`` (registered by the add-on; Blender
  only accepts identifiers as command names, so the id uses underscores).

Objects are fitted one after another on the main thread. Output: one parseable line per
optimizer iteration (``fit <object> iter <k> loss <value> <param>=<value> ...``, object
names quoted as for a POSIX shell), then a before -> after table per object. ``--save`` and
``--report`` are written atomically (temporary file + ``os.replace``).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import shlex
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, TextIO

import bpy

from ..warp_core.models.blender_cloth.params import PARAMETER_NAMES
from . import export, fitting
from .fitting import FitInputError, FitRequest, TargetSpec
from .properties import TIE_GROUPS, resolve_ties

COMMAND_ID = "fit_to_target"
PROG = "fit-to-target"

EXIT_OK = 0
EXIT_USAGE = 2  # bad arguments, missing file / object / target, input the fit cannot use
EXIT_FIT_FAILED = 3  # a fit (or its bake/save) failed; the report is still written
EXIT_INTERRUPTED = 130  # SIGINT: partial report, nothing saved


class UsageError(Exception):
    """Bad arguments or input: exit 2 with this one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line instead of usage + exit
        raise UsageError(message)


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = _Parser(
        prog=prog,
        description="Fit cloth material settings to target shapes, headless.",
        epilog="Exit codes: 0 success, 2 bad arguments or input, 3 a fit failed (report still "
        "written), 130 interrupted (partial report, nothing saved).",
    )
    p.add_argument("scene", nargs="?", help="the .blend file (optional when Blender has opened one)")
    p.add_argument(
        "--object", action="append", default=[], metavar="NAME",
        help="object to fit (repeatable); default: every object with fit targets",
    )
    p.add_argument(
        "--target", action="append", default=[], metavar="NAME@FRAME",
        help="target mesh object and frame (repeatable); replaces the saved targets",
    )
    p.add_argument("--fit", metavar="P1,P2,...", help="cloth settings to fit: " + ", ".join(PARAMETER_NAMES))
    p.add_argument("--no-ties", action="store_true", help="fit the listed parameters independently")
    p.add_argument("--device", help="cpu, cuda or cuda:N (default: the object's setting)")
    p.add_argument("--max-iters", type=int, metavar="N", help="maximum optimizer iterations")
    p.add_argument("--time-budget", type=float, metavar="SECONDS", help="stop each fit after this long")
    p.add_argument("--preset", metavar="NAME", help="start values from a material preset")
    p.add_argument("--save", metavar="OUT.blend", help="save the fitted scene here")
    p.add_argument("--in-place", action="store_true", help="allow --save to overwrite the input file")
    p.add_argument("--report", metavar="OUT.json", help="write a JSON report")
    p.add_argument("--bake", metavar="DIR", help="bake each fitted object to DIR/<object>.pc2")
    p.add_argument("--quiet", action="store_true", help="no per-iteration lines")
    return p


def main(argv: list[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the command line ``argv`` (without the program name); returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        args = build_parser().parse_args(argv)
        run = _Run(args, out, err)
        previous = _install_sigint(run.on_sigint)  # Ctrl+C: finish cleanly, from export to save
        try:
            return run.run()
        finally:
            _restore_sigint(previous)
    except KeyboardInterrupt:  # a second Ctrl+C
        print(f"{PROG}: interrupted: nothing was saved", file=err, flush=True)
        return EXIT_INTERRUPTED
    except UsageError as e:
        print(f"{PROG}: error: {' '.join(str(e).split())}", file=err, flush=True)
        return EXIT_USAGE
    except SystemExit as e:  # --help
        return int(e.code or 0)


# -- one run -----------------------------------------------------------------------------------


class _Run:
    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        self.args = args
        self.out = out
        self.err = err
        self.cancel = threading.Event()

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def run(self) -> int:
        args = self.args
        input_path = self.open_scene()
        save = self.output_path(args.save, "--save")
        if args.in_place and save is None:
            save = input_path
        if save is not None and save == input_path and not args.in_place:
            raise UsageError("--save would overwrite the input file: add --in-place to allow that")
        report = self.output_path(args.report, "--report")
        if args.max_iters is not None and args.max_iters < 1:
            raise UsageError("--max-iters must be at least 1")
        if args.time_budget is not None and args.time_budget <= 0:
            raise UsageError("--time-budget must be > 0 seconds")
        device = self.check(fitting.resolve_device, args.device) if args.device else None
        start_values = self.preset_values(args.preset) if args.preset else None
        chosen = self.parse_fit(args.fit) if args.fit else None
        targets = [self.parse_target(spec) for spec in args.target]
        scene = bpy.context.scene
        objects = self.pick_objects(scene, targets)

        prepared_fits = []
        for ob in objects:
            request = self.request_for(ob, chosen, targets, device, start_values)
            try:
                prepared_fits.append(fitting.prepare_fit(scene, ob, request))
            except FitInputError as e:
                raise UsageError(_prefixed(ob.name, str(e))) from e

        records: list[dict[str, Any]] = []
        status = self.fit_all(prepared_fits, records)
        if status == "ok" and args.bake:
            status = self.bake_all(scene, records, device)
        saved_to = None
        if status == "ok" and save is not None:
            try:
                save_blend_atomically(save)
                saved_to = str(save)
            except (RuntimeError, OSError) as e:
                self.error(f"cannot save {save}: {' '.join(str(e).split())}")
                status = "failed"
        code = {"ok": EXIT_OK, "failed": EXIT_FIT_FAILED, "cancelled": EXIT_INTERRUPTED}[status]
        if report is not None:
            write_json_atomically(report, self.report(records, input_path, saved_to, status, code))
        for record in records:
            for line in fitting.format_table(record):
                self.say(line)
        if status == "cancelled":
            self.error("interrupted: nothing was saved" + (f"; partial report in {report}" if report else ""))
        return code

    # -- arguments -------------------------------------------------------------------------
    def check(self, function, *a):
        try:
            return function(*a)
        except FitInputError as e:
            raise UsageError(str(e)) from e

    def open_scene(self) -> Path:
        scene = self.args.scene
        if scene:
            path = Path(scene).expanduser().resolve()
            if not path.is_file():
                raise UsageError(f"no such file: {scene}")
            current = Path(bpy.data.filepath).resolve() if bpy.data.filepath else None
            if current != path:
                try:
                    bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
                except RuntimeError as e:
                    raise UsageError(f"cannot open {scene}: {_first_line(e)}") from e
        elif not bpy.data.filepath:
            raise UsageError("no scene file given")
        return Path(bpy.data.filepath).resolve()

    def output_path(self, value: str | None, flag: str) -> Path | None:
        if not value:
            return None
        path = Path(value).expanduser().resolve()
        if not path.parent.is_dir():
            raise UsageError(f"{flag}: folder {path.parent} does not exist")
        if path.is_dir():
            raise UsageError(f"{flag}: {value} is a folder")
        return path

    def preset_values(self, name: str) -> dict[str, Any]:
        find = _find_preset_function()
        if find is None:
            raise UsageError("presets are not available")
        try:
            preset = find(name)
        except (KeyError, LookupError, ValueError, OSError) as e:
            raise UsageError(f"preset '{name}': {_first_line(e)}") from e
        if preset is None:
            raise UsageError(f"no preset named '{name}'")
        values = dict(preset.values)
        return self.check(fitting.parse_start_values, json.dumps(values), f"preset '{name}'")

    def parse_fit(self, text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        unknown = [n for n in names if n not in PARAMETER_NAMES]
        if unknown:
            raise UsageError(
                f"--fit: unknown parameter(s) {', '.join(unknown)}; choose from {', '.join(PARAMETER_NAMES)}"
            )
        if not names:
            raise UsageError("--fit: no parameters given")
        return list(dict.fromkeys(names))

    def parse_target(self, spec: str) -> TargetSpec:
        name, sep, frame = spec.rpartition("@")
        if not sep or not name:
            raise UsageError(f"--target {spec}: expected NAME@FRAME")
        try:
            frame_number = int(frame)
        except ValueError:
            raise UsageError(f"--target {spec}: frame '{frame}' is not a whole number") from None
        ob = bpy.data.objects.get(name)
        if ob is None:
            raise UsageError(f"--target {spec}: no object named '{name}'")
        if ob.type != "MESH":
            raise UsageError(f"--target {spec}: '{name}' is not a mesh ({ob.type.lower()})")
        return TargetSpec(frame=frame_number, object_name=name)

    def pick_objects(self, scene: bpy.types.Scene, targets: list[TargetSpec]) -> list[bpy.types.Object]:
        if self.args.object:
            objects = []
            for name in dict.fromkeys(self.args.object):
                ob = bpy.data.objects.get(name)
                if ob is None:
                    raise UsageError(f"no object named '{name}'")
                if scene.objects.get(name) is None:
                    raise UsageError(f"object '{name}' is not in scene '{scene.name}'")
                objects.append(ob)
            return objects
        target_names = {t.object_name for t in targets}
        if targets:
            # no saved settings needed: every cloth object of the scene gets the given targets
            objects = [
                o for o in scene.objects
                if o.type == "MESH" and o.name not in target_names and export.find_cloth_modifier(o)
            ]
        else:
            objects = [o for o in scene.objects if o.type == "MESH" and len(o.fit_to_target.targets) > 0]
        if not objects:
            raise UsageError("nothing to fit: no object has fit targets (use --object and --target)")
        return sorted(objects, key=lambda o: o.name)

    def request_for(
        self,
        ob: bpy.types.Object,
        chosen: list[str] | None,
        targets: list[TargetSpec],
        device: str | None,
        start_values: dict[str, Any] | None,
    ) -> FitRequest:
        try:
            fitting.check_object(ob)
            request = fitting.request_from_object(ob)
        except FitInputError as e:
            raise UsageError(_prefixed(ob.name, str(e))) from e
        if chosen is not None or self.args.no_ties:
            s = ob.fit_to_target
            base = chosen if chosen is not None else list(request.fit) + list(request.ties)
            ties_on = {key: (not self.args.no_ties) and bool(getattr(s, key)) for key in TIE_GROUPS}
            request.fit, request.ties = resolve_ties(base, ties_on)
        if targets:
            request.targets = list(targets)
        if device is not None:
            request.device = device
        if self.args.max_iters is not None:
            request.max_iterations = self.args.max_iters
        if self.args.time_budget is not None:
            request.time_budget_s = self.args.time_budget
        if start_values is not None:
            request.start_values = dict(start_values)
        return request

    # -- fitting -------------------------------------------------------------------------------
    def fit_all(self, prepared_fits: list[fitting.PreparedFit], records: list[dict[str, Any]]) -> str:
        from ..warp_core.fit import FitError

        status = "ok"
        try:
            for prepared in prepared_fits:
                name = prepared.request.object_name
                if self.cancel.is_set():
                    return "cancelled"
                try:
                    result = fitting.run_fit(prepared, self.progress_printer(name), self.cancel)
                except (FitError, ValueError) as e:
                    message = " ".join(str(e).split())
                    self.error(f"fit of {name} failed: {message}")
                    records.append(fitting.failure_record(prepared.request, message))
                    status = "failed"
                    continue
                if result.cancelled or self.cancel.is_set():
                    records.append(fitting.result_record(prepared, result))
                    return "cancelled"
                records.append(fitting.write_back(bpy.data.objects[name], prepared, result))
        except KeyboardInterrupt:  # a second Ctrl+C: stop now, still write the partial report
            return "cancelled"
        return status

    def on_sigint(self, _signum: int, _frame: Any) -> None:
        if self.cancel.is_set():
            raise KeyboardInterrupt
        self.cancel.set()
        self.error("interrupt: stopping after the current iteration (Ctrl+C again to stop now)")

    def progress_printer(self, name: str):
        if self.args.quiet:
            return None
        label = shlex.quote(name)

        def progress(iteration: int, loss: float, values: dict[str, float]) -> None:
            params = " ".join(f"{k}={v:.9g}" for k, v in values.items())
            self.say(f"fit {label} iter {iteration} loss {loss:.9g} {params}")

        return progress

    def bake_all(self, scene: bpy.types.Scene, records: list[dict[str, Any]], device: str | None) -> str:
        from . import bake

        directory = Path(self.args.bake).expanduser().resolve()
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            self.error(f"--bake: cannot create {directory}: {e.strerror or e}")
            return "failed"
        for record in records:
            ob = bpy.data.objects[record["name"]]
            try:
                info = bake.bake_object(scene, ob, directory=str(directory), device=device)
            except FitInputError as e:
                self.error(f"bake of {ob.name} failed: {e}")
                record["status"] = "failed"
                record["error"] = f"bake: {e}"
                return "failed"
            record["bake"] = info.filepath
            ob.fit_to_target.result_json = json.dumps(record)
        return "ok"

    def error(self, text: str) -> None:
        print(f"{PROG}: {text}", file=self.err, flush=True)

    def report(
        self, records: list[dict[str, Any]], input_path: Path, saved_to: str | None, status: str, code: int
    ) -> dict[str, Any]:
        devices = sorted({r.get("device") for r in records if r.get("device")})
        return fitting.json_safe(
            {
                "version": fitting.REPORT_VERSION,
                "addon_version": fitting.addon_version(),
                "device": devices[0] if len(devices) == 1 else ",".join(devices) or None,
                "blend_file": str(input_path),
                "saved_to": saved_to,
                "status": status,
                "exit_code": code,
                "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "objects": records,
            }
        )


# -- files ---------------------------------------------------------------------------------------


def write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; a report is an ordinary file
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_blend_atomically(path: Path) -> None:
    """Save a copy of the open file to ``path`` through a temporary file in the same folder
    (so relative paths stay valid and a crash never leaves half a .blend)."""
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.blend")
    try:
        bpy.ops.wm.save_as_mainfile(filepath=str(tmp), copy=True)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
        tmp.with_name(tmp.name + "1").unlink(missing_ok=True)


# -- helpers -------------------------------------------------------------------------------------


def _find_preset_function():
    """``find_preset(name)`` of the presets module, wherever it lives; None if there is none."""
    base = __package__.rsplit(".", 1)[0]
    for module in (f"{base}.warp_core.presets", f"{base}.addon.presets"):
        try:
            found = getattr(importlib.import_module(module), "find_preset", None)
        except ImportError:
            continue
        if found is not None:
            return found
    return None


def _install_sigint(handler):
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        return signal.signal(signal.SIGINT, handler)
    except (ValueError, OSError):
        return None


def _restore_sigint(previous) -> None:
    if previous is not None:
        signal.signal(signal.SIGINT, previous)


def _prefixed(name: str, message: str) -> str:
    return message if name in message else f"{name}: {message}"


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


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
