"""Helpers for the batch command's safety tests: small scenes, runs in a subprocess or in
this process, and what a run must never leave behind."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import bpy
import pytest
from addon_scenes import REPO_ROOT, add_targets_from_blender, clamped_cloth, cli
from blender_ref import _PACKAGE
from mathutils import Matrix

BATCH = REPO_ROOT / "batch.py"
# the environment variable that makes a run send itself a signal at a named moment
# (addon/cli/signals.py): "PHASE:SIGNAME"
SELF_SIGNAL = "FIT_TO_TARGET_SELF_SIGNAL"
TRUTH = {"tension_stiffness": 30.0, "compression_stiffness": 30.0}
io_module = importlib.import_module(f"{_PACKAGE.__name__}.warp_core.io")
outputs_module = importlib.import_module(f"{_PACKAGE.__name__}.addon.cli.outputs")


def run_batch(*args, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    environment = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, str(BATCH), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
    )


def run_in_process(*args) -> tuple[int, str, str]:
    """``cli.main`` in this process (so tests can patch it): (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = cli.main([str(a) for a in args], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def our_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("fit-to-target:")]


def temporaries(folder: Path) -> list[str]:
    """Every temporary of a write (ours, or Blender's partial save of one) under ``folder``."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if ".fit-tmp-" in p.name)


def tiny_scene(
    path: Path, names: tuple[str, ...] = ("Cloth",), frame_end: int = 6, compress: bool = False
) -> Path:
    """A small clamped sheet per name (1 m apart, different stiffness each) with one target
    from Blender's solver at ``frame_end``; saved to ``path``. A fit takes about a second."""
    bpy.ops.wm.read_homefile(use_factory_startup=True, use_empty=True)
    bpy.context.scene.frame_end = frame_end
    for k, name in enumerate(names):
        ob = clamped_cloth(name=name, n=5, frame_end=frame_end)
        # apart in the mesh itself, not the transform: a cache played on the wrong object shows
        ob.data.transform(Matrix.Translation((2.0 * k, 0.0, 0.0)))
        truth = {key: value * (1.0 + 0.5 * k) for key, value in TRUTH.items()}
        add_targets_from_blender(ob, truth, [frame_end], prefix=f"target{k}")
    path.parent.mkdir(parents=True, exist_ok=True)
    bpy.ops.wm.save_as_mainfile(filepath=str(path), compress=compress)
    return path


@contextlib.contextmanager
def mounted_tmpfs(folder: Path, size: str, read_only: bool = False) -> Iterator[Path]:
    """A small tmpfs at ``folder`` (root only); skips the test where it cannot be mounted."""
    folder.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    try:
        made = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"cannot mount a tmpfs here: {e}")
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode(errors='replace').strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def check_refusal_report(path: Path, line: str) -> dict:
    """The report a run refused for bad input writes: exit 2, status usage_error, no object,
    and its error the message of the one line printed (``line``)."""
    report = json.loads(path.read_text(encoding="utf-8"))
    assert (report["status"], report["exit_code"], report["objects"]) == ("usage_error", 2, []), report
    assert line == f"fit-to-target: error: {report['error']}", (line, report["error"])
    assert report["run"]["command_line"] and report["saved_to"] is None
    return report
