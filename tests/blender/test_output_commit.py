"""A run's outputs belong together and to that run: the bake never replaces a cache the input
plays, the caches are renamed into place only with the .blend that plays them, two runs
never write the same outputs at once, and a signal before any fit leaves the report alone.

Every check runs ``batch.py`` in real processes on real files; the signals are real (the
run sends them to itself at a named moment, ``FIT_TO_TARGET_SELF_SIGNAL``, or the test
sends them). Whether a .blend plays its own values is measured, not assumed: its cache,
placed in the world, against the model's rollout of the values the .blend holds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import bpy
import numpy as np
import pytest
from addon_scenes import add_targets_from_blender, bake, clamped_cloth, model_trajectory, open_blend, pc2
from batch_run import (
    BATCH,
    SELF_SIGNAL,
    io_module,
    our_errors,
    outputs_module,
    run_batch,
    run_in_process,
    sha256,
    temporaries,
)

FRAME_END = 6
OWN = 1e-5  # m: a .blend playing its own values (the cache is float32); another fit's is mm off


def scene_file(path: Path, tension: float, other: float | None = None) -> Path:
    """A 5 x 5 clamped sheet "Cloth" whose target (frame 6, Blender's own cloth) has tension
    and compression ``tension``; with ``other``, also a target "Other.target.006" made with
    that value, not among the object's targets (for ``--target``)."""
    bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
    bpy.context.scene.frame_end = FRAME_END
    ob = clamped_cloth(name="Cloth", n=5, frame_end=FRAME_END)
    if other is not None:
        add_targets_from_blender(
            ob, {"tension_stiffness": other, "compression_stiffness": other}, [6], "Other"
        )
        ob.fit_to_target.targets.remove(0)
    add_targets_from_blender(ob, {"tension_stiffness": tension, "compression_stiffness": tension}, [6])
    path.parent.mkdir(parents=True, exist_ok=True)
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def cache_of(saved: Path) -> Path:
    """The .pc2 the saved .blend's Cloth plays."""
    open_blend(saved)
    return Path(bpy.path.abspath(bpy.data.objects["Cloth"].modifiers[bake.CACHE_MODIFIER_NAME].filepath))


def off_own_values(saved: Path) -> float:
    """Largest distance (m) between what ``saved`` plays and its own values simulated again."""
    samples, _, _ = pc2.read_pc2(cache_of(saved))
    ob = bpy.data.objects["Cloth"]
    matrix = np.array(ob.matrix_world)
    shown = samples @ matrix[:3, :3].T + matrix[:3, 3]
    bake.unbake_object(ob)  # the cloth modifier back on, with the values the file holds
    own = model_trajectory(ob, FRAME_END)
    assert own.shape == shown.shape, (own.shape, shown.shape)
    return float(np.linalg.norm(shown - own, axis=-1).max())


def saved_tension(saved: Path) -> float:
    open_blend(saved)
    return float(bpy.data.objects["Cloth"].modifiers["Cloth"].settings.tension_stiffness)


def locks(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*.fit-lock"))


def listing(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): sha256(p) for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("scenes")
    return {
        "40": scene_file(folder / "forty.blend", 40.0, other=60.0),
        "60": scene_file(folder / "sixty.blend", 60.0),
    }


def outputs(folder: Path) -> list[object]:
    folder.mkdir(exist_ok=True)
    return ["--save", folder / "fitted.blend", "--report", folder / "report.json", "--bake", folder / "cache"]


# -- (1) the bake never replaces a cache the input plays -------------------------------------------------


def test_bake_into_the_folder_the_input_plays_is_refused(scenes: dict[str, Path], tmp_path: Path) -> None:
    shot = tmp_path / "shot"
    shot.mkdir()
    made = run_batch(scenes["40"], "--save", shot / "scene.blend", "--bake", shot / "fit_cache", "--quiet")
    assert made.returncode == 0, made.stderr
    scene = shot / "scene.blend"
    played = cache_of(scene)
    assert played.parent == shot / "fit_cache" and played.is_file()
    before = listing(shot)

    # fitting the file again to another target, baking to the folder it plays from
    proc = run_batch(
        scene, "--target", "Other.target.006@6", "--bake", shot / "fit_cache", "--save", shot / "refit.blend"
    )
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    (line,) = our_errors(proc.stderr)
    assert str(played) in line and "the input file uses" in line and "--in-place" in line, line
    assert "fit Cloth iter" not in proc.stdout  # refused before any work
    assert listing(shot) == before  # nothing written, the cache the input plays included
    assert off_own_values(scene) < OWN

    # --in-place: the input is saved with its new cache, the two renamed into place together
    proc = run_batch(scene, "--target", "Other.target.006@6", "--bake", shot / "fit_cache", "--in-place")
    assert proc.returncode == 0, proc.stderr
    assert saved_tension(scene) == pytest.approx(60.0, rel=0.02)
    assert cache_of(scene) == played
    assert off_own_values(scene) < OWN
    assert temporaries(shot) == [] and locks(shot) == []


# -- (2) the caches are committed with the save, never before it ----------------------------------------


def test_a_signal_during_the_save_keeps_the_previous_blend_and_its_cache(
    scenes: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    first = run_batch(scenes["40"], *outputs(out), "--quiet")
    assert first.returncode == 0, first.stderr
    before = listing(out)

    proc = run_batch(scenes["60"], *outputs(out), "--quiet", env={SELF_SIGNAL: "save-written:SIGTERM"})
    assert proc.returncode == 143, (proc.returncode, proc.stderr)
    assert our_errors(proc.stderr)[-1].startswith("fit-to-target: interrupted by SIGTERM: nothing was saved")
    after = listing(out)
    assert after.pop("report.json") != before.pop("report.json")  # the partial report
    assert after == before  # the .blend and the cache it plays, byte for byte
    assert saved_tension(out / "fitted.blend") == pytest.approx(40.0, rel=0.02)
    assert off_own_values(out / "fitted.blend") < OWN
    assert temporaries(out) == [] and locks(out) == []


def test_a_failed_save_keeps_the_previous_cache(
    scenes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    first = run_batch(scenes["40"], *outputs(out), "--quiet")
    assert first.returncode == 0, first.stderr
    before = listing(out)

    def full_disk(path: Path) -> None:  # as Blender fails on a full disk: a partial file, an error
        Path(f"{path}@").write_bytes(b"BLENDER-v500")
        raise RuntimeError("Error: Cannot open file for writing: No space left on device")

    monkeypatch.setattr(outputs_module, "blender_save", full_disk)
    code, stdout, stderr = run_in_process(scenes["60"], *outputs(out), "--quiet")
    monkeypatch.undo()
    assert code == 3, (stdout, stderr)
    (line,) = our_errors(stderr)
    assert line.startswith(f"fit-to-target: cannot save {out / 'fitted.blend'}: "), line
    assert "No space left" in line and "unchanged" in line, line
    after = listing(out)
    after.pop("report.json"), before.pop("report.json")
    assert after == before  # the .blend and the cache it plays, byte for byte
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "failed" and report["saved_to"] is None
    assert "bake" not in report["objects"][0]  # the cache it baked was never put in place
    assert off_own_values(out / "fitted.blend") < OWN
    assert temporaries(out) == [] and locks(out) == []


def test_a_failed_rename_puts_back_the_files_already_replaced(tmp_path: Path) -> None:
    cache, blend = tmp_path / "cache.pc2", tmp_path / "scene.blend"
    cache.write_bytes(b"previous cache")
    pairs = [(io_module.stage_bytes(p, b"new " + p.name.encode()), p) for p in (cache, blend)]
    blend.mkdir()  # the last rename of the commit fails: a folder came in the way
    (blend / "keep").write_text("x")
    with pytest.raises(OSError):
        io_module.commit_temporaries(pairs)
    assert cache.read_bytes() == b"previous cache"
    assert temporaries(tmp_path) == []


# -- (3) two runs never write the same outputs at once --------------------------------------------------


def test_a_second_run_on_the_same_outputs_is_refused_while_the_first_works(
    scenes: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    # the first run stops itself (SIGSTOP) after its bake, before its save
    first = subprocess.Popen(
        [sys.executable, str(BATCH), str(scenes["40"]), *map(str, outputs(out)), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, SELF_SIGNAL: "save:SIGSTOP"},
    )
    try:
        _, status = os.waitpid(first.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), status
        second = run_batch(scenes["60"], *outputs(out), "--quiet")
        first.send_signal(signal.SIGCONT)
        stdout, stderr = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 0, (first.returncode, stderr)
    report = json.loads((out / "report.json").read_text())
    (entry,) = report["objects"]
    assert entry["params"]["tension_stiffness"] == pytest.approx(
        saved_tension(out / "fitted.blend"), rel=1e-6
    )
    assert off_own_values(out / "fitted.blend") < OWN  # the .blend, its report and its cache: one run's

    assert second.returncode == 2, (second.returncode, second.stderr)
    (line,) = our_errors(second.stderr)
    assert "is being written by another run" in line and f"pid {first.pid} " in line, line
    assert "fit Cloth iter" not in second.stdout
    assert temporaries(out) == [] and locks(out) == []


def test_a_lock_left_by_a_killed_run_is_taken_over(scenes: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    killed = run_batch(scenes["40"], *outputs(out), "--quiet", env={SELF_SIGNAL: "save-written:SIGKILL"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert locks(out) == sorted(
        [".fitted.blend.fit-lock", ".report.json.fit-lock", f"cache/.{bake.bake_filename('Cloth')}.fit-lock"]
    )
    (out / ".older.json.fit-lock").write_text("pid 1 on a run long gone\n")  # held by no process
    proc = run_batch(scenes["60"], *outputs(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert locks(out) == [] and temporaries(out) == []
    assert off_own_values(out / "fitted.blend") < OWN


# -- (9) a signal before any fit leaves an existing report alone -----------------------------------------


@pytest.mark.parametrize("moment", ["import", "fit"])  # while bpy loads; as the first fit starts
def test_an_early_signal_leaves_the_previous_report(
    scenes: dict[str, Path], tmp_path: Path, moment: str
) -> None:
    out = tmp_path / "out"
    first = run_batch(scenes["40"], *outputs(out), "--quiet")
    assert first.returncode == 0, first.stderr
    before = listing(out)

    proc = run_batch(scenes["60"], *outputs(out), "--quiet", env={SELF_SIGNAL: f"{moment}:SIGTERM"})
    assert proc.returncode == 143, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert listing(out) == before  # the report still describes the .blend beside it
    assert json.loads((out / "report.json").read_text())["objects"]  # not emptied
    assert our_errors(proc.stderr)[-1].endswith(
        f"{out / 'report.json'} was left as it was (nothing was fitted)"
    )
    assert temporaries(out) == [] and locks(out) == []
