"""batch.py in real processes with its output streams closed, bad input that must end in
one line and exit 2 with nothing changed, and the smaller faults of its output: a time
budget the soft-body fit overran, a failed bake, an object name with a line break."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import bpy
import numpy as np
import pytest
from addon_scenes import addon_module, model_trajectory, modifier_values, open_blend
from batch_run import BATCH, check_refusal_report, our_errors, run_batch, sha256, tiny_scene
from soft_body_scenes import add_targets, soft_object

presets = addon_module("presets")

BROKEN_PIPE = ("Traceback", "BrokenPipeError", "unexpected error")


@pytest.fixture(scope="module")
def scene_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_scene(tmp_path_factory.mktemp("streams") / "tiny.blend")


def outputs(folder: Path) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    return [
        "--save",
        str(folder / "fitted.blend"),
        "--report",
        str(folder / "report.json"),
        "--bake",
        str(folder / "cache"),
    ]


def written(folder: Path) -> dict:
    """What a run left: its report's outcome and values, its cache's bytes, the saved values."""
    report = json.loads((folder / "report.json").read_text())
    keys = ("params", "loss_history", "iterations", "stop_reason", "outcome", "warnings")
    objects = [{k: entry.get(k) for k in keys} for entry in report["objects"]]
    (cache,) = (folder / "cache").iterdir()
    open_blend(folder / "fitted.blend")
    saved = modifier_values(bpy.data.objects["Cloth"])
    return {
        "status": (report["status"], report["exit_code"]),
        "objects": objects,
        "cache": cache.read_bytes(),
        "saved": saved,
    }


@pytest.fixture(scope="module")
def baseline(scene_file: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("baseline")
    done = run_batch(scene_file, *outputs(folder))
    assert done.returncode == 0, done.stderr
    return written(folder)


def run_with_shell(redirect: str, args: list[str]) -> subprocess.CompletedProcess:
    """batch.py under bash with ``redirect`` applied to it (``| head -2``, ``>&-``); the
    exit code is batch.py's own. The shell's output is captured."""
    line = f'"$@" {redirect}; exit ${{PIPESTATUS[0]}}'
    return subprocess.run(
        ["bash", "-c", line, "bash", sys.executable, str(BATCH), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


# -- (4) a closed stdout or stderr changes nothing but what is printed -------------------------------


@pytest.mark.parametrize("quiet", [False, True])
def test_stdout_whose_reader_is_gone(scene_file: Path, baseline: dict, tmp_path: Path, quiet: bool) -> None:
    # the reader closed before the run printed anything: every write to stdout fails
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        args = [sys.executable, str(BATCH), str(scene_file), *outputs(tmp_path)] + (
            ["--quiet"] if quiet else []
        )
        done = subprocess.run(args, stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)
    assert done.returncode == 0, done.stderr
    assert not any(text in done.stderr for text in BROKEN_PIPE), done.stderr
    assert written(tmp_path) == baseline


def test_stdout_closed_after_two_lines(scene_file: Path, baseline: dict, tmp_path: Path) -> None:
    done = run_with_shell("| head -2", [str(scene_file), *outputs(tmp_path)])
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 2
    assert not any(text in done.stderr for text in BROKEN_PIPE), done.stderr
    assert written(tmp_path) == baseline


@pytest.fixture(scope="module")
def unmatched(scene_file: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A run that ends with exit 4 and a last line on stderr (one step, a tiny tolerance)."""
    folder = tmp_path_factory.mktemp("unmatched")
    done = run_batch(scene_file, *outputs(folder), *UNMATCHED)
    assert done.returncode == 4 and "not matched to the targets" in done.stderr, done.stderr
    return written(folder)


UNMATCHED = ["--max-iters", "1", "--tolerance", "1e-9"]


@pytest.mark.parametrize("redirect", ["2>&-", "2>&1 >/dev/null | true"])
def test_stderr_closed(scene_file: Path, unmatched: dict, tmp_path: Path, redirect: str) -> None:
    # stderr closed outright, or a pipe whose reader is gone; the run's last line goes there
    done = run_with_shell(redirect, [str(scene_file), *outputs(tmp_path), *UNMATCHED])
    assert done.returncode == 4, (done.stdout, done.stderr)
    assert written(tmp_path) == unmatched


