"""The farm templates end to end: farm/openjd/fit_to_target.yaml run by `openjd run`, and
farm/flamenco/fit_to_target.js compiled under Node by tests/blender/flamenco_harness.js (a
stand-in for Flamenco Manager's job compiler) and its commands run in dependency order, as a
Worker would. Every task runs the real command (``blender_stand_in``: this checkout's
batch.py behind a ``blender`` executable, the command line a worker's Blender gets).

The OpenJD job runs once per module (the ``openjd_job`` fixture); the Flamenco job compares
its output with it. Node and openjd-cli are required: a missing one fails, never skips.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import bpy
import pytest
from addon_scenes import REPO_ROOT, bake, modifier_values, open_blend, replay_rmse, target_positions
from batch_run import tiny_scene
from farm_scene import MISFIT, OBJECTS, blender_stand_in, farm_shot

TEMPLATE = REPO_ROOT / "farm" / "openjd" / "fit_to_target.yaml"
JOB_TYPE = REPO_ROOT / "farm" / "flamenco" / "fit_to_target.js"
HARNESS = Path(__file__).with_name("flamenco_harness.js")
MM = 1e-3
# names a farm's command lines must carry through untouched, each to its own results file
ODD_NAMES = ("a/b", "a%2Fb", ".hidden", "-flag", 'say "cheese"', "Ünï ☂")
# what a Worker's Manager sets {blenderArgs} to by default
BLENDER_ARGS = "-b -y"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def safe_file_name(name: str) -> str:
    """The results file name (without extension) of an object, by the rule of docs/farm.md."""
    out = []
    for k, ch in enumerate(name):
        keep = ord(ch) > 127 or (ch.isascii() and (ch.isalnum() or ch in "-_")) or (ch == "." and k > 0)
        out.append(ch if keep else f"%{ord(ch):02X}")
    return "".join(out)


def test_the_safe_file_name_rule() -> None:
    assert safe_file_name("Table Cloth") == "Table%20Cloth"
    assert [safe_file_name(n) for n in ODD_NAMES] == [
        "a%2Fb",
        "a%252Fb",
        "%2Ehidden",
        "-flag",
        "say%20%22cheese%22",
        "Ünï%20☂",
    ]
    assert safe_file_name("Cloth.001") == "Cloth.001" and safe_file_name("a\\b:c") == "a%5Cb%3Ac"


# -- the tools: openjd-cli and Node are dependencies, not options ------------------------------------


def openjd() -> str:
    path = Path(sys.executable).with_name("openjd")
    found = str(path) if path.is_file() else shutil.which("openjd")
    assert found, "openjd (openjd-cli, requirements-dev.txt) is required for the farm tests: run ./dev setup"
    return found


def node() -> str:
    found = shutil.which("node")
    assert found, (
        "node (Node.js 20 or newer) is required to test the Flamenco job type "
        "(farm/flamenco/fit_to_target.js): install it (the CI does); this test does not skip"
    )
    return found


def run_openjd(*args: Any, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [openjd(), *map(str, args)], capture_output=True, text=True, timeout=timeout, env=dict(os.environ)
    )


def harness(*args: Any) -> subprocess.CompletedProcess:
    return subprocess.run([node(), str(HARNESS), *map(str, args)], capture_output=True, text=True, timeout=60)


def exit_codes(log: str) -> list[int]:
    """The exit status of every action `openjd run` ran, in order."""
    return [
        int(line.split("exited with code: ")[1].split()[0])
        for line in log.splitlines()
        if "exited with code: " in line
    ]


# -- a job's folders ------------------------------------------------------------------------------


def job_folders(root: Path) -> dict[str, Path]:
    """Where a job writes; none of it exists before the job runs (the first task makes the
    results folder, the apply task the bake folder)."""
    folders = {
        "root": root,
        "results": root / "results",
        "bake": root / "cache",
        "output": root / "shot_fitted.blend",
        "report": root / "shot_fitted.json",
        "log": root / "shot_fitted.jsonl",
    }
    root.mkdir(parents=True, exist_ok=True)
    assert not folders["results"].exists()
    return folders


def openjd_job(
    shot: Path, objects: list[str], blender: Path, root: Path, *params: str, step: str = "ApplyAndBake"
):
    folders = job_folders(root)
    proc = run_openjd(
        "run",
        TEMPLATE,
        "--step",
        step,
        "--run-dependencies",
        "-p",
        f"Shot={shot}",
        "-p",
        json.dumps({"Objects": objects}),
        "-p",
        f"Results={folders['results']}",
        "-p",
        f"Output={folders['output']}",
        "-p",
        f"Bake={folders['bake']}",
        "-p",
        f"Blender={blender}",
        "-p",
        "Device=cpu",
        "-p",
        "Threads=2",
        *params,
    )
    return proc, folders


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The shot, the worker's ``blender``, and the OpenJD job run on the shot's four objects."""
    base = tmp_path_factory.mktemp("farm")
    shot = farm_shot(base / "shot" / "shot.blend")
    digest = sha256(shot)
    blender = blender_stand_in(base / "bin")
    proc, folders = openjd_job(shot, list(OBJECTS), blender, base / "openjd")
    return {"base": base, "shot": shot, "digest": digest, "blender": blender, "proc": proc, **folders}


