"""Fit to Target on several selected objects: one after another in one background job, or
one shared material for all of them; the batch command gives the same values.

Targets come from Blender's own cloth solver with hidden values; every fit is judged by
Blender replaying the values it wrote.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import bpy
import pytest
from addon_scenes import (
    SWATCH_TRUTH,
    SWATCH_UNDETERMINED_ALONE,
    SWATCHES,
    add_targets_from_blender,
    addon_module,
    clamped_cloth,
    fit_operators,
    fit_session,
    job_module,
    modifier_values,
    open_blend,
    replay_rmse,
    select,
    snapshot,
    swatches,
    target_positions,
)
from batch_run import run_in_process
from test_addon_modal import HANG_GUARD_S, ContextProxy, OperatorStandIn, event, run_timers, start_fitting
from test_addon_panel import draw, labels
from test_batch import SCHEMA, schema_errors

FIT_OP = fit_operators.OBJECT_OT_fit_to_target
record_misfit = addon_module("ui.panel").record_misfit
FitJob = job_module.FitJob
MM = 1e-3

# three flags of different materials (tension = compression, bending), fitted from Blender's defaults
FLAG_TRUTHS = {
    "Flag A": {"tension_stiffness": 25.0, "compression_stiffness": 25.0, "bending_stiffness": 1.0},
    "Flag B": {"tension_stiffness": 60.0, "compression_stiffness": 60.0, "bending_stiffness": 3.0},
    "Flag C": {"tension_stiffness": 9.0, "compression_stiffness": 9.0, "bending_stiffness": 0.3},
}
ACTIVE = "Flag B"
RUN_ORDER = ["Flag B", "Flag A", "Flag C"]  # the active object first, then the others by name


def three_flags(folder: Path) -> Path:
    """Three cantilevers side by side, each with targets from its own hidden material; saved."""
    for k, (name, truth) in enumerate(FLAG_TRUTHS.items()):
        ob = clamped_cloth(name=name, location=(2.0 * k, 0.0, 1.0), frame_end=16)
        add_targets_from_blender(ob, truth, [8, 16])
    flags = [bpy.data.objects[n] for n in FLAG_TRUTHS]
    select(flags, bpy.data.objects[ACTIVE])
    path = folder / "flags.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def records(names: list[str]) -> dict[str, dict]:
    return {n: json.loads(bpy.data.objects[n].fit_to_target.result_json) for n in names}


def test_panel_fits_every_selected_object_one_after_another(tmp_path: Path) -> None:
    three_flags(tmp_path)
    flags = [bpy.data.objects[n] for n in FLAG_TRUTHS]
    before = {ob.name: modifier_values(ob) for ob in flags}
    ctx, op = ContextProxy(), OperatorStandIn()
    try:
        assert FIT_OP.invoke(op, ctx, event("LEFTMOUSE", "PRESS")) == {"RUNNING_MODAL"}
        session = start_fitting(op, ctx)
        assert session.object_names == RUN_ORDER
        bars: list[float] = []

        def record_bar() -> bool:
            bars.append(session.factor)
            return False

        assert run_timers(op, ctx, until=record_bar) == {"FINISHED"}
    finally:
        fit_session.end_session()

    # one progress bar over all three: "object k of 3" in the status bar, the bar only rising
    for k, name in enumerate(RUN_ORDER, start=1):
        assert any(t and f"object {k} of 3: {name}: " in t for t in ctx.status), (k, name)
    assert bars == sorted(bars) and bars[0] < 0.4 and bars[-1] > 0.6

    fitted = records(RUN_ORDER)
    assert [m for kind, m in op.reports if kind == {"INFO"}] and not [
        k for k, _ in op.reports if k != {"INFO"}
    ]
    for name, record in fitted.items():
        ob = bpy.data.objects[name]
        assert record["run_objects"] == RUN_ORDER and "shared" not in record
        assert record["outcome"] == "converged", (name, record["outcome_reason"])
        # Blender's own solver with the values written matches the targets
        replay = replay_rmse(ob, target_positions(ob))
        assert max(replay.values()) <= 1 * MM, (name, replay)
        assert record["initial_rmse_m"] > 10 * max(replay.values())
        # each object got its own material, not its neighbour's
        truth = FLAG_TRUTHS[name]["tension_stiffness"]
        assert modifier_values(ob)["tension_stiffness"] == pytest.approx(truth, rel=0.05), name

    # the panel lists every object of the run, and offers Apply All / Revert All
    log = draw()
    text = labels(log)
    for name in RUN_ORDER:
        row = text.index(name)
        assert text[row + 1 : row + 3] == ["converged", record_misfit(fitted[name], "rmse")], text
    assert ("operator property", "object.fit_to_target_revert", "Revert All", "all_objects", True) in log
    assert ("operator property", "object.fit_to_target_apply", "Apply All", "all_objects", True) in log

    # Revert All and Apply All act on every object of the run; per object stays per object
    assert bpy.ops.object.fit_to_target_revert(all_objects=True) == {"FINISHED"}
    assert {ob.name: modifier_values(ob) for ob in flags} == before
    assert bpy.ops.object.fit_to_target_apply() == {"FINISHED"}  # the active object only
    assert modifier_values(bpy.data.objects[ACTIVE])["bending_stiffness"] == pytest.approx(
        fitted[ACTIVE]["params"]["bending_stiffness"], rel=1e-6
    )
    assert modifier_values(bpy.data.objects["Flag A"]) == before["Flag A"]
    assert bpy.ops.object.fit_to_target_apply(all_objects=True) == {"FINISHED"}
    for name, record in fitted.items():
        values = modifier_values(bpy.data.objects[name])
        for p, v in record["params"].items():
            assert values[p] == pytest.approx(v, rel=1e-6), (name, p)

    # the batch command, objects in the same order, gives the same values
    batch_values, _ = batch_params(tmp_path, RUN_ORDER)
    for name, record in fitted.items():
        assert batch_values[name] == pytest.approx(record["params"], rel=1e-9), name


def batch_params(folder: Path, names: list[str], shared: bool = False) -> tuple[dict[str, dict], dict]:
    """The batch command on a copy of the open scene with every fitted value reverted first:
    ({object: fitted values}, the report)."""
    path = Path(bpy.data.filepath)
    for ob in bpy.data.objects:
        if ob.fit_to_target.result_json and ob.fit_to_target.applied:
            bpy.context.view_layer.objects.active = ob
            assert bpy.ops.object.fit_to_target_revert() == {"FINISHED"}
    source = folder / "batch_source.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source), copy=True)
    report = folder / "batch_report.json"
    args = [source, "--report", report, "--quiet", *(["--shared"] if shared else [])]
    for name in names:
        args += ["--object", name]
    code, out, err = run_in_process(*args)
    open_blend(path)
    assert code == 0, (out, err)
    document = json.loads(report.read_text())
    return {r["name"]: r["params"] for r in document["objects"]}, document


def test_cancel_during_the_second_object_leaves_all_three_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    three_flags(tmp_path)
    flags = [bpy.data.objects[n] for n in FLAG_TRUTHS]
    before = {ob.name: snapshot(ob, tmp_path) for ob in flags}
    calls = []

    def held_on_second(problem, settings, progress, cancel):
        calls.append(problem)
        if len(calls) == 1:  # the first object's fit runs to its end
            return job_module.fit(problem, settings, progress=progress, cancel=cancel)

        def progress_then_wait(iteration, loss, values):
            progress(iteration, loss, values)
            cancel.wait(HANG_GUARD_S)  # goes on only once cancelled: never ends first

        return job_module.fit(problem, settings, progress=progress_then_wait, cancel=cancel)

    monkeypatch.setattr(
        fit_operators,
        "make_job",
        lambda tasks: FitJob.of_tasks([dataclasses.replace(t, fit_function=held_on_second) for t in tasks]),
    )
    ctx, op = ContextProxy(), OperatorStandIn()
    try:
        assert FIT_OP.invoke(op, ctx, event("LEFTMOUSE", "PRESS")) == {"RUNNING_MODAL"}
        session = start_fitting(op, ctx)
        under_way = lambda: session.task == 1 and session.progress_messages >= 1  # noqa: E731
        assert run_timers(op, ctx, until=under_way) == {"PASS_THROUGH"}
        assert any(t and "object 2 of 3: Flag A" in t for t in ctx.status)
        assert FIT_OP.modal(op, ctx, event("ESC", "PRESS")) == {"RUNNING_MODAL"}
        assert run_timers(op, ctx) == {"CANCELLED"}
    finally:
        fit_session.end_session()
    job = session.job
    assert job.results[0] is not None and not job.results[0].cancelled  # the first had finished
    assert job.results[1].cancelled and job.results[2] is None and len(calls) == 2
    assert op.reports == [({"WARNING"}, "Fit of 'Flag B', 'Flag A', 'Flag C' cancelled: nothing was changed")]
    assert {ob.name: snapshot(ob, tmp_path) for ob in flags} == before


# -- one shared material (two swatches, see addon_scenes.swatches) -------------------------------------


def run_operator(shared: bool) -> list[tuple[set, str]]:
    """The panel's Fit to Target, blocking path, on the current selection."""
    op = OperatorStandIn(shared=shared)
    assert FIT_OP.execute(op, ContextProxy()) == {"FINISHED"}, op.reports
    return op.reports


