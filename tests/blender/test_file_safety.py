"""The batch command never loses a user's file: outputs are checked before any work, written
through verified temporaries, and a full disk or a killed run leaves the previous file as
it was. Each test builds its own scene in a temporary folder."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import bpy
import numpy as np
import pytest
from addon_scenes import TMP, bake, fresh_copy, open_blend, target_positions, world_positions
from batch_run import (
    SELF_SIGNAL,
    io_module,
    mounted_tmpfs,
    our_errors,
    outputs_module,
    run_batch,
    run_in_process,
    sha256,
    temporaries,
    tiny_scene,
)


@pytest.fixture(scope="module")
def scene_file() -> Path:
    return tiny_scene(TMP / "file_safety" / "tiny.blend")


@pytest.fixture
def scene(scene_file: Path, tmp_path: Path) -> Path:
    return fresh_copy(scene_file, tmp_path / "input")


@pytest.fixture
def out(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


def listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# -- (1) the report never replaces the input or the saved .blend ------------------------------------


@pytest.mark.parametrize(
    "case",
    ["report is the input", "report is the save", "report links to the input", "report is a hard link"],
)
def test_outputs_never_replace_the_input_or_each_other(scene: Path, out: Path, case: str) -> None:
    digest = sha256(scene)
    if case == "report is the input":
        args = ["--report", scene]
    elif case == "report is the save":
        args = ["--report", out / "fitted.blend", "--save", out / "fitted.blend"]
    elif case == "report links to the input":
        (out / "report.json").symlink_to(scene)
        args = ["--report", out / "report.json", "--save", out / "fitted.blend"]
    else:
        os.link(scene, out / "report.json")
        args = ["--report", out / "report.json"]
    before = listing(out)
    code, stdout, stderr = run_in_process(scene, *args)
    assert code == 2, (stdout, stderr)
    (line,) = our_errors(stderr)
    assert "--report" in line, line
    assert "fit Cloth iter" not in stdout  # refused before any work
    assert sha256(scene) == digest
    assert listing(out) == before


# -- (3) a FIFO or a device node given as an output is never replaced -------------------------------


def make_node(path: Path, kind: str) -> int:
    """A FIFO, or a character device like /dev/null, made here (never the machine's own)."""
    if kind == "fifo":
        os.mkfifo(path)
        return stat.S_IFIFO
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, AttributeError, OSError) as e:
        pytest.skip(f"cannot make a device node here: {e}")
    return stat.S_IFCHR


@pytest.mark.parametrize("flag", ["--report", "--save", "--bake"])
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_fifos_and_devices_are_never_replaced(scene: Path, out: Path, flag: str, kind: str) -> None:
    if flag == "--bake":
        target = out / "cache"
        target.mkdir()
        node = target / bake.bake_filename("Cloth")
    else:
        target = node = out / "node"
    made = make_node(node, kind)
    code, stdout, stderr = run_in_process(scene, flag, target, "--quiet")
    assert code == 2, (stdout, stderr)
    (line,) = our_errors(stderr)
    assert "FIFO" in line or "device" in line, line
    assert stat.S_IFMT(os.lstat(node).st_mode) == made  # still the node, not a regular file


# -- (4) objects whose names clean to the same file name bake apart --------------------------------


def test_bake_file_names_are_unique_and_stable() -> None:
    names = ["A B", "A_B", "A/B", "Cloth", "cloth", "Ｃｌｏｔｈ"]
    files = [bake.bake_filename(n) for n in names]
    assert len({f.casefold() for f in files}) == len(names), files  # also on case-insensitive disks
    assert files == [bake.bake_filename(n) for n in names]  # the same name, the same file
    assert all(f.endswith(".pc2") and "/" not in f for f in files)


def test_a_b_and_a_underscore_b_each_play_their_own_bake(tmp_path: Path) -> None:
    scene = tiny_scene(tmp_path / "names.blend", names=("A B", "A_B"))
    proc = run_batch(scene, "--bake", tmp_path / "cache", "--save", tmp_path / "fitted.blend", "--quiet")
    assert proc.returncode == 0, proc.stderr
    open_blend(tmp_path / "fitted.blend")
    paths = {
        name: bpy.data.objects[name].modifiers[bake.CACHE_MODIFIER_NAME].filepath for name in ("A B", "A_B")
    }
    assert len(set(paths.values())) == 2, paths
    scene_ = bpy.context.scene
    for name in ("A B", "A_B"):
        ob = bpy.data.objects[name]
        (frame, target), *_ = target_positions(ob).items()
        scene_.frame_set(frame)
        shown = world_positions(ob, bpy.context.evaluated_depsgraph_get())
        assert np.abs(shown - target).max() < 1e-3, name  # its own motion, not the other's (2 m away)


