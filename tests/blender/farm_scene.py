"""The farm tests' shot: four small clamped cloths, each with a target from Blender's own
solver, one of them set up so that its fit cannot match (it may only change its bending
stiffness, while its target was made with a different tension), and the stand-in for a
worker's ``blender`` executable that the farm templates call."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import bpy
from addon_scenes import REPO_ROOT
from batch_run import tiny_scene

# a name with a space: the templates pass object names through a farm's command lines
OBJECTS = ("Banner", "Flag", "Sail", "Table Cloth")
MISFIT = "Banner"  # its fit may only change bending: it ends misfit
BATCH = REPO_ROOT / "batch.py"


def farm_shot(path: Path) -> Path:
    """The shot file at ``path``: :data:`OBJECTS`, :data:`MISFIT` with
    only its bending stiffness free."""
    tiny_scene(path, names=OBJECTS)
    misfit = bpy.data.objects[MISFIT].fit_to_target
    misfit.fit_tension_stiffness = False
    misfit.fit_compression_stiffness = False
    misfit.fit_bending_stiffness = True
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


SHIM = '''#!{python}
"""A worker's "blender" for the farm tests: `blender [-b] [-y] [--factory-startup]
--command fit_to_target ARGS` runs the checkout's batch.py with the bpy module."""
import os, sys
args = sys.argv[1:]
while args and args[0] in ("-b", "--background", "-y", "--enable-autoexec", "--factory-startup"):
    args = args[1:]
if args[:2] != ["--command", "fit_to_target"]:
    sys.exit("blender stand-in: expected --command fit_to_target, got %r" % (args,))
os.execv(sys.executable, [sys.executable, {batch!r}, *args[2:]])
'''


def blender_stand_in(folder: Path) -> Path:
    """An executable ``blender`` in ``folder`` that runs ``--command fit_to_target ARGS``
    through this checkout's ``batch.py`` (the farm's worker would run Blender with the
    extension installed; the command line is the same)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "blender"
    path.write_text(SHIM.format(python=sys.executable, batch=str(BATCH)), encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    assert os.access(path, os.X_OK)
    return path