def test_shared_material_determines_what_each_object_alone_cannot(tmp_path: Path) -> None:
    swatches(tmp_path)
    objects = [bpy.data.objects[n] for n in SWATCHES]
    targets = {ob.name: target_positions(ob) for ob in objects}
    before = {ob.name: modifier_values(ob) for ob in objects}

    # alone, each swatch leaves one of the two undetermined (the fit says so)
    for ob in objects:
        select([ob], ob)
        run_operator(shared=False)
        record = json.loads(ob.fit_to_target.result_json)
        assert record["undetermined"] == SWATCH_UNDETERMINED_ALONE[ob.name], (
            ob.name,
            record["identifiability"],
        )
        assert bpy.ops.object.fit_to_target_revert() == {"FINISHED"}
        assert modifier_values(ob) == before[ob.name]

    # together: one material, both values within 2 % of the truth, both replayed by Blender
    select(objects, objects[0])
    reports = run_operator(shared=True)
    fitted = records(SWATCHES)
    shared = fitted[SWATCHES[0]]["shared"]
    assert shared["outcome"] == "converged", shared["outcome_reason"]
    assert shared["objects"] == SWATCHES and shared["undetermined"] == []
    assert shared["undetermined_alone"] == SWATCH_UNDETERMINED_ALONE
    assert sorted(shared["determined_jointly"]) == ["air_damping", "tension_stiffness"]
    assert any("determined only together: tension_stiffness, air_damping" in m for _, m in reports), reports
    for ob in objects:
        record = fitted[ob.name]
        assert record["shared"] == shared and record["run_objects"] == SWATCHES
        assert record["params"] == fitted[SWATCHES[0]]["params"]  # one set of values for both
        for p in ("tension_stiffness", "air_damping"):
            assert record["params"][p] == pytest.approx(SWATCH_TRUTH[p], rel=0.02), (ob.name, p)
        assert record["outcome"] == "converged", record["outcome_reason"]
        replay = replay_rmse(ob, targets[ob.name])
        assert max(replay.values()) <= 1 * MM, (ob.name, replay)

    # a preset saved from the shared fit names every object it was fitted to
    preset = addon_module("presets").preset_from_fit_result("Swatch fabric", fitted[SWATCHES[1]])
    assert preset.provenance["shared_objects"] == SWATCHES
    assert preset.values["air_damping"] == pytest.approx(
        fitted[SWATCHES[1]]["params"]["air_damping"], rel=1e-6
    )

    # the batch command with --shared, objects in the same order, gives the same values
    batch, document = batch_params(tmp_path, SWATCHES, shared=True)
    assert schema_errors(document, SCHEMA) == []
    assert document["shared"]["member_outcomes"] == dict.fromkeys(SWATCHES, "converged")
    assert document["shared"]["determined_jointly"] == shared["determined_jointly"]
    for name in SWATCHES:
        assert batch[name] == pytest.approx(fitted[name]["params"], rel=1e-9), name
