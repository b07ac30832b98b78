"""One run of the batch command, from the open scene to the report.

Every argument and every output path is checked before the first fit (:mod:`.paths`).
Objects are then fitted one after another on the main thread. Output: one parseable line
per optimizer iteration (``fit <object> iter <k> loss <value> <param>=<value> ...``, object
names quoted as for a POSIX shell), then a before -> after table per object.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO, TypeVar

import bpy

from ...warp_core.errors import one_line
from ...warp_core.fit import FitError, fit_shared
from ...warp_core.fit.verdict.report import format_table
from ..errors import FitInputError
from ..models.registry import scene_model
from ..presets import find_preset
from ..request import PreparedFit, following, parse_start_values
from ..scene.bake import bake_object
from ..scene.prepare import prepare_fit, run_fit
from ..scene.records import failure_record, result_record, shared_summary, surface_note
from ..scene.write_back import write_back
from ..warp_setup import resolve_device
from .args import (
    EXIT_FIT_FAILED,
    EXIT_NOT_CONVERGED,
    EXIT_OK,
    PROG,
    UsageError,
    not_a_file,
    parse_fit,
    parse_target,
    parse_tracks,
)
from .objects import pick_objects, request_for
from .outputs import StagedCaches, report_document, save_blend_atomically, write_json_atomically
from .paths import OutputPlan, check_references, plan_bake_files, plan_outputs
from .signals import Interrupted, SignalGuard, signal_name
from .streams import shell_word

T = TypeVar("T")


class BatchRun:
    """One run of the batch command: check every input and output path, fit each object
    on the main thread, then bake, save and report. A signal stops it at the next
    checkpoint (:mod:`.signals`); :meth:`interrupted` then writes the partial report."""

    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO, guard: SignalGuard) -> None:
        self.args = args
        self.out = out
        self.err = err
        self.guard = guard
        self.cancel = guard.cancel
        self.plan: OutputPlan | None = None
        self.records: list[dict[str, Any]] = []
        self.saved_to: str | None = None
        self.baked: list[str] = []  # caches renamed into place
        self.caches = StagedCaches(self.commit_check("bake"))  # baked, not yet in place
        self.shared: dict[str, Any] | None = None  # a shared fit's summary (--shared)

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def error(self, text: str) -> None:
        print(f"{PROG}: {text}", file=self.err, flush=True)

    def step(self, phase: str) -> None:
        """A checkpoint: stop here if a signal arrived (the test hook may send one first)."""
        self.guard.at(phase)
        notice = self.guard.pending_notice()
        if notice:
            print(notice, end="", file=self.err, flush=True)
        self.guard.checkpoint()

    def run(self) -> int:
        args = self.args
        input_path = self.scene_path()
        self.plan = plan = plan_outputs(args, input_path)
        if args.max_iters is not None and args.max_iters < 1:
            raise UsageError("--max-iters must be at least 1")
        device = self.check(resolve_device, args.device) if args.device else None
        start_values = self.preset_values(args.preset) if args.preset else None
        chosen = parse_fit(args.fit) if args.fit else None
        self.step("open")
        self.open_scene(input_path)
        targets = [parse_target(spec) for spec in args.target]
        tracks = parse_tracks(args.target_tracks) if args.target_tracks else None
        if tracks is not None and (targets or not args.object):
            raise UsageError(
                "--target-tracks needs --object NAME (the cloth the tracks are on) and no --target"
            )
        scene = bpy.context.scene
        objects = pick_objects(scene, args.object, targets, args.model)
        plan_bake_files(plan, [ob.name for ob in objects])
        check_references(plan)
        plan.lock()
        plan.remove_stale_temporaries()

        if args.shared and len(objects) < 2:
            raise UsageError(
                "--shared needs two or more objects to fit (--object, or objects with fit targets)"
            )
        prepared_fits = []
        for ob in objects:
            self.step("export")
            request = request_for(ob, args, chosen, targets, device, start_values, tracks)
            try:
                if args.shared and prepared_fits:
                    # as in the panel: the first object's parameters and run settings lead
                    request = following(request, prepared_fits[0].request)
                prepared_fits.append(prepare_fit(scene, ob, request))
            except FitInputError as e:
                raise UsageError(_prefixed(ob.name, str(e))) from e

        status = self.fit_shared(prepared_fits) if args.shared else self.fit_all(prepared_fits)
        self.step("fitted")
        if status == "ok" and plan.bake_dir is not None:
            status = self.bake_all(scene, device)
        if status == "ok" and plan.save is not None:
            status = self.save(plan.save)
        code = EXIT_OK if status == "ok" else EXIT_FIT_FAILED
        if code == EXIT_OK and self.unmatched():
            status, code = "not_converged", EXIT_NOT_CONVERGED
        if plan.report is not None:
            self.step("report")
            try:
                self.write_report(status, code)
            except OSError as e:
                self.error(f"cannot write the report {plan.report}: {_reason(e)}")
                code = EXIT_FIT_FAILED
        self.print_tables()
        if code == EXIT_NOT_CONVERGED:
            names = ", ".join(self.unmatched())
            self.error(f"not matched to the targets: {names} (values written; see the outcome above)")
        return code

    # -- arguments -------------------------------------------------------------------------
    def check(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)``, its FitInputError turned into a UsageError."""
        try:
            return function(*args)
        except FitInputError as e:
            raise UsageError(str(e)) from e

    def scene_path(self) -> Path:
        """The input file: the scene argument, else the file Blender has open."""
        scene = self.args.scene
        if scene:
            path = Path(scene).expanduser().resolve()
            if not path.is_file():
                raise UsageError(not_a_file(scene, path))
            return path
        if not bpy.data.filepath:
            raise UsageError("no scene file given")
        return Path(bpy.data.filepath).resolve()

    def open_scene(self, path: Path) -> None:
        current = Path(bpy.data.filepath).resolve() if bpy.data.filepath else None
        if current != path:
            try:
                bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
            except RuntimeError as e:
                raise UsageError(f"cannot open {self.args.scene}: {one_line(e)}") from e

    def preset_values(self, name: str) -> dict[str, Any]:
        try:
            preset = find_preset(name)
        except (LookupError, ValueError, OSError) as e:
            raise UsageError(f"preset '{name}': {one_line(e)}") from e
        fields = self.check(scene_model, preset.model).settings_fields
        values = dict(preset.values)
        return self.check(parse_start_values, json.dumps(values), f"preset '{name}'", fields)

    # -- fitting -------------------------------------------------------------------------------
    def fit_all(self, prepared_fits: list[PreparedFit]) -> str:
        status = "ok"
        for prepared in prepared_fits:
            name = prepared.request.object_name
            self.step("fit")
            try:
                result = run_fit(prepared, self.progress_printer(name), self.cancel)
            except (FitError, ValueError) as e:
                message = one_line(e)
                self.error(f"fit of {name} failed: {message}")
                self.records.append(failure_record(prepared.request, message))
                status = "failed"
                continue
            if result.cancelled or self.guard.interrupted:
                self.records.append(result_record(prepared, result))
                self.guard.checkpoint()
            self.records.append(write_back(bpy.data.objects[name], prepared, result))
        return status

    def fit_shared(self, prepared_fits: list[PreparedFit]) -> str:
        """One shared fit of every object; each gets the shared values and its own record."""
        names = [p.request.object_name for p in prepared_fits]
        self.step("fit")
        try:
            shared = fit_shared(
                [p.problem for p in prepared_fits],
                prepared_fits[0].settings,
                progress=self.progress_printer("shared:" + ",".join(names)),
                cancel=self.cancel,
                names=names,
            )
        except (FitError, ValueError) as e:
            message = one_line(e)
            self.error(f"shared fit of {', '.join(names)} failed: {message}")
            self.records += [failure_record(p.request, message) for p in prepared_fits]
            return "failed"
        self.shared = shared.summary(names)
        extra = {"run_objects": names, "shared": self.shared}
        for prepared, result in zip(prepared_fits, shared.members, strict=True):
            if result.cancelled or self.guard.interrupted:
                self.records.append({**result_record(prepared, result), **extra})
                continue
            self.records.append(
                write_back(bpy.data.objects[prepared.request.object_name], prepared, result, extra)
            )
        self.guard.checkpoint()
        return "ok"

    def unmatched(self) -> list[str]:
        """Objects whose fit ran but does not match its targets (an honest non-success), and
        the shared fit when it is not converged as a whole."""
        names = [r["name"] for r in self.records if r.get("outcome") not in (None, "converged")]
        if self.shared is not None and self.shared.get("outcome") != "converged":
            names.append("the shared fit")
        return names

    def progress_printer(self, name: str) -> Callable[[int, float, dict[str, float]], None]:
        label = shell_word(name)

        def progress(iteration: int, loss: float, values: dict[str, float]) -> None:
            if not self.args.quiet:
                params = " ".join(f"{k}={v:.9g}" for k, v in values.items())
                self.say(f"fit {label} iter {iteration} loss {loss:.9g} {params}")
            # a signal here makes the fit stop after this iteration (the cancel event)
            self.guard.at(f"iteration-{iteration}")
            notice = self.guard.pending_notice()
            if notice:
                print(notice, end="", file=self.err, flush=True)

        return progress

    def bake_all(self, scene: bpy.types.Scene, device: str | None) -> str:
        assert self.plan is not None and self.plan.bake_dir is not None
        directory = self.plan.bake_dir
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            self.error(f"--bake: cannot create {directory}: {_reason(e)}")
            return "failed"
        for record in self.records:
            self.step("bake")
            ob = bpy.data.objects[record["name"]]
            try:
                info = bake_object(
                    scene, ob, directory=str(directory), device=device, write_cache=self.caches.stage
                )
            except FitInputError as e:
                self.error(f"bake of {ob.name} failed: {e}")
                record["status"] = "failed"
                record["error"] = f"bake: {e}"
                self.drop_staged()
                return "failed"
            record["bake"] = info.filepath
            record["warnings"] = [*record.get("warnings", []), *info.warnings]
            ob.fit_to_target.result_json = json.dumps(record)
        return "ok" if self.plan.save is not None else self.commit_caches()

    def commit_caches(self) -> str:
        try:
            with self.guard.critical():
                self.baked = self.caches.commit()
        except OSError as e:
            self.drop_staged()
            self.error(f"--bake: cannot write the caches: {_reason(e)}; the previous caches are unchanged")
            return "failed"
        return "ok"

    def drop_staged(self) -> None:
        """Remove the caches never renamed into place; their records no longer name them."""
        dropped = self.caches.discard()
        for record in self.records:
            if record.get("bake") in dropped:
                del record["bake"]

    def save(self, path: Path) -> str:
        self.step("save")
        names = [r["name"] for r in self.records]
        try:
            with self.guard.critical():
                check = self.commit_check("save")
                save_blend_atomically(path, names, before_commit=check, caches=self.caches.pairs)
                self.saved_to = str(path)
                self.baked = self.caches.committed()
        except (RuntimeError, OSError) as e:
            kept = "file and its caches, if any, are" if self.caches.pairs else "file, if any, is"
            self.drop_staged()
            self.error(f"cannot save {path}: {_reason(e)}; the previous {kept} unchanged")
            return "failed"
        return "ok"

    def commit_check(self, phase: str) -> Callable[[], None]:
        """Called with an output written and verified, just before it is renamed into place."""

        def check() -> None:
            self.guard.at(f"{phase}-written")
            self.guard.checkpoint()

        return check

    # -- the end -------------------------------------------------------------------------------
    def write_report(self, status: str, code: int) -> None:
        assert self.plan is not None and self.plan.report is not None
        document = report_document(self.records, self.plan.input, self.saved_to, status, code, self.shared)
        with self.guard.critical():
            write_json_atomically(self.plan.report, document, before_commit=self.commit_check("report"))

    def print_tables(self) -> None:
        for record in self.records:
            for line in format_table(record):
                self.say(line)
            note = surface_note(record)
            if note:
                self.say(f"  {note}")
        if self.shared is not None:
            self.say(shared_summary(self.shared))

    def interrupted(self, stop: Interrupted) -> int:
        """After a signal: the partial report (if one was asked for), then one line. Before
        any fit there is nothing to report: an existing report is left as it was."""
        code = stop.exit_code
        written = kept = None
        self.drop_staged()
        report = self.plan.report if self.plan is not None else None
        if report is not None and not self.records and report.exists():
            report, kept = None, report
        if report is not None:
            try:
                document = report_document(
                    self.records, self.plan.input, self.saved_to, "cancelled", code, self.shared
                )
                write_json_atomically(report, document)
                written = report
            except (OSError, Interrupted) as e:
                self.error(f"the partial report was not written: {_reason(e)}")
        self.print_tables()
        done = f"{self.saved_to} was saved before the signal" if self.saved_to else "nothing was saved"
        if self.baked:
            done += f" ({len(self.baked)} cache file(s) baked before the signal)"
        where = f"; partial report in {written}" if written else ""
        if kept is not None:
            where = f"; {kept} was left as it was (nothing was fitted)"
        self.error(f"interrupted by {signal_name(stop.signum)}: {done}{where}")
        return code

    def close(self) -> None:
        """On every way out: caches never renamed into place are removed, the locks released."""
        self.drop_staged()
        if self.plan is not None:
            self.plan.unlock()


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return " ".join(error.strerror.split())
    return one_line(error)


def _prefixed(name: str, message: str) -> str:
    return message if name in message else f"{name}: {message}"
