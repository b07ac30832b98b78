"""The fit's export as stepped work (``scene/steps.py``): run a frame at a time by the modal
runner it gives the very same PreparedFit as the blocking export, and closed halfway (Esc)
it leaves the scene's frame, subframe and modifier flags exactly as they were."""

from __future__ import annotations

import dataclasses
import math

import bpy
import numpy as np
import pytest
from addon_scenes import add_target_meshes, addon_module, clamped_cloth, fit_request, prepare
from blender_ref import world_positions
from soft_body_scenes import add_targets, soft_object

steps = addon_module("scene.steps")

CACHE_END = 20


def cloth_scene() -> bpy.types.Object:
    """A clamped 5 x 5 sheet moving up over frames 1-20 (its goals change every frame), a
    Subdivision modifier below its cloth, a Collision cube below it with a Bevel after its
    Collision modifier (both switched off while frames are read), and targets at 8 and 16."""
    ob = clamped_cloth(n=5, frame_end=CACHE_END)
    bpy.context.scene.frame_set(1)
    rest = world_positions(ob)
    sag = np.stack([rest - [0.0, 0.0, 0.002 * k] for k in range(CACHE_END)])
    add_target_meshes(ob, sag, [8, 16], start=1)
    ob.modifiers.new("Subdivision", "SUBSURF")
    rise(ob, 1, CACHE_END)
    bpy.ops.mesh.primitive_cube_add(size=0.4, location=(0.0, 0.0, 0.4))
    cube = bpy.context.active_object
    cube.name = "Block"
    cube.modifiers.new("Collision", "COLLISION")
    cube.modifiers.new("Bevel", "BEVEL")
    bpy.context.view_layer.objects.active = ob
    return ob


def soft_body_scene() -> bpy.types.Object:
    """A soft cube (Goal off) moving up over frames 1-12, a target at 6."""
    ob = soft_object(cells=2, frame_end=12)
    bpy.context.scene.frame_set(1)
    rest = world_positions(ob)
    add_targets(ob, np.stack([rest - [0.0, 0.0, 0.01 * k] for k in range(12)]), [6])
    rise(ob, 1, 12)
    bpy.context.view_layer.objects.active = ob
    return ob


def rise(ob: bpy.types.Object, first: int, last: int) -> None:
    """Keyframes moving ``ob`` 0.3 m up from ``first`` to ``last``: its goals change every frame."""
    z = ob.location.z
    for frame, height in ((first, z), (last, z + 0.3)):
        ob.location.z = height
        ob.keyframe_insert("location", index=2, frame=frame)
    bpy.context.scene.frame_set(first)


SCENES = {"cloth": cloth_scene, "soft_body": soft_body_scene}


