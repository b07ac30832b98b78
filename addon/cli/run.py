"""One run of the batch command, from the open scene to the report.

Every argument and every output path is checked before the first fit (:mod:`.paths`).
Objects are then fitted one after another on the main thread, or with ``--apply`` given
the values of earlier runs (:mod:`.apply`); :mod:`.writes` bakes, saves and reports.
Output: ``object <k> of <N>: <object>`` as each begins, one parseable line per optimizer
iteration (``fit <object> iter <k> loss <value> <param>=<value> ...``, object names quoted
as for a POSIX shell), then a before -> after table per object; ``--log`` writes the same
progress as JSON lines (:mod:`.progress_log`).
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

import bpy

from ...warp_core.errors import one_line
from ...warp_core.fit import FitError, FitProgress, ProgressListener, fit_shared, limit_cpu_threads, listener
from ...warp_core.fit.verdict.report import format_table
from ..errors import FitInputError
from ..models.registry import object_model
from ..request import PreparedFit, following
from ..scene.prepare import prepare_fit, run_fit
from ..scene.records import failure_record, input_failure_record, result_record, shared_summary, surface_note
from ..scene.write_back import write_back
from ..warp_setup import resolve_device
from . import writes
from .apply import FitRecord, apply_record, check_apply_options, objects_of, read_results
from .args import (
    EXIT_FIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    UsageError,
    parse_fit,
    parse_target,
    parse_tracks,
)
from .inputs import as_usage_error, open_scene, preset_values, scene_path
from .objects import map_requests, pick_objects, request_for
from .outputs import StagedCaches, map_lines, write_json_atomically
from .paths import OutputPlan, check_references, plan_bake_files, plan_outputs
from .progress_log import ProgressLog
from .run_info import RunClock
from .signals import Interrupted, SignalGuard, signal_name
from .streams import shell_word


class BatchRun:
    """One run of the batch command: check every input and output path, fit each object
    on the main thread (or, with ``--apply``, write earlier fits' values), then bake, save
    and report. A signal stops it at the next checkpoint (:mod:`.signals`);
    :meth:`interrupted` then writes the partial report."""

    def __init__(
        self,
        args: argparse.Namespace,
        out: TextIO,
        err: TextIO,
        guard: SignalGuard,
        argv: list[str],
        clock: RunClock,
    ) -> None:
        self.args = args
        self.argv = argv
        self.out = out
        self.err = err
        self.guard = guard
        self.cancel = guard.cancel
        self.clock = clock  # started with the command, before its arguments were read
        self.plan: OutputPlan | None = None
        self.log = ProgressLog()
        self.records: list[dict[str, Any]] = []
        self.saved_to: str | None = None
        self.saved_preset: str | None = None
        self.applied: list[str] = []  # the reports --apply wrote into the scene
        self.baked: list[str] = []  # caches renamed into place
        self.caches = StagedCaches(writes.commit_check(self, "bake"))  # baked, not yet in place
        self.places: dict[str, int] = {}  # object name -> its place (1..N) in this run
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
        input_path = scene_path(args.scene)
        self.plan = plan = plan_outputs(args, input_path)
        if args.max_iters is not None and args.max_iters < 1:
            raise UsageError("--max-iters must be at least 1")
        results: list[FitRecord] = []
        if args.apply:
            check_apply_options(args)
            results, empty = read_results(args.apply)
            results = [r for r in results if not args.object or r.name in args.object]
        device = as_usage_error(resolve_device, args.device) if args.device else None
        start_values = preset_values(args.preset) if args.preset else None
        chosen = parse_fit(args.fit) if args.fit else None
        maps = map_requests(args, chosen)
        limit_cpu_threads(args.threads)
        self.step("open")
        open_scene(input_path, args.scene)
        targets = [parse_target(spec) for spec in args.target]
        tracks = parse_tracks(args.target_tracks) if args.target_tracks else None
        if tracks is not None and (targets or not args.object):
            raise UsageError(
                "--target-tracks needs --object NAME (the cloth the tracks are on) and no --target"
            )
        scene = bpy.context.scene
        if args.apply:
            objects = objects_of(scene, results)
        else:
            objects = pick_objects(scene, args.object, targets, args.model)
        if args.save_preset and len(objects) > 1 and not args.shared:
            raise UsageError("--save-preset writes one material: fit one object (--object), or add --shared")
        if args.shared and len(objects) < 2:
            raise UsageError(
                "--shared needs two or more objects to fit (--object, or objects with fit targets)"
            )
        self.places = {ob.name: k for k, ob in enumerate(objects, start=1)}
        plan_bake_files(plan, [ob.name for ob in objects])
        check_references(plan)
        plan.lock()
        plan.remove_stale_temporaries()
        self.log = ProgressLog(plan.log)
        self.log.open()
        self.log.event("run_start", command_line=self.argv, blend_file=str(input_path), count=len(objects))

        if args.apply:
            status = self.apply_all(objects, results, empty)
        else:
            prepared_fits, status = self.prepare_all(
                scene, objects, (chosen, targets, device, start_values, tracks, maps)
            )
            if prepared_fits:
                fitted = self.fit_shared(prepared_fits) if args.shared else self.fit_all(prepared_fits)
                status = "failed" if "failed" in (status, fitted) else "ok"
        self.step("fitted")
        writing = status == "ok" or (args.keep_going and any(self.written()))
        if writing and plan.bake_dir is not None:
            status = self.worse(status, writes.bake_all(self, scene, device))
        if writing and plan.save_preset is not None:
            status = self.worse(status, writes.save_preset(self, plan.save_preset))
        if (status == "ok" or (args.keep_going and writing)) and plan.save is not None:
            status = self.worse(status, writes.save(self, plan.save))
        code = EXIT_OK if status == "ok" else EXIT_FIT_FAILED
        if code == EXIT_OK and self.unmatched():
            status, code = "not_converged", args.misfit_exit
        if plan.report is not None:
            self.step("report")
            try:
                writes.write_report(self, status, code)
            except OSError as e:
                self.error(f"cannot write the report {plan.report}: {writes.reason(e)}")
                code = EXIT_FIT_FAILED
        self.print_tables()
        if self.unmatched():
            self.error(f"not matched to the targets: {', '.join(self.unmatched())} ({self.where_values()})")
        self.log.event("run_end", status=status, exit_code=code, seconds=self.clock.seconds())
        return code

    @staticmethod
    def worse(status: str, then: str) -> str:
        return "failed" if "failed" in (status, then) else "ok"

    def written(self) -> list[str]:
        """The objects whose values this run wrote into the scene."""
        return [r["name"] for r in self.records if r.get("status") == "ok"]

    def where_values(self) -> str:
        """Where the values of a run that did not match went, in words."""
        if self.saved_to:
            return f"values saved in {self.saved_to}; see the outcome above"
        if self.plan is not None and self.plan.report is not None:
            return f"values in the report {self.plan.report}, not saved (no --save); see the outcome above"
        return "nothing saved (no --save); see the outcome above"

    # -- fitting -------------------------------------------------------------------------------
    def prepare_all(
        self, scene: bpy.types.Scene, objects: list[bpy.types.Object], choices: tuple
    ) -> tuple[list[PreparedFit], str]:
        """Each object's prepared fit; with ``--keep-going`` an object whose input the fit
        cannot use is reported as failed instead of refusing the run."""
        prepared_fits: list[PreparedFit] = []
        status = "ok"
        for ob in objects:
            self.step("export")
            try:
                request = request_for(ob, self.args, *choices)
                if self.args.shared and prepared_fits:
                    # as in the panel: the first object's parameters and run settings lead
                    request = following(request, prepared_fits[0].request)
                prepared_fits.append(prepare_fit(scene, ob, request))
            except (FitInputError, UsageError) as e:
                message = _prefixed(ob.name, str(e))
                if not self.args.keep_going or self.args.shared:
                    raise UsageError(message) from e
                self.error(f"{message} (skipped: --keep-going)")
                self.finished(input_failure_record(ob.name, object_model(ob).name, message))
                status = "failed"
        return prepared_fits, status

    def started(self, name: str) -> None:
        """An object's fit (or apply) begins: "object k of N" on stdout and in the log."""
        k, count = self.places[name], len(self.places)
        if not self.args.quiet:
            self.say(f"object {k} of {count}: {shell_word(name)}")
        self.log.event("object_start", object=name, index=k, count=count)

    def finished(self, record: dict[str, Any]) -> None:
        """An object's record joins the report, with its place in the run."""
        record.update(index=self.places[record["name"]], count=len(self.places))
        self.records.append(record)
        fields = {
            key: record.get(key) for key in ("index", "count", "status", "outcome", "rmse_m", "rmse_px")
        }
        self.log.event("object_end", object=record["name"], error=record.get("error"), **fields)

    def fit_all(self, prepared_fits: list[PreparedFit]) -> str:
        status = "ok"
        for prepared in prepared_fits:
            name = prepared.request.object_name
            self.step("fit")
            self.started(name)
            try:
                result = run_fit(prepared, self.progress_printer(name), self.cancel)
            except (FitError, ValueError) as e:
                message = one_line(e)
                self.error(f"fit of {name} failed: {message}")
                self.finished(failure_record(prepared.request, message))
                status = "failed"
                continue
            if result.cancelled or self.guard.interrupted:
                self.finished(result_record(prepared, result))
                self.guard.checkpoint()
            self.finished(write_back(bpy.data.objects[name], prepared, result))
        return status

    def fit_shared(self, prepared_fits: list[PreparedFit]) -> str:
        """One shared fit of every object; each gets the shared values and its own record."""
        names = [p.request.object_name for p in prepared_fits]
        self.step("fit")
        for name in names:
            self.started(name)
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
            for p in prepared_fits:
                self.finished(failure_record(p.request, message))
            return "failed"
        self.shared = shared.summary(names)
        extra = {"run_objects": names, "shared": self.shared}
        for prepared, result in zip(prepared_fits, shared.members, strict=True):
            if result.cancelled or self.guard.interrupted:
                self.finished({**result_record(prepared, result), **extra})
                continue
            ob = bpy.data.objects[prepared.request.object_name]
            self.finished(write_back(ob, prepared, result, extra))
        self.guard.checkpoint()
        return "ok"

    def apply_all(self, objects: list[bpy.types.Object], results: list[FitRecord], empty: list[str]) -> str:
        """``--apply``: each result's values into its object, as its fit would have written them."""
        status = "ok"
        for line in empty:
            self.error(f"--apply {line}")
            status = "failed"
        for ob, item in zip(objects, results, strict=True):
            self.step("apply")
            self.started(ob.name)
            record = apply_record(ob, item)
            if record.get("status") != "ok":
                self.error(f"{ob.name}: {record.get('error')}")
                status = "failed"
            self.finished(record)
            self.applied = list(dict.fromkeys([*self.applied, str(item.source)]))
        return status

    def unmatched(self) -> list[str]:
        """Objects whose fit ran but does not match its targets (an honest non-success), and
        the shared fit when it is not converged as a whole."""
        names = [
            r["name"]
            for r in self.records
            if r.get("status") != "failed" and r.get("outcome") not in (None, "converged")
        ]
        if self.shared is not None and self.shared.get("outcome") != "converged":
            names.append("the shared fit")
        return names

    def progress_printer(self, name: str) -> ProgressListener:
        """One line and one ``iteration`` log event per accepted point of the fit of ``name``;
        the event adds the fit's phase and RMSE (``rmse_m``, or ``rmse_px`` for footage)."""
        label = shell_word(name)

        def progress(report: FitProgress) -> None:
            if not report.accepted:
                return  # a phase change: lines and events follow the iterations
            iteration, loss, values = report.iteration, report.loss, report.values
            if not self.args.quiet:
                params = " ".join(f"{k}={v:.9g}" for k, v in values.items())
                self.say(f"fit {label} iter {iteration} loss {loss:.9g} {params}")
            misfit = {f"rmse_{report.unit.symbol}": report.rmse} if report.unit is not None else {}
            self.log.event(
                "iteration",
                object=name,
                iteration=iteration,
                loss=loss,
                values=values,
                phase=report.phase,
                **misfit,
            )
            # a signal here makes the fit stop after this iteration (the cancel event)
            self.guard.at(f"iteration-{iteration}")
            notice = self.guard.pending_notice()
            if notice:
                print(notice, end="", file=self.err, flush=True)

        return listener(progress)

    def print_tables(self) -> None:
        for record in self.records:
            for line in [*format_table(record), *map_lines(record)]:
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
        writes.drop_staged(self)
        report = self.plan.report if self.plan is not None else None
        if report is not None and not self.records and report.exists():
            report, kept = None, report
        if report is not None:
            try:
                write_json_atomically(report, writes.report(self, "cancelled", code))
                written = report
            except (OSError, Interrupted) as e:
                self.error(f"the partial report was not written: {writes.reason(e)}")
        self.print_tables()
        done = f"{self.saved_to} was saved before the signal" if self.saved_to else "nothing was saved"
        if self.baked:
            done += f" ({len(self.baked)} cache file(s) baked before the signal)"
        where = f"; partial report in {written}" if written else ""
        if kept is not None:
            where = f"; {kept} was left as it was (nothing was fitted)"
        self.error(f"interrupted by {signal_name(stop.signum)}: {done}{where}")
        self.log.event("run_end", status="cancelled", exit_code=code, seconds=self.clock.seconds())
        return code

    def refused(self, message: str) -> None:
        """Bad input (exit 2): the report names it, where this run's checks allowed a report."""
        report = self.plan.report if self.plan is not None else None
        if report is not None:
            document = {**writes.report(self, "usage_error", EXIT_USAGE, error=message), "objects": []}
            why = writes.write_refusal(report, document, locked=bool(self.plan.locks))
            if why is not None:
                self.error(f"the report was not written: {why}")
        self.log.event("run_end", status="usage_error", exit_code=EXIT_USAGE, error=message)

    def close(self) -> None:
        """On every way out: caches never renamed into place are removed, the locks released."""
        writes.drop_staged(self)
        self.log.close()
        if self.plan is not None:
            self.plan.unlock()


def _prefixed(name: str, message: str) -> str:
    return message if name in message else f"{name}: {message}"
