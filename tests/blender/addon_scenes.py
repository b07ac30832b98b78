"""Scenes for the add-on and batch tests, and results shared between test modules.

Every test starts from an empty scene (conftest), so what is shared is files and plain
numbers: the demo .blend is generated once per session, and the panel operator's fit of
it (used by the operator tests and compared with batch.py's) runs once per session.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import importlib
import importlib.util
import json
import shutil
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import bpy
import numpy as np
from blender_ref import (
    _PACKAGE,
    cloth_scene,
    grid_mesh,
    make_cloth_object,
    pin_row_weights,
    run_blender_cloth,
    world_positions,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
TMP = Path(tempfile.mkdtemp(prefix="fit_to_target_addon_"))
atexit.register(shutil.rmtree, TMP, ignore_errors=True)


def addon_module(name: str) -> ModuleType:
    """A module of the add-on package (``name`` relative to ``addon``)."""
    return importlib.import_module(f"{_PACKAGE.__name__}.addon.{name}")


def core_module(name: str) -> ModuleType:
    """A module of the physics core as the add-on package holds it (``name`` relative to
    ``warp_core``): its classes are the ones the add-on's own code makes."""
    return importlib.import_module(f"{_PACKAGE.__name__}.warp_core.{name}")


bake = addon_module("scene.bake")
prepare = addon_module("scene.prepare")
steps = addon_module("scene.steps")
fit_request = addon_module("request")
fit_session = addon_module("session")
fit_operators = addon_module("ui.fit_operators")
object_operators = addon_module("ui.object_operators")
job_module = addon_module("job")
cli = addon_module("cli.command")
pc2 = importlib.import_module(f"{_PACKAGE.__name__}.warp_core.pc2")
get_model = importlib.import_module(f"{_PACKAGE.__name__}.warp_core.models").get_model
object_model = addon_module("models.registry").object_model
simulation = importlib.import_module(f"{_PACKAGE.__name__}.warp_core.models.blender_cloth.simulator")
params_module = importlib.import_module(f"{_PACKAGE.__name__}.warp_core.models.blender_cloth.params")
PARAMETER_NAMES = params_module.PARAMETER_NAMES
CLOTH_SETTINGS_FIELDS = params_module.CLOTH_SETTINGS_FIELDS


def make_demo_module() -> ModuleType:
    path = REPO_ROOT / "assets" / "make_demo.py"
    spec = importlib.util.spec_from_file_location("fit_to_target_make_demo", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def demo_blend() -> Path:
    """assets/make_demo.py's scene, generated once per session (read-only: copy it to modify)."""
    return make_demo_module().build_demo(TMP / "demo_source" / "demo.blend")


def fresh_copy(source: Path, folder: Path, name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or source.name)
    shutil.copyfile(source, path)
    return path


def open_blend(path: Path) -> None:
    bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)


# -- snapshots: "nothing changed" ------------------------------------------------------------------


def modifier_values(ob: bpy.types.Object) -> dict[str, Any]:
    mod = cloth_scene.find_cloth_modifier(ob)
    return {name: getattr(mod.settings, name) for name in CLOTH_SETTINGS_FIELDS}


def modifier_stack(ob: bpy.types.Object) -> list[tuple]:
    return [(m.name, m.type, m.show_viewport, m.show_render) for m in ob.modifiers]


def fit_state(ob: bpy.types.Object) -> tuple:
    s = ob.fit_to_target
    attributes = tuple(ob.data.color_attributes.keys())
    return (s.result_json, s.previous_values_json, s.bake_json, s.applied, attributes)


