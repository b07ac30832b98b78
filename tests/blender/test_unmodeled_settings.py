"""Settings that change the cloth's motion but are not simulated are refused by name before
any fit; with the override the fit runs and each becomes a warning in the result record."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import bpy
import pytest
from addon_scenes import addon_module, clamped_cloth, prepare
from batch_run import check_refusal_report, our_errors, run_batch, tiny_scene

checks = addon_module("scene.checks")
errors = addon_module("errors")
records = addon_module("scene.records")
fit_request = addon_module("request")
coverage = addon_module("models.blender_cloth.coverage")
cloth_collisions = addon_module("models.blender_cloth.collisions")


def cloth_with_target() -> bpy.types.Object:
    """A small clamped sheet with one target (a copy of its own mesh) at frame 5."""
    ob = clamped_cloth(n=4, frame_end=8)
    target = bpy.data.objects.new("Target", ob.data.copy())
    target.matrix_world = ob.matrix_world
    bpy.context.scene.collection.objects.link(target)
    item = ob.fit_to_target.targets.add()
    item.kind, item.object, item.frame = "OBJECT", target, 5
    return ob


def cloth(ob: bpy.types.Object) -> bpy.types.ClothModifier:
    return next(m for m in ob.modifiers if m.type == "CLOTH")


def group(ob: bpy.types.Object, name: str) -> str:
    ob.vertex_groups.new(name=name).add(list(range(len(ob.data.vertices))), 0.5, "REPLACE")
    return name


def collider(
    name: str = "Ground", collection: bpy.types.Collection | None = None, single_sided: bool = False
) -> bpy.types.Object:
    """A 4 m square with a Collision modifier (Blender turns Single Sided on for a new one)."""
    me = bpy.data.meshes.new(name)
    me.from_pydata([(-2, -2, 0), (2, -2, 0), (2, 2, 0), (-2, 2, 0)], [], [[0, 1, 2, 3]])
    ob = bpy.data.objects.new(name, me)
    (collection or bpy.context.scene.collection).objects.link(ob)
    ob.modifiers.new("Collision", "COLLISION")
    ob.collision.use_culling = single_sided
    return ob


def force_field(kind: str = "WIND", name: str = "Field") -> bpy.types.Object:
    bpy.ops.object.effector_add(type=kind, location=(0.0, 0.0, 2.0))
    ob = bpy.context.object
    ob.name = name
    return ob


def loose_edge(ob: bpy.types.Object) -> None:
    me = ob.data
    me.edges.add(1)
    me.edges[-1].vertices = (0, len(me.vertices) - 1)  # opposite corners: no face has this edge
    me.update()


def rest_key(ob: bpy.types.Object) -> None:
    ob.shape_key_add(name="Basis")
    rest = ob.shape_key_add(name="Rest", from_mix=False)
    cloth(ob).settings.rest_shape_key = rest


def pinned_goal_default(ob: bpy.types.Object) -> None:
    cloth(ob).settings.goal_default = 0.5


def settings(**values) -> Callable[[bpy.types.Object], None]:
    def apply(ob: bpy.types.Object) -> None:
        for key, value in values.items():
            target, _, name = key.rpartition(".")
            owner = cloth(ob).collision_settings if target == "collision" else cloth(ob).settings
            setattr(owner, name, value)

    return apply


def group_setting(name: str) -> Callable[[bpy.types.Object], None]:
    def apply(ob: bpy.types.Object) -> None:
        setattr(cloth(ob).settings, name, group(ob, name))

    return apply


# (change to the scene, the words the refusal must contain)
REFUSED = {
    "pressure with fluid density": (settings(use_pressure=True, fluid_density=1.0), "settings.fluid_density"),
    "pressure with a pressure group": (
        lambda ob: (settings(use_pressure=True)(ob), group_setting("vertex_group_pressure")(ob)),
        "settings.vertex_group_pressure",
    ),
    "internal springs": (settings(use_internal_springs=True), "settings.use_internal_springs"),
    "sewing with linear bending": (
        lambda ob: (loose_edge(ob), settings(use_sewing_springs=True, bending_model="LINEAR")(ob)),
        "settings.use_sewing_springs",
    ),
    "rest shape key": (rest_key, "settings.rest_shape_key"),
    "goal default": (pinned_goal_default, "settings.goal_default"),
    "quality 1": (settings(quality=1), "settings.quality"),
    "wind with noise": (
        lambda ob: setattr(force_field("WIND", "Wind").field, "noise", 0.5),
        "Force Field 'Wind' (Wind) has noise 0.5 (field.noise)",
    ),
    "wind with the tube falloff": (
        lambda ob: setattr(force_field("WIND", "Wind").field, "falloff_type", "TUBE"),
        "field.falloff_type",
    ),
    "force field of line shape": (
        lambda ob: setattr(force_field("FORCE", "Push").field, "shape", "LINE"),
        "field.shape",
    ),
    "turbulence": (lambda ob: force_field("TURBULENCE", "Noise"), "effector_weights.turbulence"),
}


def refusal(ob: bpy.types.Object, **overrides) -> str | None:
    request = fit_request.request_from_object(ob, **overrides)
    try:
        checks.check_request(bpy.context.scene, ob, request, check_device=False)
    except errors.FitInputError as e:
        return str(e)
    return None


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_by_name_then_a_warning_with_the_override(case: str) -> None:
    change, words = REFUSED[case]
    ob = cloth_with_target()
    assert refusal(ob) is None
    change(ob)
    message = refusal(ob)
    assert message is not None and message.startswith("'Cloth': ") and words in message, message
    # in the panel's words: no command-line option (the batch command names its own, below)
    assert "tick Ignore Unsupported Settings" in message and "--" not in message
    assert "\n" not in message

    ob.fit_to_target.allow_unmodeled = True
    assert refusal(ob) is None
    request = fit_request.request_from_object(ob)
    prepared = prepare.prepare_fit(bpy.context.scene, ob, request)
    assert any(words in w for w in prepared.warnings), prepared.warnings
    result = SimpleNamespace(summary=lambda: {"warnings": ["from the fit"]}, cancelled=False, device="cpu")
    record = records.result_record(prepared, result)
    assert record["warnings"][-1] == "from the fit"
    assert any(words in w and w.startswith("'Cloth': ") for w in record["warnings"])


ACCEPTED = {
    "defaults": lambda ob: None,
    "gravity weight": lambda ob: setattr(cloth(ob).settings.effector_weights, "gravity", 0.5),
    # simulated: object collisions, double- and single-sided
    "collision object": lambda ob: collider(),
    "single-sided collision object": lambda ob: collider(single_sided=True),
    # simulated: self collisions
    "self collision": settings(**{"collision.use_self_collision": True}),
    "wind weight 0": lambda ob: (force_field(), setattr(cloth(ob).settings.effector_weights, "wind", 0.0)),
    "all weights 0": lambda ob: (
        force_field("FORCE"),
        setattr(cloth(ob).settings.effector_weights, "all", 0.0),
    ),
    "field outside the effector collection": lambda ob: (
        force_field(),
        setattr(cloth(ob).settings.effector_weights, "collection", bpy.data.collections.new("Empty")),
    ),
    "sewing without loose edges": settings(use_sewing_springs=True),
    # simulated: Wind and Force fields, pressure, dynamic mesh, sewing springs (angular bending)
    "wind": lambda ob: force_field("WIND", "Wind"),
    "force field": lambda ob: force_field("FORCE", "Push"),
    "pressure": settings(use_pressure=True, uniform_pressure_force=2.0),
    "dynamic mesh": settings(use_dynamic_mesh=True),
    "sewing": lambda ob: (loose_edge(ob), settings(use_sewing_springs=True)(ob)),
    "pressure group with pressure off": group_setting("vertex_group_pressure"),
    # simulated: the stiffness groups and their maxima
    "structural group": group_setting("vertex_group_structural_stiffness"),
    "shear group": group_setting("vertex_group_shear_stiffness"),
    "bending group": group_setting("vertex_group_bending"),
    # simulated: shrinking
    "shrink min": settings(shrink_min=0.2),
    "shrink max": settings(shrink_max=0.2),
    "shrink group": group_setting("vertex_group_shrink"),
    "goal default without a pin group": lambda ob: (
        setattr(cloth(ob).settings, "vertex_group_mass", ""),
        pinned_goal_default(ob),
    ),
}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_settings_that_do_not_change_the_motion_pass(case: str) -> None:
    ob = cloth_with_target()
    ACCEPTED[case](ob)
    assert refusal(ob) is None


@pytest.mark.parametrize(("quality", "warned"), [(2, True), (3, True), (4, False), (5, False)])
def test_few_quality_steps_are_fitted_with_a_caution(quality: int, warned: bool) -> None:
    """Quality 2 and 3 are simulated, but Blender's own result there moves 0.1-0.3 % of the
    motion for a one-in-a-million change of an input: the result record says so."""
    ob = cloth_with_target()
    cloth(ob).settings.quality = quality
    assert refusal(ob) is None
    prepared = prepare.prepare_fit(bpy.context.scene, ob, fit_request.request_from_object(ob))
    caution = [w for w in prepared.warnings if "Quality Steps (settings.quality)" in w]
    if warned:
        assert caution == [caution[0]] and caution[0].startswith(
            f"'Cloth': Quality Steps (settings.quality) is {quality}:"
        )
        assert "replay" in caution[0] and "5 or more" in caution[0]
    else:
        assert caution == []


def test_the_collision_collection_decides() -> None:
    ob = cloth_with_target()
    colliders = bpy.data.collections.new("Colliders")
    collider("Floor", colliders)
    collider("Wall")
    scene = bpy.context.scene
    names = [o.name for o in cloth_collisions.collision_objects(scene, ob, cloth(ob))]
    assert names == ["Wall"]  # Floor's collection is not linked to the scene
    cloth(ob).collision_settings.collection = colliders
    names = [o.name for o in cloth_collisions.collision_objects(scene, ob, cloth(ob))]
    assert names == ["Floor"]
    assert refusal(ob) is None


def test_every_blender_setting_is_decided() -> None:
    """A property Blender adds must be sorted into simulated, refused or irrelevant."""
    for struct in ("ClothSettings", "ClothCollisionSettings", "EffectorWeights", "CollisionSettings"):
        props = {p.identifier for p in getattr(bpy.types, struct).bl_rna.properties} - {"rna_type"}
        lists = (
            set(coverage.SIMULATED[struct]),
            set(coverage.REFUSED[struct]),
            set(coverage.IRRELEVANT[struct]),
        )
        for name in props:
            assert sum(name in listed for listed in lists) == 1, (
                f"{struct}.{name} is in {sum(name in s for s in lists)} lists"
            )
        assert set().union(*lists) <= props, f"{struct}: not in Blender: {set().union(*lists) - props}"
        assert all(reason and " " not in reason for reason in coverage.IRRELEVANT[struct].values())


def test_batch_refuses_then_fits_with_allow_unmodeled(tmp_path: Path) -> None:
    scene = tiny_scene(tmp_path / "noise.blend")
    # still refused: the weight, not the strength, decides
    force_field("TURBULENCE", "Noise").field.strength = 0.0
    bpy.ops.wm.save_as_mainfile(filepath=str(scene))

    proc = run_batch(scene, "--report", tmp_path / "refused.json", "--quiet", timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = our_errors(proc.stderr)
    assert len(lines) == 1 and "Force Field 'Noise'" in lines[0] and "--allow-unmodeled" in lines[0], (
        proc.stderr
    )
    check_refusal_report(tmp_path / "refused.json", lines[0])  # the report names the refusal

    proc = run_batch(scene, "--report", tmp_path / "report.json", "--quiet", "--allow-unmodeled", timeout=300)
    assert proc.returncode in (0, 4), proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    (entry,) = report["objects"]
    assert any("Force Field 'Noise'" in w for w in entry["warnings"]), entry["warnings"]