def reports(folder: Path) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))}


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- OpenJD -----------------------------------------------------------------------------------------


def test_the_openjd_template_passes_openjd_check() -> None:
    proc = run_openjd("check", TEMPLATE)
    assert proc.returncode == 0 and "passes validation" in proc.stdout, proc.stdout + proc.stderr


def test_openjd_fits_each_object_in_its_own_task(farm: dict[str, Any]) -> None:
    proc = farm["proc"]
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert exit_codes(proc.stdout) == [0] * (len(OBJECTS) + 1)  # four fits, then the apply
    found = reports(farm["results"])
    assert set(found) == {f"{safe_file_name(name)}.json" for name in OBJECTS}
    assert (farm["results"] / "Table%20Cloth.json").is_file()
    for name in OBJECTS:
        report = found[f"{safe_file_name(name)}.json"]
        (record,) = report["objects"]  # one object per task
        assert record["name"] == name and record["status"] == "ok" and record["params"]
        assert report["saved_to"] is None and report["exit_code"] == 0  # a fit task never saves
        # the contract's fit-task command line, one argument each
        results = farm["results"]
        assert report["run"]["command_line"] == [
            str(farm["shot"]),
            "--object",
            name,
            "--report",
            str(results / f"{safe_file_name(name)}.json"),
            "--log",
            str(results / f"{safe_file_name(name)}.jsonl"),
            "--misfit-exit",
            "0",
            "--quiet",
            "--device",
            "cpu",
            "--threads",
            "2",
        ]
        log = events(results / f"{safe_file_name(name)}.jsonl")
        kinds = [e["event"] for e in log]
        assert kinds[:2] == ["run_start", "object_start"] and kinds[-1] == "run_end"
        (end,) = [e for e in log if e["event"] == "object_end"]
        assert end["object"] == name and end["outcome"] == record["outcome"]
        if name == MISFIT:
            # an honest misfit is a finished task: exit 0 (--misfit-exit 0), the report says why
            assert record["outcome"] == "misfit" and record["outcome_reason"]
            assert report["status"] == "not_converged" and log[-1]["exit_code"] == 0
        else:
            assert record["outcome"] == "converged" and report["status"] == "ok"