def folder_listing(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def snapshot(ob: bpy.types.Object, folder: Path | None = None) -> dict[str, Any]:
    return {
        "values": modifier_values(ob),
        "stack": modifier_stack(ob),
        "state": fit_state(ob),
        "files": folder_listing(folder) if folder is not None else None,
    }


# -- small clamped cloth scenes ---------------------------------------------------------------------


def clamped_cloth(
    name: str = "Cloth",
    n: int = 8,
    size: float = 0.8,
    location: tuple[float, float, float] = (0.0, 0.0, 1.0),
    settings: dict | None = None,
    frame_end: int = 24,
) -> bpy.types.Object:
    """A horizontal n x n sheet clamped by two rows along +y (a cantilever)."""
    mesh = grid_mesh(n, n, size, size)
    return make_cloth_object(
        mesh,
        name=name,
        pin_weights=pin_row_weights(mesh, rows=2, side="+y"),
        settings=settings,
        location=location,
        frame_end=frame_end,
    )


def add_targets_from_blender(
    cloth: bpy.types.Object, truth: dict[str, float], frames: list[int], prefix: str | None = None
) -> list[bpy.types.Object]:
    """Run Blender's solver with ``truth`` and make one world-space target mesh per frame; the
    modifier's previous values are restored and the targets added to the fit settings."""
    mod = cloth_scene.find_cloth_modifier(cloth)
    saved = {k: getattr(mod.settings, k) for k in truth}
    for k, v in truth.items():
        setattr(mod.settings, k, v)
    traj = run_blender_cloth(cloth, max(frames))
    start = mod.point_cache.frame_start
    for k, v in saved.items():
        setattr(mod.settings, k, v)
    bpy.context.scene.frame_set(start)
    return add_target_meshes(cloth, traj, frames, start, prefix)


def add_target_meshes(
    ob: bpy.types.Object, trajectory: np.ndarray, frames: list[int], start: int, prefix: str | None = None
) -> list[bpy.types.Object]:
    """One world-space target mesh (the object's faces) per frame of ``trajectory`` (index 0 =
    ``start``), each added to the object's fit targets."""
    faces = [list(p.vertices) for p in ob.data.polygons]
    targets = []
    for f in frames:
        tname = f"{prefix or ob.name}.target.{f:03d}"
        tme = bpy.data.meshes.new(tname)
        tme.from_pydata(trajectory[f - start].tolist(), [], faces)
        tob = bpy.data.objects.new(tname, tme)
        bpy.context.scene.collection.objects.link(tob)
        item = ob.fit_to_target.targets.add()
        item.kind, item.object, item.frame = "OBJECT", tob, f
        targets.append(tob)
    return targets


def target_positions(ob: bpy.types.Object) -> dict[int, np.ndarray]:
    """{frame: world positions} of the object's target objects."""
    out = {}
    depsgraph = bpy.context.evaluated_depsgraph_get()
    for t in ob.fit_to_target.targets:
        out[int(t.frame)] = world_positions(t.object, depsgraph)
    return out


def replay_rmse(ob: bpy.types.Object, targets: dict[int, np.ndarray]) -> dict[int, float]:
    """RMSE (m) of Blender's own solver, with the modifier's current values, at each target frame."""
    start = cloth_scene.find_cloth_modifier(ob).point_cache.frame_start
    traj = run_blender_cloth(ob, max(targets))
    return {
        f: float(np.sqrt(np.mean(np.sum((traj[f - start] - x) ** 2, axis=1)))) for f, x in targets.items()
    }


def model_trajectory(ob: bpy.types.Object, frame_end: int, values: dict | None = None) -> np.ndarray:
    """The object's model (its scene side's choice) with its current settings, ``values`` laid
    over them, world space, every frame from the cache start: computed here from a fresh
    export, independently of the fit and the bake code."""
    scene = bpy.context.scene
    model = object_model(ob)
    mod = model.find_modifier(ob)
    start = model.cache_frame_range(mod)[0]
    depsgraph = bpy.context.evaluated_depsgraph_get()
    frame = scene.frame_current
    scene.frame_set(start)
    mesh = model.read_geometry(ob, depsgraph)
    scene.frame_set(frame)
    sampler = model.frame_sampler(scene, ob, mod, depsgraph)
    with sampler:
        frames = list(range(start, frame_end + 1))
        goals, _ = steps.run_blocking(model.sample_goals_steps(ob, depsgraph, scene, frames, sampler))
    params = sampler.settings(model.read_settings(mod, scene)).replace(**(values or {}))
    sim = get_model(model.name).build(mesh, params, "cpu", model.precision, start_frame=start)
    return sim.rollout(frame_end, None, goals).numpy()


def playback(ob: bpy.types.Object, frames: list[int]) -> np.ndarray:
    """World positions of the evaluated object (the Mesh Cache playback when baked) at each frame."""
    scene = bpy.context.scene
    depsgraph = bpy.context.evaluated_depsgraph_get()
    out = []
    for f in frames:
        scene.frame_set(f)
        out.append(world_positions(ob, depsgraph))
    return np.stack(out)


# -- the panel operator on the demo scene, once per session -------------------------------------------


@functools.cache
def demo_operator_fit() -> dict[str, Any]:
    """Open a copy of the demo, run ``object.fit_to_target`` (blocking path), replay with Blender,
    bake, play the bake back, revert. Returns everything the tests check, as plain data."""
    folder = TMP / "demo_operator"
    path = fresh_copy(demo_blend(), folder)
    open_blend(path)
    scene = bpy.context.scene
    ob = bpy.data.objects["Cloth"]
    assert bpy.context.active_object == ob
    out: dict[str, Any] = {"folder": folder, "blend": path}
    out["before"] = modifier_values(ob)
    out["stack_before"] = modifier_stack(ob)
    targets = target_positions(ob)
    t0 = time.perf_counter()
    out["op_result"] = bpy.ops.object.fit_to_target()
    out["seconds"] = time.perf_counter() - t0
    out["after"] = modifier_values(ob)
    out["record"] = json.loads(ob.fit_to_target.result_json)
    out["previous_json"] = json.loads(ob.fit_to_target.previous_values_json)
    out["applied"] = ob.fit_to_target.applied
    out["replay_rmse"] = replay_rmse(ob, targets)

    out["bake_result"] = bpy.ops.object.fit_to_target_bake()
    out["bake_state"] = json.loads(ob.fit_to_target.bake_json)
    out["stack_baked"] = modifier_stack(ob)
    cache = ob.modifiers[bake.CACHE_MODIFIER_NAME]
    out["cache_settings"] = {
        k: getattr(cache, k) for k in ("cache_format", "filepath", "frame_start", "frame_scale", "play_mode")
    }
    frames = list(range(cloth_scene.find_cloth_modifier(ob).point_cache.frame_start, scene.frame_end + 1))
    out["frames"] = frames
    out["playback"] = playback(ob, frames)
    out["trajectory"] = model_trajectory(ob, frames[-1])
    out["pc2"] = pc2.read_pc2(folder / "fit_cache" / bake.bake_filename("Cloth"))

    out["revert_result"] = bpy.ops.object.fit_to_target_revert(remove_bake=True)
    out["reverted"] = modifier_values(ob)
    out["stack_reverted"] = modifier_stack(ob)
    out["state_reverted"] = fit_state(ob)
    return out


# -- selections, and two swatches of one fabric ---------------------------------------------------------


def select(objects: list[bpy.types.Object], active: bpy.types.Object) -> None:
    for ob in bpy.context.view_layer.objects:
        ob.select_set(False)
    for ob in objects:
        ob.select_set(True)
    bpy.context.view_layer.objects.active = active


# A swatch hanging from its top edge settles: its stretch says how stiff the fabric is, but once
# at rest, not how much air slows it. The same swatch falling flat does not stretch at all: its
# fall says how much air slows it, nothing about stiffness. Together they determine both.
SWATCH_TRUTH = {"tension_stiffness": 4.0, "compression_stiffness": 4.0, "air_damping": 2.5}
SWATCH_SETTINGS = {"tension_damping": 25.0}  # the same (unfitted) setting on both
SWATCHES = ["Hanging swatch", "Falling swatch"]
SWATCH_FRAMES = {"Hanging swatch": [40, 60], "Falling swatch": [5, 10]}
SWATCH_UNDETERMINED_ALONE = {"Hanging swatch": ["air_damping"], "Falling swatch": ["tension_stiffness"]}


def swatches(folder: Path) -> Path:
    """Both swatches with targets from Blender's cloth (one hidden material), fitting tension
    (compression tied) and air damping; saved. The falling swatch's targets come early: over
    a longer fall, the deviations Blender's CG tolerance leaves (1 % of each substep's solve)
    are as large as what a 1 % change of stiffness does, and a tangent sees those."""
    n, size = 10, 1.0
    flat = grid_mesh(n, n, size, size)
    hanging = dataclasses.replace(flat)
    hanging.vertices = np.stack([flat.vertices[:, 0], np.zeros(len(flat.vertices)), flat.vertices[:, 1]], 1)
    top = hanging.vertices[:, 2] >= hanging.vertices[:, 2].max() - 1e-9
    frames = SWATCH_FRAMES
    objects = [
        make_cloth_object(
            hanging,
            name=SWATCHES[0],
            pin_weights=top.astype(float),
            settings=SWATCH_SETTINGS,
            location=(0.0, 0.0, 2.0),
            frame_end=max(frames[SWATCHES[0]]),
        ),
        make_cloth_object(
            flat,
            name=SWATCHES[1],
            pin_weights=np.zeros(len(flat.vertices)),
            settings=SWATCH_SETTINGS,
            location=(3.0, 0.0, 4.0),
            frame_end=max(frames[SWATCHES[1]]),
        ),
    ]
    for ob in objects:
        s = ob.fit_to_target
        s.fit_tension_stiffness, s.fit_bending_stiffness, s.fit_air_damping = True, False, True
        s.tie_compression = True
        add_targets_from_blender(ob, SWATCH_TRUTH, frames[ob.name])
    path = folder / "swatches.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path
