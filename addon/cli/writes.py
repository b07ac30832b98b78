"""What a batch run writes after its fits: the bake's caches, the preset file, the .blend
and the report, each verified and renamed into place at a checkpoint a signal can stop.
With ``--keep-going`` the objects that failed are left out and the others still written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import bpy

from ...warp_core.errors import one_line
from ...warp_core.presets.files import write_preset_json
from ...warp_core.presets.schema import PresetError
from ..errors import FitInputError
from ..presets import preset_from_fit_result, preset_values_of
from ..scene.bake import bake_object
from .args import EXIT_USAGE, UsageError
from .outputs import report_document, save_blend_atomically, write_json_atomically
from .paths import take_lock
from .run_info import RunClock, run_info

if TYPE_CHECKING:
    import argparse

    from .outputs import StagedCaches
    from .paths import OutputPlan
    from .progress_log import ProgressLog
    from .signals import SignalGuard


class BatchRun(Protocol):
    """What the writing steps read and update of a batch run (``run.BatchRun`` is one)."""

    args: argparse.Namespace
    argv: list[str]
    clock: RunClock
    plan: OutputPlan | None
    guard: SignalGuard
    caches: StagedCaches
    log: ProgressLog
    records: list[dict[str, Any]]
    shared: dict[str, Any] | None
    saved_to: str | None
    saved_preset: str | None
    applied: list[str]
    baked: list[str]

    def error(self, text: str) -> None: ...

    def step(self, phase: str) -> None: ...


def reason(error: BaseException) -> str:
    """An error in words for a one-line message."""
    if isinstance(error, OSError) and error.strerror:
        return " ".join(error.strerror.split())
    return one_line(error)


def commit_check(run: BatchRun, phase: str) -> Callable[[], None]:
    """Called with an output written and verified, just before it is renamed into place."""

    def check() -> None:
        run.guard.at(f"{phase}-written")
        run.guard.checkpoint()

    return check


def bake_all(run: BatchRun, scene: bpy.types.Scene, device: str | None) -> str:
    """Bake every object whose values this run wrote; the caches wait for the save."""
    assert run.plan is not None and run.plan.bake_dir is not None
    directory = run.plan.bake_dir
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        run.error(f"--bake: cannot create {directory}: {reason(e)}")
        return "failed"
    status = "ok"
    # a baked cache is renamed into place only with the save: until every object is baked it is
    # not played, or each later bake's frame changes would have Blender warn it is missing
    unplayed: list[bpy.types.Object] = []
    try:
        for record in run.records:
            if record.get("status") != "ok":
                continue
            run.step("bake")
            if not _bake_one(run, scene, record, device):
                status = "failed"
                if not run.args.keep_going:
                    drop_staged(run)
                    return status
                continue
            unplayed.append(bpy.data.objects[record["name"]])
            _cache_modifier(unplayed[-1]).show_viewport = False
    finally:
        for ob in unplayed:
            _cache_modifier(ob).show_viewport = True
    if run.plan.save is not None:
        return status
    return "failed" if "failed" in (status, commit_caches(run)) else "ok"


def _bake_one(run: BatchRun, scene: bpy.types.Scene, record: dict[str, Any], device: str | None) -> bool:
    """Bake one object into a staged cache; False (the record says why) when it fails."""
    ob = bpy.data.objects[record["name"]]
    try:
        info = bake_object(
            scene, ob, directory=str(run.plan.bake_dir), device=device, write_cache=run.caches.stage
        )
    except FitInputError as e:
        run.error(f"bake of {ob.name} failed: {e}")
        record["status"] = "failed"
        record["error"] = f"bake: {e}"
        return False
    record["bake"] = info.filepath
    record["warnings"] = [*record.get("warnings", []), *info.warnings]
    ob.fit_to_target.result_json = json.dumps(record)
    run.log.event("bake", object=ob.name, cache=info.filepath)
    return True


def _cache_modifier(ob: bpy.types.Object) -> bpy.types.Modifier:
    return ob.modifiers[json.loads(ob.fit_to_target.bake_json)["modifier"]]


def commit_caches(run: BatchRun) -> str:
    try:
        with run.guard.critical():
            run.baked = run.caches.commit()
    except OSError as e:
        drop_staged(run)
        run.error(f"--bake: cannot write the caches: {reason(e)}; the previous caches are unchanged")
        return "failed"
    return "ok"


def drop_staged(run: BatchRun) -> None:
    """Remove the caches never renamed into place; their records no longer name them."""
    dropped = run.caches.discard()
    for record in run.records:
        if record.get("bake") in dropped:
            del record["bake"]


def save(run: BatchRun, path: Path) -> str:
    run.step("save")
    names = [r["name"] for r in run.records]
    try:
        with run.guard.critical():
            check = commit_check(run, "save")
            save_blend_atomically(path, names, before_commit=check, caches=run.caches.pairs)
            run.saved_to = str(path)
            run.baked = run.caches.committed()
    except (RuntimeError, OSError) as e:
        kept = "file and its caches, if any, are" if run.caches.pairs else "file, if any, is"
        drop_staged(run)
        run.error(f"cannot save {path}: {reason(e)}; the previous {kept} unchanged")
        return "failed"
    run.log.event("save", path=str(path), caches=list(run.baked))
    return "ok"


def save_preset(run: BatchRun, path: Path) -> str:
    """``--save-preset``: the fitted material as a preset file, only when its fit converged (a
    misfit's values are the best found, not a material to start other fits from)."""
    record = next((r for r in run.records if r.get("status") == "ok"), None)
    outcome = (run.shared or record or {}).get("outcome")
    if record is None or outcome != "converged":
        run.error(f"--save-preset: {path} not written: the fit did not converge ({outcome or 'no fit'})")
        return "ok"
    run.step("preset")
    try:
        ob = bpy.data.objects[record["name"]]
        preset = preset_from_fit_result(record["name"], record, preset_values_of(ob))
        with run.guard.critical():
            write_preset_json(preset, path)
    except (PresetError, OSError) as e:
        run.error(f"--save-preset: cannot write {path}: {reason(e)}")
        return "failed"
    run.saved_preset = str(path)
    return "ok"


def report(run: BatchRun, status: str, code: int, error: str | None = None) -> dict[str, Any]:
    """The run's report document, as it stands."""
    devices = [str(r["device"]) for r in run.records if r.get("device")]
    extra = {
        "run": run_info(run.argv, run.clock, run.args.threads, devices),
        "misfit_exit": run.args.misfit_exit,
        "log": str(run.plan.log) if run.plan is not None and run.plan.log is not None else None,
        "saved_preset": run.saved_preset,
        "applied": list(run.applied),
        **({"error": error} if error is not None else {}),
    }
    input_path = run.plan.input if run.plan is not None else None
    return report_document(run.records, input_path, run.saved_to, status, code, run.shared, extra)


def write_report(run: BatchRun, status: str, code: int) -> None:
    assert run.plan is not None and run.plan.report is not None
    document = report(run, status, code)
    with run.guard.critical():
        write_json_atomically(run.plan.report, document, before_commit=commit_check(run, "report"))


def usage_report(argv: list[str], clock: RunClock, message: str) -> dict[str, Any]:
    """The report of a command line refused before its run could start (exit 2)."""
    extra = {"run": run_info(argv, clock, None, []), "error": message}
    return report_document([], None, None, "usage_error", EXIT_USAGE, None, extra)


def write_refusal(path: Path, document: dict[str, Any], locked: bool) -> str | None:
    """The report of a run refused for bad input, at ``path``; unless its lock is ``locked``
    (held by the run) the folder is made and the lock taken first. Returns why it could not
    be written, else None; a report another run is writing stays that run's (None too)."""
    lock = None
    try:
        if not locked:
            path.parent.mkdir(parents=True, exist_ok=True)  # a farm's results folder
            lock = take_lock(path, "--report")
        write_json_atomically(path, document)
    except UsageError:
        return None
    except OSError as e:
        return reason(e)
    finally:
        if lock is not None:
            lock.release()
    return None