def test_openjd_applies_every_result_into_one_output(farm: dict[str, Any]) -> None:
    assert farm["proc"].returncode == 0, farm["proc"].stdout[-4000:]
    assert sha256(farm["shot"]) == farm["digest"]  # the fit tasks and the apply only read the shot
    assert sorted(p.name for p in farm["root"].glob("*.blend*")) == ["shot_fitted.blend"]  # one output
    applied = json.loads(farm["report"].read_text(encoding="utf-8"))
    assert applied["saved_to"] == str(farm["output"]) and applied["exit_code"] == 0
    assert applied["applied"] == [str(farm["results"] / f"{safe_file_name(n)}.json") for n in sorted(OBJECTS)]
    assert [e["event"] for e in events(farm["log"])][-2:] == ["save", "run_end"]
    fitted = {n: reports(farm["results"])[f"{safe_file_name(n)}.json"]["objects"][0] for n in OBJECTS}
    caches = {record["name"]: Path(record["bake"]) for record in applied["objects"]}
    assert set(caches) == set(OBJECTS)
    assert sorted(p.name for p in farm["bake"].iterdir()) == sorted(c.name for c in caches.values())
    assert all(c.parent == farm["bake"] and c.stat().st_size > 0 for c in caches.values())

    open_blend(farm["output"])
    for name in OBJECTS:
        ob = bpy.data.objects[name]
        values = modifier_values(ob)
        for key, value in fitted[name]["params"].items():  # each task's own fit, written by the apply
            assert values[key] == pytest.approx(value, rel=1e-6), (name, key)
        assert json.loads(ob.fit_to_target.result_json)["params"] == fitted[name]["params"]
        played = Path(bpy.path.abspath(ob.modifiers[bake.CACHE_MODIFIER_NAME].filepath))
        assert played.resolve() == caches[name].resolve()
    for name in OBJECTS:
        if name == MISFIT:
            continue
        ob = bpy.data.objects[name]
        assert bake.unbake_object(ob)  # Blender's own cloth again, with the fitted values
        rmse = replay_rmse(ob, target_positions(ob))
        assert max(rmse.values()) <= 1 * MM, (name, rmse)


def test_openjd_misfit_exit_fails_the_misfit_task(farm: dict[str, Any], tmp_path: Path) -> None:
    proc, folders = openjd_job(
        farm["shot"], list(OBJECTS), farm["blender"], tmp_path / "job", "-p", "MisfitExit=4", step="Fit"
    )
    # the first task (the misfit's) ends with the configured status, and the job stops there
    assert proc.returncode != 0 and exit_codes(proc.stdout) == [4], proc.stdout[-3000:]
    (report,) = reports(folders["results"]).values()
    (record,) = report["objects"]
    assert record["name"] == MISFIT and record["outcome"] == "misfit" and record["outcome_reason"]
    assert report["exit_code"] == 4 and report["misfit_exit"] == 4
    assert not folders["output"].exists() and not folders["bake"].exists()


def test_any_object_name_reaches_its_own_results_file(tmp_path: Path) -> None:
    """Names with slashes, spaces, quotes, a leading dot or dash, "%" and non-ASCII characters:
    each fit task writes its own file, named by the rule, and the apply puts every result back
    on its object."""
    shot = tiny_scene(tmp_path / "odd.blend", names=ODD_NAMES)
    blender = blender_stand_in(tmp_path / "bin")
    proc, folders = openjd_job(shot, list(ODD_NAMES), blender, tmp_path / "job")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    found = reports(folders["results"])
    assert set(found) == {f"{safe_file_name(n)}.json" for n in ODD_NAMES}
    for name in ODD_NAMES:
        assert [r["name"] for r in found[f"{safe_file_name(name)}.json"]["objects"]] == [name]
    # the Flamenco job type names the files by the same rule
    compiled = compile_job(tmp_path, shot, folders, ", ".join(ODD_NAMES))
    reports_named = [t["commands"][0]["parameters"]["args"] for t in compiled["tasks"][:-1]]
    assert [args[args.index("--report") + 1] for args in reports_named] == [
        str(folders["results"] / f"{safe_file_name(n)}.json") for n in ODD_NAMES
    ]
    applied = json.loads(folders["report"].read_text(encoding="utf-8"))
    assert sorted(r["name"] for r in applied["objects"]) == sorted(ODD_NAMES)
    open_blend(folders["output"])
    for name in ODD_NAMES:
        params = found[f"{safe_file_name(name)}.json"]["objects"][0]["params"]
        for key, value in params.items():
            assert modifier_values(bpy.data.objects[name])[key] == pytest.approx(value, rel=1e-6)


# -- Flamenco -----------------------------------------------------------------------------------------


def job_type_info() -> dict:
    proc = harness("info", JOB_TYPE)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def evaluated_objects(shot: Path) -> str:
    """The "objects" setting as the Flamenco add-on fills it in at submission: its ``eval``
    expression, run in Blender with the add-on's names (job_types_propgroup.py)."""
    (setting,) = [s for s in job_type_info()["settings"] if s["key"] == "objects"]
    open_blend(shot)
    names = {
        "bpy": bpy,
        "C": bpy.context,
        "jobname": shot.stem,
        "Path": Path,
        "abspath": lambda p: Path(bpy.path.abspath(str(p))),
        "last_n_dir_parts": None,
        "settings": None,
    }
    return eval(setting["eval"], {}, names)