def test_stdout_closed_outright(scene_file: Path, baseline: dict, tmp_path: Path) -> None:
    # no descriptor 1 at all: no file the run opens may take its place
    done = run_with_shell(">&-", [str(scene_file), *outputs(tmp_path)])
    assert done.returncode == 0, done.stderr
    assert written(tmp_path) == baseline
    json.loads((tmp_path / "report.json").read_text())  # nothing printed into it


# -- (10) bad input: one line, exit 2, nothing changed ------------------------------------------------


def refused(scene: Path, tmp_path: Path, *args: str) -> str:
    """Run batch.py on ``scene`` with ``args`` and every output asked for; it must stop with
    one line and exit 2 before any work, writing nothing but the report naming the bad input
    (where the report's own path is not the problem). Returns the line."""
    digest = sha256(scene) if scene.is_file() else None
    folder = tmp_path / "out"
    done = run_batch(scene, *args, *outputs(folder), timeout=300)
    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = our_errors(done.stderr)
    assert done.stderr.strip() == line, done.stderr  # no warning, no traceback before it
    assert len(line) < 1000, line[:2000]
    assert " iter " not in done.stdout
    report_refused = "--report" in line  # the report's own path is the bad input
    assert sorted(p.name for p in folder.iterdir()) == ([] if report_refused else ["report.json"])
    if not report_refused:
        check_refusal_report(folder / "report.json", line)
    if digest is not None:
        assert sha256(scene) == digest
    return line


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--object", "Cl\udcffoth", r"--object Cl\xffoth: not UTF-8 text"),
        ("--target", "Cloth\udcfe@6", r"--target Cloth\xfe@6: not UTF-8 text"),
        ("--target-tracks", "\udcffClip", r"--target-tracks \xffClip: not UTF-8 text"),
    ],
)
def test_names_that_are_not_utf8(
    scene_file: Path, tmp_path: Path, option: str, value: str, expected: str
) -> None:
    extra = ["--object", "Cloth"] if option == "--target-tracks" else []
    assert expected in refused(scene_file, tmp_path, *extra, option, value)


def test_a_tolerance_too_large_to_square(scene_file: Path, tmp_path: Path) -> None:
    line = refused(scene_file, tmp_path, "--tolerance", "1e200")
    assert "--tolerance: '1e200' is more than 3.4e+38 millimetres" in line


def test_a_name_of_100000_characters(scene_file: Path, tmp_path: Path) -> None:
    line = refused(scene_file, tmp_path, "--object", "A" * 100_000)
    assert "a name of 100000 characters; Blender's names are at most 255 bytes" in line


def test_a_preset_named_by_a_skipped_file(scene_file: Path, tmp_path: Path) -> None:
    folder = presets.user_presets_dir()
    made = [folder / f"q{k}.json" for k in range(6)] + [folder / "a_broken.json"]
    for k, path in enumerate(made[:6]):
        value = 1e-320 if k == 4 else -1.0 - k  # Q4's own reason differs from the others'
        text = {"schema": 1, "name": f"Q{k}", "model": "blender_cloth", "values": {"mass": value}}
        path.write_text(json.dumps(text))
    made[-1].write_text("{")
    try:
        line = refused(scene_file, tmp_path, "--preset", "Q4")
        assert "q4.json: values.mass = 1e-320 is too small" in line, line
        assert "q1.json" not in line and "a_broken.json" not in line, line
        line = refused(scene_file, tmp_path, "--preset", "Q9")
        assert "no preset named 'Q9'" in line and "7 other preset file(s) skipped" in line, line
    finally:
        for path in made:
            path.unlink()