# -- (6) an output folder that cannot be written, or a --bake that is a file: before the fit -------


@contextlib.contextmanager
def read_only_folder(folder: Path) -> Iterator[Path]:
    """A folder this process cannot write: permissions for a user, a read-only mount for root."""
    if os.geteuid() != 0:
        folder.mkdir()
        folder.chmod(0o555)
        try:
            yield folder
        finally:
            folder.chmod(0o755)
    else:
        with mounted_tmpfs(folder, "1m", read_only=True):
            yield folder


def test_unwritable_report_folder_is_refused_before_the_fit(scene: Path, out: Path) -> None:
    with read_only_folder(out / "locked") as locked:
        code, stdout, stderr = run_in_process(
            scene, "--report", locked / "report.json", "--save", out / "fitted.blend"
        )
    assert code == 2, (stdout, stderr)
    (line,) = our_errors(stderr)
    assert "--report: cannot write in" in line, line
    assert "fit Cloth iter" not in stdout
    assert not (out / "fitted.blend").exists()


def test_bake_path_that_is_a_file_is_refused_before_the_fit(scene: Path, out: Path) -> None:
    (out / "cache").write_text("a file\n")
    code, stdout, stderr = run_in_process(scene, "--bake", out / "cache", "--save", out / "fitted.blend")
    assert code == 2, (stdout, stderr)
    (line,) = our_errors(stderr)
    assert "--bake" in line and "is a file" in line, line
    assert "fit Cloth iter" not in stdout
    assert sorted(p.name for p in out.iterdir()) == ["cache"]


# -- (8) bake paths are stored relative to the saved .blend ------------------------------------------


def test_baked_scene_still_plays_after_its_folder_moves(scene: Path, tmp_path: Path) -> None:
    farm = tmp_path / "job"
    (farm / "shot").mkdir(parents=True)
    code, stdout, stderr = run_in_process(
        scene, "--bake", farm / "cache", "--save", farm / "shot" / "fitted.blend"
    )
    assert code == 0, stderr
    moved = shutil.move(str(farm), str(tmp_path / "elsewhere"))
    open_blend(Path(moved) / "shot" / "fitted.blend")
    path = bpy.data.objects["Cloth"].modifiers[bake.CACHE_MODIFIER_NAME].filepath
    assert path == f"//../cache/{bake.bake_filename('Cloth')}", path
    assert Path(bpy.path.abspath(path)).is_file()


# -- (2) a full disk never replaces the previous output ----------------------------------------------


def _is_our_temporary(fd_or_path: int | str | os.PathLike) -> bool:
    if isinstance(fd_or_path, int):
        try:
            fd_or_path = os.readlink(f"/proc/self/fd/{fd_or_path}")
        except OSError:
            return False
    return ".fit-tmp-" in os.fspath(fd_or_path)