def compile_job(folder: Path, shot: Path, folders: dict[str, Path], objects: str, **settings: Any) -> dict:
    submission = {
        "name": "shot",
        "settings": {
            "blendfile": str(shot),
            "objects": objects,
            "results_dir": str(folders["results"]),
            "bake_dir": str(folders["bake"]),
            "output_file": str(folders["output"]),
            "device": "cpu",
            "threads": 2,
            **settings,
        },
    }
    path = folder / "submission.json"
    path.write_text(json.dumps(submission), encoding="utf-8")
    proc = harness("compile", JOB_TYPE, path)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def worker_command_line(command: dict, blender: Path) -> list[str]:
    """What a Worker runs for a blender-render command: `{exe} {exeArgs} {argsBefore}
    {blendfile} {args}`, with the Manager's variables expanded."""
    assert command["name"] == "blender-render"
    p = command["parameters"]
    variables = {"{blender}": str(blender), "{blenderArgs}": BLENDER_ARGS}
    exe = variables.get(p["exe"], p["exe"])
    return [
        exe,
        *shlex.split(variables.get(p["exeArgs"], p["exeArgs"])),
        *p["argsBefore"],
        p["blendfile"],
        *p["args"],
    ]


def dependency_order(tasks: list[dict]) -> list[dict]:
    done: list[str] = []
    ordered = []
    while len(ordered) < len(tasks):
        ready = [t for t in tasks if t["name"] not in done and set(t["dependencies"]) <= set(done)]
        assert ready, "a dependency cycle"
        ordered.append(ready[0])
        done.append(ready[0]["name"])
    return ordered


def test_flamenco_job_matches_the_openjd_job(farm: dict[str, Any], tmp_path: Path) -> None:
    objects = evaluated_objects(farm["shot"])
    assert objects == ", ".join(sorted(OBJECTS))  # every object with fit targets
    folders = job_folders(tmp_path / "flamenco")
    compiled = compile_job(tmp_path, farm["shot"], folders, objects)
    tasks = compiled["tasks"]
    fit_names = [f"fit-{name}" for name in sorted(OBJECTS)]
    assert [t["name"] for t in tasks] == [*fit_names, "apply-and-bake"]
    assert {t["type"] for t in tasks} == {"blender"} and all(len(t["commands"]) == 1 for t in tasks)
    assert [t["dependencies"] for t in tasks] == [[]] * len(OBJECTS) + [fit_names]

    # the same command lines as the OpenJD job's, up to the job's own folder
    def relative(args: list[str], root: Path) -> list[str]:
        return [a.replace(str(root), "<job>") for a in args]

    ran_by_openjd = {
        r["objects"][0]["name"]: r["run"]["command_line"] for r in reports(farm["results"]).values()
    }
    ran_by_openjd["apply"] = json.loads(farm["report"].read_text(encoding="utf-8"))["run"]["command_line"]
    for task in tasks:
        p = task["commands"][0]["parameters"]
        assert p["exe"] == "{blender}" and p["argsBefore"] == ["--command", "fit_to_target"]
        name = "apply" if task["name"] == "apply-and-bake" else task["name"].removeprefix("fit-")
        assert relative([p["blendfile"], *p["args"]], folders["root"]) == relative(
            ran_by_openjd[name], farm["root"]
        ), name

    # a Worker runs them, dependencies first
    for task in dependency_order(tasks):
        command = worker_command_line(task["commands"][0], farm["blender"])
        proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (task["name"], proc.stdout[-3000:], proc.stderr[-2000:])
    assert sorted(reports(folders["results"])) == sorted(reports(farm["results"]))

    # the very same fitted values as the OpenJD job's, in the one output file
    open_blend(farm["output"])
    by_openjd = {name: modifier_values(bpy.data.objects[name]) for name in OBJECTS}
    open_blend(folders["output"])
    by_flamenco = {name: modifier_values(bpy.data.objects[name]) for name in OBJECTS}
    assert by_flamenco == by_openjd
    assert sha256(farm["shot"]) == farm["digest"]