def scene_with(path: Path, change: str) -> Path:
    """``tiny_scene`` with one thing wrong: an inf target vertex, a zero scale, a target
    whose vertices are the cloth's in another order."""
    tiny_scene(path)
    cloth = bpy.data.objects["Cloth"]
    target = cloth.fit_to_target.targets[0].object
    co = np.empty(len(target.data.vertices) * 3, dtype=np.float32)
    target.data.vertices.foreach_get("co", co)
    if change == "inf target":
        co[9] = np.inf
        target.data.vertices.foreach_set("co", co)
    elif change == "zero scale":
        cloth.scale = (0.0, 1.0, 1.0)
    else:
        order = np.random.default_rng(1).permutation(len(target.data.vertices))
        where = np.argsort(order)
        faces = [[int(where[v]) for v in p.vertices] for p in target.data.polygons]
        me = bpy.data.meshes.new("Shuffled")
        me.from_pydata(co.reshape(-1, 3)[order].tolist(), [], faces)
        target.data = me
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


SCENE_CASES = {
    "inf target": "target 'target0.target.006' at frame 6 has coordinates that are not finite numbers",
    "zero scale": "'Cloth' has a zero scale in the world (scale 0, 1, 1)",
    "permuted target": "has the cloth's 25 vertices but not in the cloth's vertex order",
}


@pytest.mark.parametrize("case", list(SCENE_CASES))
def test_scene_input_named_for_what_it_is(tmp_path: Path, case: str) -> None:
    scene = scene_with(tmp_path / "scene.blend", case)
    line = refused(scene, tmp_path, "--quiet")
    assert SCENE_CASES[case] in line, line
    if case == "permuted target":
        assert "--loss surface" in line


def test_a_fifo_is_no_blend_file(tmp_path: Path) -> None:
    fifo = tmp_path / "scene.blend"
    os.mkfifo(fifo)
    line = refused(fifo, tmp_path)
    assert line.endswith("is a FIFO (named pipe), not a .blend file"), line


# -- (11) what the output says ------------------------------------------------------------------------


def test_soft_body_time_budget_stops_after_the_start(tmp_path: Path) -> None:
    ob = soft_object(cells=2, frame_end=8)
    ob.fit_to_target_soft_body.young_modulus = 2.0e4
    add_targets(ob, model_trajectory(ob, 8), [8])
    ob.fit_to_target_soft_body.young_modulus = 6.0e4
    scene = tmp_path / "jelly.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene))
    report = tmp_path / "report.json"
    done = run_batch(scene, "--fit", "young_modulus", "--time-budget", "0.01", "--report", report)
    assert done.returncode == 4, done.stderr
    (entry,) = json.loads(report.read_text())["objects"]
    assert entry["stop_reason"] == "time_budget" and entry["iterations"] == 0
    # nothing simulated past the budget: the start alone, not its sensitivities or a probe
    assert entry["n_forward"] == 1, entry
    reason = entry["outcome_reason"]
    assert f"it ran {entry['seconds']:.1f} s of a 0.01 s time budget" in reason, reason
    assert "preparing the fit and simulating its start took" in reason, reason


def test_a_failed_bake_is_no_failed_fit(scene_file: Path, tmp_path: Path) -> None:
    open_blend(scene_file)
    s = bpy.data.objects["Cloth"].fit_to_target
    s.bake_error_colors, s.error_frame = True, 3  # no target there: the bake refuses
    scene = tmp_path / "colours.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene))
    done = run_batch(scene, *outputs(tmp_path / "out"))
    assert done.returncode == 3, done.stderr
    assert "fit failed" not in done.stdout
    assert "  bake failed: error colours: no target at frame 3" in done.stdout.splitlines()
    assert "outcome: converged" in done.stdout  # the fit's own table is there
    (entry,) = json.loads((tmp_path / "out" / "report.json").read_text())["objects"]
    assert entry["error"] == "bake: error colours: no target at frame 3"
    assert not (tmp_path / "out" / "fitted.blend").exists()


def test_a_line_break_in_an_object_name(tmp_path: Path) -> None:
    scene = tiny_scene(tmp_path / "name.blend", names=("Cloth\nB",))
    done = run_batch(scene, "--max-iters", "2")
    assert done.returncode in (0, 4), done.stderr
    progress = [line for line in done.stdout.splitlines() if " iter " in line]
    assert len(progress) == 3, done.stdout
    for k, line in enumerate(progress):
        assert line.startswith(f"fit $'Cloth\\nB' iter {k} loss "), line
    # what bash makes of the quoted name is the name
    word = progress[0].split()[1]
    echoed = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, text=True)
    assert echoed.stdout == "Cloth\nB"