def differences(a, b, where: str = "prepared") -> list[str]:
    """Where ``a`` and ``b`` differ, bit for bit (arrays: dtype, shape and every value)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        same = a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
        return [] if same else [where]
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        if type(a) is not type(b):
            return [where]
        return [
            d
            for f in dataclasses.fields(a)
            for d in differences(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
        ]
    if isinstance(a, dict):
        if not isinstance(b, dict) or a.keys() != b.keys():
            return [where]
        return [d for k in a for d in differences(a[k], b[k], f"{where}[{k!r}]")]
    if isinstance(a, list | tuple):
        if type(a) is not type(b) or len(a) != len(b):
            return [where]
        pairs = enumerate(zip(a, b, strict=True))
        return [d for k, (x, y) in pairs for d in differences(x, y, f"{where}[{k}]")]
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return []
    if hasattr(a, "__dict__") and not callable(a) and type(a).__module__ != "builtins":
        return differences(vars(a), vars(b), where) if type(a) is type(b) else [where]
    return [] if a == b else [where]


def modifier_flags() -> dict[tuple[str, str], tuple[bool, bool]]:
    return {(o.name, m.name): (m.show_viewport, m.show_render) for o in bpy.data.objects for m in o.modifiers}


@pytest.mark.parametrize("kind", sorted(SCENES))
def test_stepped_export_is_the_blocking_export(kind: str) -> None:
    ob = SCENES[kind]()
    scene = bpy.context.scene
    blocking = prepare.prepare_fit(scene, ob, fit_request.request_from_object(ob))
    frames = len(blocking.problem.goals)
    assert frames == max(t.frame for t in ob.fit_to_target.targets)  # from the cache start, frame 1

    run = steps.SteppedRun(prepare.prepare_fit_steps(scene, ob, fit_request.request_from_object(ob)))
    factors, texts, calls = [], [], 0
    while not run.finished:
        run.advance(0.0)  # one step (a frame) per call, as a modal operator's slowest slices
        calls += 1
        factors.append(run.factor)
        texts.append(run.text)
    assert run.error is None and not run.cancelled
    assert calls == frames + 1  # a step per frame, and the one that returns the result
    assert factors == sorted(factors) and factors[0] == pytest.approx(1.0 / frames) and factors[-1] == 1.0
    assert texts[:frames] == [f"frame {f} of {frames}" for f in range(1, frames + 1)]

    stepped = run.value
    assert differences(stepped, blocking) == []
    # the comparison sees a single bit: the last goal's last coordinate, one float64 step up
    goals = blocking.problem.goals.copy()
    goals[-1, -1, -1] = np.nextafter(goals[-1, -1, -1], np.inf)
    nudged = dataclasses.replace(blocking, problem=dataclasses.replace(blocking.problem, goals=goals))
    assert differences(stepped, nudged) == ["prepared.problem.goals"]
    assert stepped.problem.goals.shape[0] == frames and np.ptp(stepped.problem.goals[:, 0, 2]) > 0.0
    if kind == "cloth":  # the collider was read on every frame, in the same pass
        assert len(stepped.problem.model_settings.colliders) == 1


def test_a_cancelled_export_leaves_the_scene_as_it_was() -> None:
    ob = cloth_scene()
    scene = bpy.context.scene
    cloth = ob.modifiers["Cloth"]
    cloth.show_render = False  # not the default: the cancel restores what was there
    scene.frame_set(7, subframe=0.25)
    flags = modifier_flags()

    run = steps.SteppedRun(prepare.prepare_fit_steps(scene, ob, fit_request.request_from_object(ob)))
    for _ in range(3):
        run.advance(0.0)
    # halfway: the scene sits at the third frame with the cloth and what follows it switched off
    assert run.text == f"frame 3 of {16}" and scene.frame_current == 3
    assert modifier_flags() != flags and not cloth.show_viewport
    assert not bpy.data.objects["Block"].modifiers["Bevel"].show_viewport

    run.cancel()
    assert run.finished and run.cancelled and run.value is None and run.error is None
    assert (scene.frame_current, scene.frame_subframe) == (7, pytest.approx(0.25))
    assert modifier_flags() == flags
    run.advance(1.0)  # nothing more runs once cancelled
    assert (scene.frame_current, modifier_flags()) == (7, flags)


def test_runners_send_off_thread_results_and_errors_back() -> None:
    """An off-thread request's value comes back at its ``yield``, its exception is raised
    there; the blocking runner and the stepped one (a real thread) agree."""

    def work():
        total = 0
        for k in range(3):
            total += k
            yield steps.Step(k + 1, 4, f"part {k + 1}")
        doubled = yield steps.OffMainThread(lambda: 2 * total, "doubling")
        try:
            yield steps.OffMainThread(lambda: 1 / 0, "failing")
        except ZeroDivisionError:
            doubled += 1
        return doubled

    assert steps.run_blocking(work()) == 7
    run = steps.SteppedRun(work())
    seen = []
    while not run.finished:
        run.advance(0.0)
        seen.append((run.text, run.off_main_thread))
        run.wait_for_thread(60.0)
    assert run.value == 7 and run.error is None
    assert ("doubling", True) in seen and ("failing", True) in seen and seen[0] == ("part 1", False)
