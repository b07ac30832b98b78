"""One run of the batch command, from the open scene to the report.

Objects are fitted one after another on the main thread. Output: one parseable line per
optimizer iteration (``fit <object> iter <k> loss <value> <param>=<value> ...``, object
names quoted as for a POSIX shell), then a before -> after table per object.
"""

from __future__ import annotations

import argparse
import json
import shlex
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO, TypeVar

import bpy

from ...warp_core.errors import one_line
from ...warp_core.fit import FitError
from ...warp_core.fit.report import format_table
from ..errors import FitInputError
from ..models.base import resolve_ties
from ..models.registry import object_model, scene_model
from ..presets import find_preset
from ..request import FitRequest, PreparedFit, TargetSpec, parse_start_values, request_from_object
from ..scene.bake import bake_object
from ..scene.checks import check_object
from ..scene.prepare import prepare_fit, run_fit
from ..scene.records import failure_record, result_record
from ..scene.write_back import write_back
from ..warp_setup import resolve_device
from .args import EXIT_FIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, PROG, UsageError, parse_fit, parse_target
from .outputs import report_document, save_blend_atomically, write_json_atomically

T = TypeVar("T")


class BatchRun:
    """One run of the batch command: open the scene, check every input, fit each object on
    the main thread, then bake, save and report."""

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
        device = self.check(resolve_device, args.device) if args.device else None
        start_values = self.preset_values(args.preset) if args.preset else None
        chosen = parse_fit(args.fit) if args.fit else None
        targets = [parse_target(spec) for spec in args.target]
        scene = bpy.context.scene
        objects = self.pick_objects(scene, targets)

        prepared_fits = []
        for ob in objects:
            request = self.request_for(ob, chosen, targets, device, start_values)
            try:
                prepared_fits.append(prepare_fit(scene, ob, request))
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
                self.error(f"cannot save {save}: {one_line(e)}")
                status = "failed"
        code = {"ok": EXIT_OK, "failed": EXIT_FIT_FAILED, "cancelled": EXIT_INTERRUPTED}[status]
        if report is not None:
            write_json_atomically(report, report_document(records, input_path, saved_to, status, code))
        for record in records:
            for line in format_table(record):
                self.say(line)
        if status == "cancelled":
            self.error("interrupted: nothing was saved" + (f"; partial report in {report}" if report else ""))
        return code

    # -- arguments -------------------------------------------------------------------------
    def check(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)``, its FitInputError turned into a UsageError."""
        try:
            return function(*args)
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
                    raise UsageError(f"cannot open {scene}: {one_line(e)}") from e
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
        try:
            preset = find_preset(name)
        except (LookupError, ValueError, OSError) as e:
            raise UsageError(f"preset '{name}': {one_line(e)}") from e
        fields = self.check(scene_model, preset.model).settings_fields
        values = dict(preset.values)
        return self.check(parse_start_values, json.dumps(values), f"preset '{name}'", fields)

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
                o
                for o in scene.objects
                if o.type == "MESH" and o.name not in target_names and object_model(o).find_modifier(o)
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
            check_object(ob)
            request = request_from_object(ob)
        except FitInputError as e:
            raise UsageError(_prefixed(ob.name, str(e))) from e
        if chosen is not None or self.args.no_ties:
            s = ob.fit_to_target
            ties = object_model(ob).ties
            base = chosen if chosen is not None else list(request.fit) + list(request.ties)
            ties_on = {tie.key: (not self.args.no_ties) and bool(getattr(s, tie.key)) for tie in ties}
            request.fit, request.ties = resolve_ties(base, ties_on, ties)
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
    def fit_all(self, prepared_fits: list[PreparedFit], records: list[dict[str, Any]]) -> str:
        status = "ok"
        try:
            for prepared in prepared_fits:
                name = prepared.request.object_name
                if self.cancel.is_set():
                    return "cancelled"
                try:
                    result = run_fit(prepared, self.progress_printer(name), self.cancel)
                except (FitError, ValueError) as e:
                    message = one_line(e)
                    self.error(f"fit of {name} failed: {message}")
                    records.append(failure_record(prepared.request, message))
                    status = "failed"
                    continue
                if result.cancelled or self.cancel.is_set():
                    records.append(result_record(prepared, result))
                    return "cancelled"
                records.append(write_back(bpy.data.objects[name], prepared, result))
        except KeyboardInterrupt:  # a second Ctrl+C: stop now, still write the partial report
            return "cancelled"
        return status

    def on_sigint(self, _signum: int, _frame: Any) -> None:
        if self.cancel.is_set():
            raise KeyboardInterrupt
        self.cancel.set()
        self.error("interrupt: stopping after the current iteration (Ctrl+C again to stop now)")

    def progress_printer(self, name: str) -> Callable[[int, float, dict[str, float]], None] | None:
        if self.args.quiet:
            return None
        label = shlex.quote(name)

        def progress(iteration: int, loss: float, values: dict[str, float]) -> None:
            params = " ".join(f"{k}={v:.9g}" for k, v in values.items())
            self.say(f"fit {label} iter {iteration} loss {loss:.9g} {params}")

        return progress

    def bake_all(self, scene: bpy.types.Scene, records: list[dict[str, Any]], device: str | None) -> str:
        directory = Path(self.args.bake).expanduser().resolve()
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            self.error(f"--bake: cannot create {directory}: {e.strerror or e}")
            return "failed"
        for record in records:
            ob = bpy.data.objects[record["name"]]
            try:
                info = bake_object(scene, ob, directory=str(directory), device=device)
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


def _prefixed(name: str, message: str) -> str:
    return message if name in message else f"{name}: {message}"