# -- the harness refuses what Flamenco refuses ---------------------------------------------------------


def small_job_type(body: str) -> str:
    setting = '{ key: "blendfile", type: "string", required: true }'
    job_type = f'const JOB_TYPE = {{ label: "Test", settings: [{setting}] }};\n'
    return job_type + f"function compileJob(job) {{\n{body}\n}}\n"


GOOD = (
    'const t = author.Task("fit", "blender");\n'
    't.addCommand(author.Command("blender-render", {exe: "{blender}", exeArgs: "{blenderArgs}",'
    " argsBefore: [], blendfile: job.settings.blendfile, args: []}));\n"
    "job.addTask(t);"
)
REFUSED = {
    "unknown command": (
        small_job_type(GOOD.replace('"blender-render"', '"blender-fit"')),
        {"blendfile": "a.blend"},
        'unknown command "blender-fit"',
    ),
    "dependency on a task not added": (
        small_job_type(GOOD + '\nconst other = author.Task("other", "blender");\nt.addDependency(other);'),
        {"blendfile": "a.blend"},
        "depends on task 'other', which was not added to the job",
    ),
    "required setting missing": (small_job_type(GOOD), {}, "setting 'blendfile' is required"),
    "required setting empty": (small_job_type(GOOD), {"blendfile": ""}, "setting 'blendfile' is required"),
    "task without a type": (
        small_job_type(GOOD.replace('"fit", "blender"', '"fit", ""')),
        {"blendfile": "a.blend"},
        "type is required",
    ),
    "blender-render without exe": (
        small_job_type(GOOD.replace('exe: "{blender}", ', "")),
        {"blendfile": "a.blend"},
        "missing 'exe' parameter",
    ),
    "arguments that are not strings": (
        small_job_type(GOOD.replace("args: []", "args: [1]")),
        {"blendfile": "a.blend"},
        "'args' must be a list of strings",
    ),
    "a setting of the wrong type": (small_job_type(GOOD), {"blendfile": 3}, "must be of type string"),
    "compileJob throws": (
        small_job_type('throw "no frames";'),
        {"blendfile": "a.blend"},
        "compileJob: no frames",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_the_harness_refuses_what_flamenco_refuses(case: str, tmp_path: Path) -> None:
    script, settings, message = REFUSED[case]
    (tmp_path / "job_type.js").write_text(script, encoding="utf-8")
    (tmp_path / "settings.json").write_text(json.dumps({"settings": settings}), encoding="utf-8")
    proc = harness("compile", tmp_path / "job_type.js", tmp_path / "settings.json")
    assert proc.returncode == 1 and not proc.stdout, (proc.stdout, proc.stderr)
    assert proc.stderr.startswith("flamenco-harness: ") and message in proc.stderr, proc.stderr


def test_the_harness_compiles_a_good_job(tmp_path: Path) -> None:
    (tmp_path / "job_type.js").write_text(small_job_type(GOOD), encoding="utf-8")
    settings = {"settings": {"blendfile": "a.blend"}}
    (tmp_path / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    proc = harness("compile", tmp_path / "job_type.js", tmp_path / "settings.json")
    assert proc.returncode == 0, proc.stderr
    (task,) = json.loads(proc.stdout)["tasks"]
    assert task["name"] == "fit" and task["commands"][0]["parameters"]["blendfile"] == "a.blend"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"objects": " , "}, "no objects to fit"),
        ({"output_file": "<results>/shot_fitted.blend"}, "must not be in the results folder"),
    ],
)
def test_the_job_type_refuses_a_job_it_cannot_run(settings: dict, message: str, tmp_path: Path) -> None:
    folders = job_folders(tmp_path / "job")
    submission = {
        "blendfile": "shot.blend",
        "objects": "Flag",
        "results_dir": str(folders["results"]),
        "bake_dir": str(folders["bake"]),
        "output_file": str(folders["output"]),
    }
    submission.update({k: v.replace("<results>", str(folders["results"])) for k, v in settings.items()})
    (tmp_path / "settings.json").write_text(json.dumps({"settings": submission}), encoding="utf-8")
    proc = harness("compile", JOB_TYPE, tmp_path / "settings.json")
    assert proc.returncode == 1 and message in proc.stderr, proc.stderr
