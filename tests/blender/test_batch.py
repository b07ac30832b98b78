"""batch.py (and the one CLI code path behind it) in subprocesses with the bpy module."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import bpy
import pytest
from addon_scenes import (
    PARAMETER_NAMES,
    REPO_ROOT,
    TMP,
    add_targets_from_blender,
    bake,
    clamped_cloth,
    cli,
    demo_blend,
    demo_operator_fit,
    fresh_copy,
    modifier_values,
    open_blend,
    pc2,
)
from batch_run import check_refusal_report
from blender_ref import ClothMesh, grid_mesh, make_cloth_object, pin_row_weights

BATCH = REPO_ROOT / "batch.py"
SCHEMA = json.loads((REPO_ROOT / "assets" / "report.schema.json").read_text())
PROGRESS = re.compile(r"^fit (\S+) iter (\d+) loss (\S+)((?: \w+=\S+)*)$")


def run_batch(*args, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(BATCH), *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def progress_lines(stdout: str) -> list[tuple[str, int, float, dict[str, float]]]:
    out = []
    for line in stdout.splitlines():
        if line.startswith("fit "):
            m = PROGRESS.match(line)
            assert m, f"unparseable progress line: {line!r}"
            values = dict(kv.split("=") for kv in m.group(4).split())
            name = shlex.split(m.group(1))[0]
            out.append((name, int(m.group(2)), float(m.group(3)), {k: float(v) for k, v in values.items()}))
    return out


def our_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("fit-to-target:")]


# -- a small JSON-Schema check (the subset report.schema.json uses) -------------------------------------


_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
    "integer": int,
    "number": (int, float),
}


def schema_errors(value, schema: dict, root: dict | None = None, where: str = "$") -> list[str]:
    root = root or schema
    if "$ref" in schema:
        node = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        return schema_errors(value, node, root, where)
    errors = []
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        ok = any(
            isinstance(value, _TYPES[k]) and not (k in ("integer", "number") and isinstance(value, bool))
            for k in kinds
        )
        if not ok:
            return [f"{where}: {value!r} is not {' or '.join(kinds)}"]
    if "const" in schema and value != schema["const"]:
        errors.append(f"{where}: {value!r} != {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} not in {schema['enum']}")
    if "pattern" in schema and isinstance(value, str) and re.search(schema["pattern"], value) is None:
        errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if "anyOf" in schema:
        each = [schema_errors(value, option, root, where) for option in schema["anyOf"]]
        if all(each):
            errors.append(f"{where}: {value!r} matches none of: " + "; ".join(e[0] for e in each))
    if "minimum" in schema and isinstance(value, int | float) and value < schema["minimum"]:
        errors.append(f"{where}: {value} < {schema['minimum']}")
    if isinstance(value, dict):
        errors += [f"{where}: missing {key!r}" for key in schema.get("required", []) if key not in value]
        for key, item in value.items():
            if "propertyNames" in schema:
                errors += schema_errors(key, schema["propertyNames"], root, f"{where} key")
            sub = schema.get("properties", {}).get(key, schema.get("additionalProperties"))
            if isinstance(sub, dict):
                errors += schema_errors(item, sub, root, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for k, item in enumerate(value):
            errors += schema_errors(item, schema["items"], root, f"{where}[{k}]")
    return errors


def test_schema_check_can_fail() -> None:
    good = {
        "version": 1,
        "addon_version": "0.1.0",
        "device": "cpu",
        "blend_file": "a.blend",
        "saved_to": None,
        "status": "ok",
        "exit_code": 0,
        "date": "2026-01-01T00:00:00+00:00",
        "objects": [],
    }
    assert schema_errors(good, SCHEMA) == []
    assert schema_errors({**good, "objects": [{"name": "x"}]}, SCHEMA)
    assert schema_errors({**good, "version": 2}, SCHEMA)
    bad_object = {
        "name": "x",
        "model": "blender_cloth",
        "status": "ok",
        "params": {"stiffness": 1.0},
        "initial_params": {},
        "initial_loss": 1.0,
        "final_loss": -1.0,
        "rmse_m": None,
        "max_error_m": None,
        "iterations": 1.5,
        "seconds": 1.0,
        "warnings": [],
    }
    errors = schema_errors({**good, "objects": [bad_object]}, SCHEMA)
    assert len(errors) == 3, errors  # unknown parameter, negative loss, fractional iterations


# -- (1) the demo: batch.py gives the panel operator's parameters ------------------------------------


@pytest.fixture(scope="module")
def demo_batch() -> dict:
    folder = TMP / "demo_batch"
    scene = fresh_copy(demo_blend(), folder)
    digest = sha256(scene)
    t0 = time.perf_counter()
    proc = run_batch(
        scene,
        "--report",
        folder / "report.json",
        "--save",
        folder / "fitted.blend",
        "--bake",
        folder / "cache",
    )
    return {
        "proc": proc,
        "seconds": time.perf_counter() - t0,
        "folder": folder,
        "scene": scene,
        "digest": digest,
    }


def test_demo_batch_same_parameters_as_panel_operator(demo_batch: dict) -> None:
    proc = demo_batch["proc"]
    assert proc.returncode == 0, proc.stderr
    report = json.loads((demo_batch["folder"] / "report.json").read_text())
    (entry,) = report["objects"]
    operator = demo_operator_fit()["record"]
    assert set(entry["params"]) == set(operator["params"])
    for name, value in operator["params"].items():
        assert entry["params"][name] == pytest.approx(value, rel=1e-6), name
    assert entry["iterations"] == operator["iterations"]
    assert entry["rmse_m"] == pytest.approx(operator["rmse_m"], rel=1e-6)


def test_demo_batch_report_validates(demo_batch: dict) -> None:
    report = json.loads((demo_batch["folder"] / "report.json").read_text())
    assert schema_errors(report, SCHEMA) == []
    assert report["status"] == "ok" and report["exit_code"] == 0 and report["device"] == "cpu"
    assert report["blend_file"] == str(demo_batch["scene"])
    assert report["saved_to"] == str(demo_batch["folder"] / "fitted.blend")
    (entry,) = report["objects"]
    assert entry["name"] == "Cloth" and entry["status"] == "ok"
    assert entry["final_loss"] < entry["initial_loss"] and entry["rmse_m"] < 1e-4


def test_demo_batch_output_and_files(demo_batch: dict) -> None:
    proc, folder = demo_batch["proc"], demo_batch["folder"]
    report = json.loads((folder / "report.json").read_text())
    (entry,) = report["objects"]
    lines = progress_lines(proc.stdout)
    assert [line[1] for line in lines] == list(range(entry["iterations"] + 1))
    assert {line[0] for line in lines} == {"Cloth"}
    assert lines[0][2] == pytest.approx(entry["initial_loss"], rel=1e-6)
    assert lines[-1][3] == pytest.approx(entry["params"], rel=1e-6)
    # the final table: one row per parameter, before -> after, and the RMSE drop
    table = proc.stdout[proc.stdout.index("Cloth: blender_cloth") :]
    row = re.search(r"tension_stiffness\s+15\s+->\s+([\d.]+)", table)
    assert row and float(row.group(1)) == pytest.approx(40.0, rel=0.01), table  # the hidden value is 40
    assert re.search(r"RMSE\s+29\.1 mm\s+->\s+0\.00\d+ mm", table), table

    assert sha256(demo_batch["scene"]) == demo_batch["digest"]  # the input is never written
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]  # no temp files left
    cache = folder / "cache" / bake.bake_filename("Cloth")
    samples, start, _ = pc2.read_pc2(cache)
    assert samples.shape == (40, 144, 3) and start == 1.0
    open_blend(folder / "fitted.blend")
    ob = bpy.data.objects["Cloth"]
    for name, value in entry["params"].items():
        assert modifier_values(ob)[name] == pytest.approx(value, rel=1e-6)
    # relative to the saved .blend, so the folder can move as a whole
    assert ob.modifiers[bake.CACHE_MODIFIER_NAME].filepath == f"//cache/{cache.name}"
    assert json.loads(ob.fit_to_target.result_json)["bake"] == str(cache)
    print(f"demo via batch.py: {demo_batch['seconds']:.1f} s wall, fit {entry['seconds']:.1f} s")


# -- (2) two cloth objects, different targets, one call -----------------------------------------------


TRUTH_A = {"tension_stiffness": 30.0, "compression_stiffness": 30.0, "bending_stiffness": 1.5}
TRUTH_B = {"tension_stiffness": 22.0, "compression_stiffness": 22.0, "bending_stiffness": 0.9}


def test_two_objects_in_one_call(tmp_path: Path) -> None:
    a = clamped_cloth(name="ClothA", frame_end=16)
    add_targets_from_blender(a, TRUTH_A, [8, 16])
    b = clamped_cloth(name="ClothB", n=7, location=(3.0, 0.0, 1.0), frame_end=16)
    add_targets_from_blender(b, TRUTH_B, [12])
    scene = tmp_path / "two.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(scene))

    proc = run_batch(scene, "--report", tmp_path / "report.json", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert progress_lines(proc.stdout) == []  # --quiet
    report = json.loads((tmp_path / "report.json").read_text())
    assert schema_errors(report, SCHEMA) == []
    assert [o["name"] for o in report["objects"]] == ["ClothA", "ClothB"]
    for entry, truth, frames in zip(report["objects"], (TRUTH_A, TRUTH_B), ([8, 16], [12]), strict=True):
        assert entry["target_frames"] == frames
        for name, value in truth.items():
            assert entry["params"][name] == pytest.approx(value, rel=0.02), (entry["name"], name)
        assert entry["rmse_m"] < 1e-4
    assert "ClothA: blender_cloth" in proc.stdout and "ClothB: blender_cloth" in proc.stdout


# -- (3) error classes ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_scene() -> Path:
    folder = TMP / "batch_errors"
    folder.mkdir(parents=True, exist_ok=True)
    bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
    ob = clamped_cloth(frame_end=16)
    add_targets_from_blender(ob, TRUTH_A, [16])
    bpy.ops.wm.save_as_mainfile(filepath=str(folder / "small.blend"))

    bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
    base = grid_mesh(4, 4, 0.6, 0.6)
    polygons = [p.tolist() for p in base.polygons()] + [[16, 17, 18]]  # a zero-area triangle
    extra = [(0.5, 0.0, 0.0), (0.6, 0.0, 0.0), (0.7, 0.0, 0.0)]
    mesh = ClothMesh.from_polygons(list(base.vertices) + extra, polygons)
    weights = list(pin_row_weights(base, rows=2)) + [0.0, 0.0, 0.0]
    broken = make_cloth_object(mesh, pin_weights=weights, frame_end=10)
    target = make_cloth_object(mesh, name="Target")
    target.modifiers.clear()
    item = broken.fit_to_target.targets.add()
    item.kind, item.object, item.frame = "OBJECT", target, 5
    bpy.ops.wm.save_as_mainfile(filepath=str(folder / "degenerate.blend"))
    return folder / "small.blend"


ERROR_CASES = {
    "bad value": (["--max-iters", "abc"], "argument --max-iters: invalid int value: 'abc'"),
    "missing file": (None, "no such file: "),
    "missing object": (["--object", "Nope"], "no object named 'Nope'"),
    "missing target": (["--target", "Nope@10"], "--target Nope@10: no object named 'Nope'"),
    "bad target spec": (["--target", "Cloth.target.016"], "expected NAME@FRAME"),
    "target frame": (["--target", "Cloth.target.016@500"], "target frame 500 is outside the cloth cache"),
    "unknown parameter": (["--fit", "stiffness"], "--fit: unknown parameter(s) stiffness"),
    "device": (["--device", "cuda:7"], "device cuda:7 is not available"),
    "overwrite input": (["--save", "{scene}"], "--save would overwrite the input file: add --in-place"),
    "preset": (["--preset", "No Such Preset"], ("no preset named", "presets are not available")),
}


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_usage_errors_exit_2_with_one_line(small_scene: Path, tmp_path: Path, case: str) -> None:
    args, expected = ERROR_CASES[case]
    scene = small_scene if args is not None else tmp_path / "missing.blend"
    digest = sha256(small_scene)
    args = [a.replace("{scene}", str(scene)) for a in args or []]
    outputs = ["--report", tmp_path / "r.json", "--bake", tmp_path / "cache"]
    if "--save" not in args:
        outputs += ["--save", tmp_path / "out.blend"]
    proc = run_batch(scene, *args, *outputs, timeout=120)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    (line,) = our_errors(proc.stderr)
    assert any(e in line for e in ((expected,) if isinstance(expected, str) else expected)), line
    assert "Traceback" not in proc.stderr
    # no partial output of any kind: only the report, naming the bad input
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    check_refusal_report(tmp_path / "r.json", line)
    assert sha256(small_scene) == digest


def test_bad_mesh_exits_2_before_the_fit(small_scene: Path, tmp_path: Path) -> None:
    # a mesh the cloth solver cannot use is bad input (exit 2), found before the fit
    scene = small_scene.parent / "degenerate.blend"
    digest = sha256(scene)
    proc = run_batch(scene, "--report", tmp_path / "r.json", "--save", tmp_path / "out.blend", timeout=120)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    (line,) = our_errors(proc.stderr)
    assert line.startswith("fit-to-target: error: 'Cloth': zero-area polygon 9 (vertices 16, 17, 18)"), line
    assert "fit Cloth iter" not in proc.stdout and "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no output but the report
    check_refusal_report(tmp_path / "r.json", line)
    assert sha256(scene) == digest


# -- (4) --target on a file that has never seen the add-on --------------------------------------------


BARE_SCENE = textwrap.dedent(
    """
    import sys
    import bpy
    import numpy as np

    bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
    n, size = 8, 0.8
    xs = np.linspace(-size / 2, size / 2, n)
    verts = [(x, y, 1.0) for y in xs for x in xs]
    faces = [[j * n + i, j * n + i + 1, (j + 1) * n + i + 1, (j + 1) * n + i]
             for j in range(n - 1) for i in range(n - 1)]
    me = bpy.data.meshes.new("Sheet")
    me.from_pydata(verts, [], faces)
    ob = bpy.data.objects.new("Sheet", me)
    bpy.context.scene.collection.objects.link(ob)
    group = ob.vertex_groups.new(name="pin")
    group.add([k for k, v in enumerate(verts) if v[1] > size / 2 - size / n], 1.0, "REPLACE")
    mod = ob.modifiers.new("Cloth", "CLOTH")
    mod.settings.vertex_group_mass = "pin"
    mod.point_cache.frame_start, mod.point_cache.frame_end = 1, 16
    mod.settings.tension_stiffness, mod.settings.bending_stiffness = 30.0, 1.5
    for f in range(1, 17):
        bpy.context.scene.frame_set(f)
    ob_eval = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    positions = [tuple(v.co) for v in ob_eval.data.vertices]
    target_me = bpy.data.meshes.new("Goal")
    target_me.from_pydata(positions, [], faces)
    bpy.context.scene.collection.objects.link(bpy.data.objects.new("Goal", target_me))
    mod.settings.tension_stiffness, mod.settings.bending_stiffness = 15.0, 0.5
    bpy.context.scene.frame_set(1)
    assert "fit_to_target" not in ob.keys()
    bpy.ops.wm.save_as_mainfile(filepath=sys.argv[-1])
    """
)


def test_target_flag_on_file_without_panel_settings(tmp_path: Path) -> None:
    scene = tmp_path / "bare.blend"
    made = subprocess.run(
        [sys.executable, "-c", BARE_SCENE, str(scene)], capture_output=True, text=True, timeout=120
    )
    assert made.returncode == 0, made.stderr
    proc = run_batch(
        scene,
        "--target",
        "Goal@16",
        "--fit",
        "tension_stiffness,bending_stiffness",
        "--no-ties",
        "--report",
        tmp_path / "r.json",
        "--save",
        tmp_path / "out.blend",
    )
    assert proc.returncode == 0, proc.stderr
    (entry,) = json.loads((tmp_path / "r.json").read_text())["objects"]
    assert entry["name"] == "Sheet" and entry["target_frames"] == [16]
    assert set(entry["params"]) == {"tension_stiffness", "bending_stiffness"}  # --no-ties: compression kept
    assert entry["params"]["tension_stiffness"] == pytest.approx(30.0, rel=0.02)
    assert entry["params"]["bending_stiffness"] == pytest.approx(1.5, rel=0.02)
    assert entry["rmse_m"] < 1e-4 < entry["initial_rmse_m"]
    open_blend(tmp_path / "out.blend")
    values = modifier_values(bpy.data.objects["Sheet"])
    assert values["tension_stiffness"] == pytest.approx(entry["params"]["tension_stiffness"], rel=1e-6)
    assert values["compression_stiffness"] == 15.0


# -- (5) Ctrl+C: partial report, nothing saved -----------------------------------------------------


def test_sigint_partial_report_and_input_untouched(tmp_path: Path) -> None:
    scene = fresh_copy(demo_blend(), tmp_path)
    digest = sha256(scene)
    # the run holds after printing iteration 1 until the signal arrives, so a busy machine
    # cannot let it finish first
    proc = subprocess.Popen(
        [sys.executable, str(BATCH), str(scene), "--report", str(tmp_path / "r.json"), "--in-place"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "FIT_TO_TARGET_SELF_SIGNAL": "iteration-1:WAIT"},
    )
    try:
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("fit Cloth iter 1 "):
                proc.send_signal(signal.SIGINT)
                break
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    assert "interrupted by SIGINT: nothing was saved; partial report in" in err
    report = json.loads((tmp_path / "r.json").read_text())
    assert schema_errors(report, SCHEMA) == []
    assert report["status"] == "cancelled" and report["exit_code"] == 130 and report["saved_to"] is None
    (entry,) = report["objects"]
    # stopped after the iteration it was held in
    assert entry["status"] == "cancelled" and entry["cancelled"] and entry["iterations"] == 1
    assert sha256(scene) == digest  # --in-place, yet untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([scene.name, "r.json"])


# -- one code path: the Blender command and the argument split -------------------------------------


def _batch_module():
    spec = importlib.util.spec_from_file_location("fit_to_target_batch_script", BATCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_command_registered_and_arguments(capsys) -> None:
    assert cli._handle is not None  # bpy.utils.register_cli_command("fit_to_target", ...)
    assert cli._execute(["--help"]) == 0
    assert "--target NAME@FRAME" in capsys.readouterr().out
    assert cli.main(["--max-iters"]) == 2
    error = capsys.readouterr().err.strip()
    assert error == "fit-to-target: error: argument --max-iters: expected one argument"
    batch = _batch_module()
    inside = ["blender", "-b", "scene.blend", "--python", "batch.py", "--", "--object", "Cloth"]
    assert batch.command_line(inside, in_blender=True) == ["--object", "Cloth"]
    assert batch.command_line(["blender", "-b", "scene.blend", "--python", "batch.py"], in_blender=True) == []
    assert batch.command_line(["batch.py", "a.blend", "--quiet"], in_blender=False) == ["a.blend", "--quiet"]
    assert set(PARAMETER_NAMES) <= set(SCHEMA["$defs"]["values"]["propertyNames"]["anyOf"][0]["enum"])
    assert os.access(REPO_ROOT / "dev", os.X_OK)