def _no_space(*_args) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def inject(monkeypatch: pytest.MonkeyPatch, fault: str) -> None:
    """Make one step of writing our temporaries fail as on a full disk."""
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc to tell our temporaries' descriptors apart")
    if fault in ("write", "fsync", "rename"):
        name = {"write": "write", "fsync": "fsync", "rename": "replace"}[fault]
        real = getattr(os, name)

        def failing(first, *rest):
            if _is_our_temporary(first):
                _no_space()
            return real(first, *rest)

        monkeypatch.setattr(os, name, failing)
    elif fault == "blender truncates":
        real_save = outputs_module.blender_save

        def truncated(path: Path) -> None:  # what Blender does on a full disk: "Saved", half a file
            real_save(path)
            with open(path, "r+b") as f:
                f.truncate(path.stat().st_size // 2)

        monkeypatch.setattr(outputs_module, "blender_save", truncated)
    elif fault == "blender fails":

        def failing_save(path: Path) -> None:
            Path(f"{path}@").write_bytes(b"BLENDER-v500")  # its partial file, as a crash leaves it
            raise RuntimeError("Error: Cannot open file for writing: No space left on device")

        monkeypatch.setattr(outputs_module, "blender_save", failing_save)


SAVE_FAULTS = ["blender truncates", "blender fails", "fsync", "rename"]
REPORT_FAULTS = ["write", "fsync", "rename"]


@pytest.mark.parametrize(
    "writer, fault", [("save", f) for f in SAVE_FAULTS] + [("report", f) for f in REPORT_FAULTS]
)
def test_injected_full_disk_keeps_the_previous_file(
    scene: Path, out: Path, monkeypatch: pytest.MonkeyPatch, writer: str, fault: str
) -> None:
    previous = out / ("fitted.blend" if writer == "save" else "report.json")
    if writer == "save":
        shutil.copyfile(scene, previous)
    else:
        previous.write_text('{"previous": true}\n')
    digest = sha256(previous)
    inject(monkeypatch, fault)
    code, stdout, stderr = run_in_process(scene, f"--{writer}", previous, "--quiet")
    monkeypatch.undo()
    assert code == 3, (stdout, stderr)
    (line,) = our_errors(stderr)
    assert str(previous) in line and ("No space left" in line or "incomplete" in line), line
    assert "Traceback" not in stderr
    assert sha256(previous) == digest
    assert temporaries(out) == []


def test_compressed_save_truncated_on_a_full_disk_is_caught(tmp_path: Path, monkeypatch) -> None:
    scene = tiny_scene(tmp_path / "input" / "packed.blend", compress=True)
    assert scene.read_bytes()[:4] == outputs_module.ZSTD_MAGIC
    previous = tmp_path / "fitted.blend"
    previous.write_bytes(b"the previous fitted scene")
    inject(monkeypatch, "blender truncates")
    code, _, stderr = run_in_process(scene, "--save", previous, "--quiet")
    monkeypatch.undo()
    assert code == 3 and "incomplete" in our_errors(stderr)[0]
    assert previous.read_bytes() == b"the previous fitted scene"
    assert temporaries(tmp_path) == []


def _fill(disk: Path, leave: int) -> None:
    """Fill ``disk`` until ``leave`` bytes are free (0: until a write fails)."""
    filler = disk / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                st = os.statvfs(disk)
                free = st.f_bavail * st.f_frsize
                if free <= leave:
                    break
                f.write(b"\0" * min(free - leave, 1 << 20))
                f.flush()
        except OSError:
            pass


@pytest.mark.parametrize("leave_kib", [0, 16])
def test_real_full_disk_keeps_the_previous_blend(tmp_path: Path, leave_kib: int) -> None:
    scene = tiny_scene(tmp_path / "input" / "packed.blend", compress=True)
    with mounted_tmpfs(tmp_path / "disk", "2m") as disk:
        previous = disk / "fitted.blend"
        shutil.copyfile(scene, previous)
        digest = sha256(previous)
        _fill(disk, leave_kib * 1024)
        proc = run_batch(scene, "--save", previous, "--quiet")
        assert proc.returncode == 3, (proc.stdout, proc.stderr)
        (line,) = our_errors(proc.stderr)
        assert line.startswith(f"fit-to-target: cannot save {previous}"), line
        assert "Traceback" not in proc.stderr
        assert sha256(previous) == digest
        assert temporaries(disk) == []


def test_real_full_disk_keeps_the_previous_report(scene: Path, tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / "disk", "1m") as disk:
        previous = disk / "report.json"
        previous.write_text('{"previous": true}\n')
        _fill(disk, 0)
        proc = run_batch(scene, "--report", previous, "--quiet")
        assert proc.returncode == 3, (proc.stdout, proc.stderr)
        (line,) = our_errors(proc.stderr)
        assert line == f"fit-to-target: cannot write the report {previous}: No space left on device", line
        assert "Traceback" not in proc.stderr
        assert json.loads(previous.read_text()) == {"previous": True}
        assert temporaries(disk) == []


# -- (5) a run killed during its save leaves a temporary the next run removes -------------------------


def test_a_killed_save_leaves_only_a_recognisable_temporary(scene: Path, out: Path) -> None:
    previous = out / "fitted.blend"
    previous.write_bytes(b"the previous fitted scene")
    proc = run_batch(scene, "--save", previous, "--quiet", env={SELF_SIGNAL: "save-written:SIGKILL"})
    assert proc.returncode == -9, (proc.returncode, proc.stderr)
    left = temporaries(out)
    assert left and all(io_module.is_temporary(name) for name in left), left
    assert previous.read_bytes() == b"the previous fitted scene"

    # a temporary of a live process, and one of another host, are left alone
    alive = out / f".fitted.blend.fit-tmp-{io_module._host_tag()}-{os.getpid()}-0a1b.blend"
    other_host = out / f".fitted.blend.fit-tmp-00000000-{_dead_pid()}-0a1b.blend"
    alive.write_bytes(b"in progress")
    other_host.write_bytes(b"someone else's")
    proc = run_batch(scene, "--save", previous, "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert temporaries(out) == sorted([alive.name, other_host.name])
    open_blend(previous)
    assert "Cloth" in bpy.data.objects


def _dead_pid() -> int:
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(child.stdout)
