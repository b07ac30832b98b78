"""The headless command as a farm schedules it: one task per object writing only its report,
one --apply task writing the shot; --keep-going, --misfit-exit, --log, --save-preset,
--threads, and what a killed or concurrent task leaves."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import bpy
import pytest
from addon_scenes import modifier_values, open_blend
from batch_run import (
    BATCH,
    SELF_SIGNAL,
    our_errors,
    run_batch,
    sha256,
    temporaries,
    tiny_scene,
)
from farm_scene import MISFIT, farm_shot

FITTED = ("tension_stiffness", "compression_stiffness", "bending_stiffness")


@pytest.fixture(scope="module")
def shot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return farm_shot(tmp_path_factory.mktemp("farm_contract") / "shot.blend")


def fit_task(shot: Path, name: str, results: Path, *extra: object) -> subprocess.CompletedProcess:
    """One farm fit task: one object, its report and log in ``results``, nothing else written."""
    stem = name.replace(" ", "_")
    return run_batch(
        shot,
        "--object",
        name,
        "--report",
        results / f"{stem}.json",
        "--log",
        results / f"{stem}.jsonl",
        "--quiet",
        *extra,
    )


def report_of(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def values_of(report: dict) -> dict[str, dict[str, float]]:
    return {o["name"]: o["params"] for o in report["objects"]}


# -- exit statuses ---------------------------------------------------------------------------------


def test_misfit_exit_status_is_the_farms_choice(shot: Path, tmp_path: Path) -> None:
    digest = sha256(shot)
    default = fit_task(shot, MISFIT, tmp_path)
    assert default.returncode == 4, default.stderr
    (line,) = our_errors(default.stderr)
    # nothing was saved: the line says where the values are, never that they were written
    assert "not saved (no --save)" in line and "values written" not in line, line
    report = report_of(tmp_path / f"{MISFIT}.json")
    (entry,) = report["objects"]
    assert (report["exit_code"], report["misfit_exit"], entry["outcome"]) == (4, 4, "misfit")
    assert "over the tolerance" in entry["outcome_reason"]

    done = fit_task(shot, MISFIT, tmp_path, "--misfit-exit", "0")
    assert done.returncode == 0, done.stderr
    again = report_of(tmp_path / f"{MISFIT}.json")
    assert (again["exit_code"], again["status"], again["objects"][0]["outcome"]) == (
        0,
        "not_converged",
        "misfit",
    )
    assert values_of(again) == values_of(report)  # the same fit, another exit status
    assert sha256(shot) == digest  # a fit task never writes the shot

    refused = run_batch(shot, "--misfit-exit", "3")
    assert refused.returncode == 2 and "already means something else" in refused.stderr


def test_keep_going_saves_and_bakes_the_others(tmp_path: Path) -> None:
    scene = tiny_scene(tmp_path / "three.blend", names=("A", "B", "C"))
    bpy.data.objects["B"].fit_to_target.targets[0].frame = 500  # outside B's cloth cache
    bpy.ops.wm.save_as_mainfile(filepath=str(scene))
    out = tmp_path / "out"
    out.mkdir()
    outputs = ["--save", out / "fitted.blend", "--bake", out / "cache", "--report", out / "r.json", "--quiet"]

    stopped = run_batch(scene, *outputs)
    assert stopped.returncode == 2, stopped.stderr
    assert sorted(p.name for p in out.iterdir()) == ["r.json"]  # one bad object: nothing but the report

    done = run_batch(scene, *outputs, "--keep-going")
    assert done.returncode == 3, done.stderr
    assert any("'B'" in line or "B:" in line for line in our_errors(done.stderr)), done.stderr
    report = report_of(out / "r.json")
    status = {o["name"]: o["status"] for o in report["objects"]}
    assert status == {"A": "ok", "B": "failed", "C": "ok"}, status
    assert "outside the cloth cache" in next(o for o in report["objects"] if o["name"] == "B")["error"]
    assert report["saved_to"] == str(out / "fitted.blend") and report["exit_code"] == 3
    caches = {o["name"]: o.get("bake") for o in report["objects"]}
    assert caches["B"] is None and Path(caches["A"]).is_file() and Path(caches["C"]).is_file()
    open_blend(out / "fitted.blend")
    for entry in report["objects"]:
        ob = bpy.data.objects[entry["name"]]
        baked = any(m.type == "MESH_CACHE" for m in ob.modifiers)
        assert baked == (entry["status"] == "ok"), entry["name"]
        for name, value in entry["params"].items():
            assert modifier_values(ob)[name] == pytest.approx(value, rel=1e-6)
    assert temporaries(out) == []


# -- results as files ------------------------------------------------------------------------------


def test_fit_tasks_then_apply_write_one_shot(shot: Path, tmp_path: Path) -> None:
    # the shot's folder holds the job's folders, as on a farm's shared storage
    shot = Path(shutil.copy(shot, tmp_path / "shot.blend"))
    results = tmp_path / "results"
    results.mkdir()
    digest = sha256(shot)
    open_blend(shot)
    names = sorted(o.name for o in bpy.data.objects if len(o.fit_to_target.targets))
    # two tasks at once for different objects of one shot, then the rest
    both = [
        subprocess.Popen(
            [sys.executable, str(BATCH), shot, "--object", n, "--report", results / f"{n}.json", "--quiet"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in names[:2]
    ]
    for task in both:
        _, err = task.communicate(timeout=300)
        assert task.returncode in (0, 4), err
    for n in names[2:]:
        assert fit_task(shot, n, results, "--misfit-exit", "0").returncode == 0
    for log in results.glob("*.jsonl"):
        log.unlink()  # --apply reads the reports, and only those
    assert sha256(shot) == digest  # the fit tasks read the shot and never wrote it

    out = tmp_path / "out"
    out.mkdir()
    args = [
        "--apply",
        results,
        "--bake",
        out / "bake",
        "--save",
        out / "shot.blend",
        "--report",
        out / "r.json",
    ]
    applied = run_batch(shot, *args, "--misfit-exit", "0")
    assert applied.returncode == 0, applied.stderr
    assert "fit-tmp" not in applied.stdout + applied.stderr  # Blender's save lines stay out of the log
    # a cache baked but not yet renamed into place is not played while the others bake, so
    # Blender's log (on standard output here) has no warning per frame that its file is missing
    assert "No such file or directory" not in applied.stdout + applied.stderr, applied.stdout
    report = report_of(out / "r.json")
    fitted = {}
    for path in sorted(results.glob("*.json")):
        fitted.update(values_of(report_of(path)))
    assert values_of(report) == fitted and sorted(fitted) == names
    assert sorted(report["applied"]) == sorted(str(p) for p in results.glob("*.json"))
    outcomes = {o["name"]: o["outcome"] for o in report["objects"]}
    assert outcomes[MISFIT] == "misfit" and report["status"] == "not_converged"
    open_blend(out / "shot.blend")
    for name, values in fitted.items():
        ob = bpy.data.objects[name]
        assert {k: modifier_values(ob)[k] for k in values} == pytest.approx(values, rel=1e-6)
        assert json.loads(ob.fit_to_target.result_json)["applied_from"].endswith(".json")
        assert any(m.type == "MESH_CACHE" for m in ob.modifiers), name

    # the shot's Revert still knows the values from before the fit
    before = report_of(results / "Flag.json")["objects"][0]["initial_params"]
    flag = bpy.data.objects["Flag"]
    with bpy.context.temp_override(object=flag, active_object=flag):
        bpy.ops.object.fit_to_target_revert()
    assert {k: modifier_values(flag)[k] for k in before} == pytest.approx(before, rel=1e-6)


def test_apply_refuses_what_it_cannot_apply(shot: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    assert fit_task(shot, "Flag", results).returncode == 0
    copy = results / "Flag again.json"
    copy.write_bytes((results / "Flag.json").read_bytes())
    cases = {
        "fit option": (["--apply", results / "Flag.json", "--fit", "bending_stiffness"], "leave out --fit"),
        "twice": (["--apply", results], "has results in both"),
        "no report": (["--apply", shot], "not a JSON report"),
        "missing": (["--apply", tmp_path / "nope"], "no such file or folder"),
    }
    for case, (args, expected) in cases.items():
        done = run_batch(shot, *args, "--save", tmp_path / "out.blend")
        assert done.returncode == 2, (case, done.stderr)
        (line,) = our_errors(done.stderr)
        assert expected in line, (case, line)
        assert not (tmp_path / "out.blend").exists()

    other = tiny_scene(tmp_path / "other.blend", names=("Cloth",))
    done = run_batch(other, "--apply", results / "Flag.json", "--save", tmp_path / "out.blend")
    assert done.returncode == 2 and "has no object 'Flag'" in done.stderr, done.stderr


def test_a_killed_task_reruns_to_the_same_result(shot: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    reference = fit_task(shot, "Sail", tmp_path)
    assert reference.returncode == 0, reference.stderr
    expected = report_of(tmp_path / "Sail.json")

    log = results / "Sail.jsonl"
    command = [sys.executable, str(BATCH), shot, "--object", "Sail", "--report", results / "Sail.json"]
    task = subprocess.Popen(
        [*map(str, command), "--log", str(log), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, SELF_SIGNAL: "iteration-1:WAIT"},  # held after iteration 1 until killed
    )
    deadline = time.monotonic() + 120
    while task.poll() is None and time.monotonic() < deadline and '"iteration": 1,' not in _text(log):
        time.sleep(0.2)
    task.send_signal(signal.SIGTERM)
    _, err = task.communicate(timeout=120)
    assert task.returncode == 143, err
    partial = report_of(results / "Sail.json")
    assert partial["status"] == "cancelled" and partial["exit_code"] == 143

    rerun = fit_task(shot, "Sail", results)
    assert rerun.returncode == 0, rerun.stderr
    again = report_of(results / "Sail.json")
    assert values_of(again) == values_of(expected)
    assert again["objects"][0]["outcome"] == expected["objects"][0]["outcome"] == "converged"
    assert temporaries(results) == []


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


# -- progress, presets, threads --------------------------------------------------------------------


def test_log_is_json_lines_a_farm_can_follow(shot: Path, tmp_path: Path) -> None:
    assert fit_task(shot, "Flag", tmp_path, "--threads", "1").returncode == 0
    lines = (tmp_path / "Flag.jsonl").read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    kinds = [e["event"] for e in events]
    assert kinds[:2] == ["run_start", "object_start"] and kinds[-2:] == ["object_end", "run_end"]
    assert set(kinds[2:-2]) == {"iteration"} and len(kinds) > 5
    times = [datetime.datetime.fromisoformat(e["time"]) for e in events]
    assert times == sorted(times) and all(t.tzinfo is not None for t in times)
    assert (events[1]["index"], events[1]["count"]) == (1, 1)
    report = report_of(tmp_path / "Flag.json")
    assert events[-1]["exit_code"] == report["exit_code"] == 0
    assert events[-2]["outcome"] == report["objects"][0]["outcome"] == "converged"
    last = [e for e in events if e["event"] == "iteration"][-1]
    assert last["values"].keys() <= set(FITTED)
    assert report["run"]["threads"] == 1 and report["log"] == str(tmp_path / "Flag.jsonl")
    assert (
        report["run"]["command_line"][0] == str(shot) and report["run"]["blender"] == bpy.app.version_string
    )


def test_save_preset_hands_a_converged_fit_to_the_next_task(shot: Path, tmp_path: Path) -> None:
    preset = tmp_path / "flag.json"
    assert fit_task(shot, "Flag", tmp_path, "--save-preset", preset).returncode == 0
    fitted = report_of(tmp_path / "Flag.json")["objects"][0]["params"]
    saved = json.loads(preset.read_text(encoding="utf-8"))
    assert {k: saved["values"][k] for k in fitted} == pytest.approx(fitted, rel=1e-6)
    assert report_of(tmp_path / "Flag.json")["saved_preset"] == str(preset)

    # the next task starts from the file: its start values are the preset's
    done = fit_task(shot, "Sail", tmp_path, "--preset", preset, "--max-iters", "1")
    start = report_of(tmp_path / "Sail.json")["objects"][0]["start_values"]
    assert {k: start[k] for k in fitted} == pytest.approx(fitted, rel=1e-6), done.stderr

    misfit_preset = tmp_path / "banner.json"
    done = fit_task(shot, MISFIT, tmp_path, "--save-preset", misfit_preset)
    assert done.returncode == 4 and not misfit_preset.exists()  # no material from a misfit
    assert "did not converge" in done.stderr
    several = run_batch(shot, "--save-preset", tmp_path / "all.json")
    assert several.returncode == 2 and "one material" in several.stderr
