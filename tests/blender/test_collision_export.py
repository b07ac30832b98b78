"""Object collisions as the add-on reads them: the Collision objects Blender's cloth meets, in
its order, their world-space meshes at every frame, their settings and the cloth's, against
bpy read directly; Blender's own cloth really colliding in each scene of
``collision_scenes``; and what the input check still refuses (self collision, Single Sided).
"""

from __future__ import annotations

import math

import bpy
import numpy as np
import pytest
from addon_scenes import addon_module, prepare
from collision_scenes import FRAMES, SCENES, export_problem_inputs, run_blender_cloth, sheet_on_cube
from mathutils import Vector
from mathutils.bvhtree import BVHTree

checks = addon_module("scene.checks")
errors = addon_module("errors")
fit_request = addon_module("request")
collisions = addon_module("models.blender_cloth.collisions")
registry = addon_module("models.registry")

COLLIDER = {
    "sheet_lands_on_cube": "Cube",
    "sheet_on_cube": "Cube",
    "drop_on_sphere": "Sphere",
    "drape_on_sphere": "Sphere",
    "moving_plane": "Plane",
    "deforming_collider": "Ground",
    "pinned_over_sphere": "Sphere",
    "deforming_collider_quality_1": "Ground",
}


def cloth_modifier(ob: bpy.types.Object) -> bpy.types.ClothModifier:
    return next(m for m in ob.modifiers if m.type == "CLOTH")


def bpy_world_mesh(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(world positions, loop triangles) of the object's evaluated mesh, read with mathutils."""
    o_eval = bpy.data.objects[name].evaluated_get(bpy.context.evaluated_depsgraph_get())
    me = o_eval.data
    positions = np.array([tuple(o_eval.matrix_world @ v.co) for v in me.vertices])
    return positions, np.array([tuple(t.vertices) for t in me.loop_triangles])


def signed_distances(positions: np.ndarray, triangles: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Each point's distance to the surface, negative behind the nearest face (inside a
    closed collider, below a plane facing up)."""
    tree = BVHTree.FromPolygons([tuple(p) for p in positions], triangles.tolist())
    out = []
    for p in points:
        location, normal, _, _ = tree.find_nearest(Vector(p))
        out.append((Vector(p) - location).dot(normal))
    return np.array(out)


def deepest(collider, positions: np.ndarray) -> float:
    """The cloth's deepest vertex behind the collider's surface over all frames (positive: in front)."""
    return min(
        float(signed_distances(collider.at_frame(k), collider.triangles, x).min())
        for k, x in enumerate(positions)
    )


def unmodeled(scene: bpy.types.Scene, ob: bpy.types.Object) -> list[str]:
    return registry.scene_model("blender_cloth").unmodeled_settings(scene, ob, cloth_modifier(ob))


def add_target(ob: bpy.types.Object, frame: int) -> None:
    target = bpy.data.objects.new("Target", ob.data.copy())
    target.matrix_world = ob.matrix_world
    bpy.context.scene.collection.objects.link(target)
    item = ob.fit_to_target.targets.add()
    item.kind, item.object, item.frame = "OBJECT", target, frame


@pytest.mark.parametrize("name", sorted(SCENES))
def test_colliders_are_the_scene_meshes(name: str) -> None:
    """Every frame's collider positions are the evaluated mesh's in world space, its
    triangles its loop triangles, its settings its Collision modifier's."""
    scene, ob = SCENES[name]()
    mesh, params, goals = export_problem_inputs(scene, ob)
    assert goals.shape == (FRAMES, mesh.vertex_count, 3)
    (collider,) = params.colliders
    assert collider.name == COLLIDER[name]
    moving = name in ("moving_plane", "deforming_collider", "deforming_collider_quality_1")
    # a collider standing still is one sample; a moving one one per frame
    assert len(collider.positions) == (FRAMES if moving else 1)
    for k in (0, 1, 29, FRAMES - 1):
        scene.frame_set(1 + k)
        positions, tris = bpy_world_mesh(collider.name)
        np.testing.assert_allclose(collider.at_frame(k), positions, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(collider.triangles, tris)
    if moving:
        assert np.abs(collider.positions[-1] - collider.positions[0]).max() > 0.29
    s = bpy.data.objects[collider.name].collision
    assert collider.thickness_outer == pytest.approx(s.thickness_outer) == pytest.approx(0.02)
    assert collider.friction == pytest.approx(s.cloth_friction) == pytest.approx(5.0)
    assert (collider.use_culling, collider.use_normal) == (True, False)  # Blender's defaults
    c = cloth_modifier(ob).collision_settings
    assert params.distance_min == pytest.approx(c.distance_min)
    quality = 1 if name.endswith("quality_1") else 2  # Blender's default 2
    assert (params.impulse_clamp, params.collision_quality, params.collision_excluded) == (0.0, quality, ())
    params.validate()


@pytest.mark.parametrize("name", sorted(SCENES))
def test_blender_cloth_collides(name: str) -> None:
    """Blender's cloth stays in front of the collider in every frame (measured: 5 mm at the
    cube's edge on impact, 26 to 32 mm elsewhere), and goes through it without the Collision
    modifier."""
    scene, ob = SCENES[name]()
    _, params, _ = export_problem_inputs(scene, ob)
    (collider,) = params.colliders
    assert deepest(collider, run_blender_cloth(scene, ob)) > 0.0

    scene, ob = SCENES[name]()
    o = bpy.data.objects[collider.name]
    o.modifiers.remove(o.modifiers["Collision"])
    assert export_problem_inputs(scene, ob)[1].colliders == ()
    assert deepest(collider, run_blender_cloth(scene, ob)) < -0.2


def test_reading_leaves_blender_cloth_as_it_was() -> None:
    """The goal pass switches the cloth modifier off and steps through the frames; it is
    switched on again at the caller's frame. Switched on at the pass's last frame, the cloth
    would start there as after a jump of the timeline, and Blender's next run from the cache
    start would differ (measured: through the cube, 2.65 m below it at frame 30)."""
    scene, ob = sheet_on_cube()
    before = run_blender_cloth(scene, ob)
    scene.frame_set(1)
    export_problem_inputs(scene, ob)
    np.testing.assert_array_equal(run_blender_cloth(scene, ob), before)


@pytest.mark.parametrize("name", sorted(SCENES))
def test_nothing_refused_in_the_collision_scenes(name: str) -> None:
    scene, ob = SCENES[name]()
    assert unmodeled(scene, ob) == []


def test_collision_settings_are_carried() -> None:
    """The collider's thickness, friction and Override Normals, the cloth's distance, impulse
    clamp, quality and object-collision group (vertices of weight > 0 in it)."""
    scene, ob = sheet_on_cube()
    cube = bpy.data.objects["Cube"]
    cube.collision.thickness_outer = 0.035
    cube.collision.cloth_friction = 12.0
    cube.collision.use_normal = True
    c = cloth_modifier(ob).collision_settings
    c.distance_min, c.impulse_clamp, c.collision_quality = 0.025, 3.0, 4
    group = ob.vertex_groups.new(name="No Collisions")
    group.add([0, 1, 2, 13], 1.0, "REPLACE")
    group.add([5], 0.25, "REPLACE")
    group.add([7], 0.0, "REPLACE")  # in the group at weight 0: collides
    c.vertex_group_object_collisions = "No Collisions"

    _, params, _ = export_problem_inputs(scene, ob)
    (collider,) = params.colliders
    assert collider.thickness_outer == pytest.approx(0.035)
    assert collider.friction == pytest.approx(12.0)
    assert collider.use_normal is True
    assert params.distance_min == pytest.approx(0.025)
    assert params.impulse_clamp == pytest.approx(3.0)
    assert params.collision_quality == 4
    assert params.collision_excluded == (0, 1, 2, 5, 13)

    c.use_collision = False
    _, params, _ = export_problem_inputs(scene, ob)
    assert params.colliders == ()


def test_prepare_fit_samples_the_colliders_up_to_the_last_target() -> None:
    scene, ob = SCENES["moving_plane"]()
    add_target(ob, 30)
    prepared = prepare.prepare_fit(scene, ob, fit_request.request_from_object(ob))
    _, params, goals = export_problem_inputs(scene, ob, frames=30)
    problem = prepared.problem
    assert problem.goals.shape == goals.shape
    (ours,) = problem.model_settings.colliders
    (expected,) = params.colliders
    assert ours.positions.shape == (30, 4, 3)
    np.testing.assert_array_equal(ours.positions, expected.positions)
    np.testing.assert_array_equal(ours.triangles, expected.triangles)
    assert prepared.warnings == []


def test_self_collision_and_single_sided_colliders_are_simulated_and_exported() -> None:
    """Self Collisions are read with the cloth's other collision settings (its group's
    vertices, weight > 0, collide with no part of the cloth), not refused."""
    scene, ob = sheet_on_cube()
    cube = bpy.data.objects["Cube"]
    assert cube.collision.use_culling  # Blender's default for a new Collision modifier
    assert unmodeled(scene, ob) == []
    cube.collision.use_culling = False
    assert unmodeled(scene, ob) == []
    cs = cloth_modifier(ob).collision_settings
    cs.use_self_collision = True
    cs.self_distance_min, cs.self_friction, cs.self_impulse_clamp = 0.02, 3.0, 0.5
    edge = ob.vertex_groups.new(name="Edge")
    edge.add([0, 1, 2], 1.0, "REPLACE")
    edge.add([3], 0.0, "REPLACE")  # a member at weight 0 collides
    cs.vertex_group_self_collisions = "Edge"
    assert unmodeled(scene, ob) == []
    _, params, _ = export_problem_inputs(scene, ob)
    assert params.use_self_collision and params.self_collision_excluded == (0, 1, 2)
    assert (params.self_distance_min, params.self_friction) == pytest.approx((0.02, 3.0))
    assert params.self_impulse_clamp == pytest.approx(0.5)
    add_target(ob, 10)
    checks.check_request(scene, ob, fit_request.request_from_object(ob), check_device=False)


def _into_collection(
    o: bpy.types.Object, name: str, parent: bpy.types.Collection | None
) -> bpy.types.Collection:
    c = bpy.data.collections.new(name)
    if parent is not None:
        parent.children.link(c)
    for owner in list(o.users_collection):
        owner.objects.unlink(o)
    c.objects.link(o)
    return c


def _variant(variant: str) -> tuple[bpy.types.Scene, bpy.types.Object]:
    scene, ob = sheet_on_cube()
    cube = bpy.data.objects["Cube"]
    settings = cloth_modifier(ob).collision_settings
    master = scene.collection
    if variant == "Collision modifier off":
        cube.modifiers["Collision"].show_viewport = False
    elif variant == "collision.use off":
        cube.collision.use = False
    elif variant == "object disabled in viewports":
        cube.hide_viewport = True
    elif variant == "object hidden":
        cube.hide_set(True)
    elif variant == "collection disabled in viewports":
        _into_collection(cube, "C", master).hide_viewport = True
    elif variant == "collection excluded":
        _into_collection(cube, "C", master)
        bpy.context.view_layer.layer_collection.children["C"].exclude = True
    elif variant == "collection hidden":
        _into_collection(cube, "C", master)
        bpy.context.view_layer.layer_collection.children["C"].hide_viewport = True
    elif variant.startswith("collision collection"):
        linked = variant != "collision collection not in the scene"
        settings.collection = _into_collection(cube, "C", master if linked else None)
        if variant == "collision collection, object disabled in viewports":
            cube.hide_viewport = True
        elif variant == "collision collection, excluded":
            bpy.context.view_layer.layer_collection.children["C"].exclude = True
        elif variant == "collision collection, child disabled in viewports":
            settings.collection = bpy.data.collections.new("Parent")
            master.children.unlink(bpy.data.collections["C"])
            settings.collection.children.link(bpy.data.collections["C"])
            bpy.data.collections["C"].hide_viewport = True
    elif variant == "collider only in an instanced collection":
        c = _into_collection(cube, "Instanced", None)
        instancer = bpy.data.objects.new("Instancer", None)
        instancer.instance_type, instancer.instance_collection = "COLLECTION", c
        instancer.location = (3.0, 0.0, 0.0)  # Blender ignores the instance transform
        master.objects.link(instancer)
    elif variant == "cloth collisions off":
        settings.use_collision = False
    return scene, ob


VARIANTS = {
    "plain": True,
    "Collision modifier off": False,
    "collision.use off": False,
    "object disabled in viewports": False,
    "object hidden": True,
    "collection disabled in viewports": False,
    "collection excluded": False,
    "collection hidden": True,
    "collision collection": True,
    "collision collection not in the scene": True,
    "collision collection, object disabled in viewports": True,
    "collision collection, excluded": True,
    "collision collection, child disabled in viewports": False,
    "collider only in an instanced collection": True,
    "cloth collisions off": False,
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_colliders_are_those_blender_collides_with(variant: str) -> None:
    """Which objects count follows Blender (its base flags), measured by whether its cloth
    stops on the cube: the found colliders and their meshes follow."""
    scene, ob = _variant(variant)
    found = [o.name for o in collisions.collision_objects(scene, ob, cloth_modifier(ob))]
    blender = run_blender_cloth(scene, ob, 20)
    over_cube = np.all(np.abs(blender[0][:, :2]) < 0.25, axis=1)
    stopped = bool(blender[-1][over_cube, 2].min() > 0.3)
    assert stopped == VARIANTS[variant]
    assert found == (["Cube"] if stopped else [])
    _, params, _ = export_problem_inputs(scene, ob, frames=3)
    assert [c.name for c in params.colliders] == found
    if found:
        assert params.colliders[0].positions[0][:, 2].max() == pytest.approx(0.3)


def test_colliders_keep_blender_order() -> None:
    """The view layer's base order (not names), then the collision collection's own objects
    before its children's."""
    scene, ob = sheet_on_cube()
    for name, z in (("Zeta", -1.0), ("Alpha", -2.0)):
        bpy.ops.mesh.primitive_plane_add(size=4.0, location=(0.0, 0.0, z))
        bpy.context.object.name = name
        bpy.context.object.modifiers.new("Collision", "COLLISION")
    mod = cloth_modifier(ob)
    assert [o.name for o in collisions.collision_objects(scene, ob, mod)] == ["Cube", "Zeta", "Alpha"]
    parent = bpy.data.collections.new("Colliders")
    child = bpy.data.collections.new("More")
    parent.children.link(child)
    child.objects.link(bpy.data.objects["Alpha"])
    parent.objects.link(bpy.data.objects["Zeta"])
    mod.collision_settings.collection = parent
    assert [o.name for o in collisions.collision_objects(scene, ob, mod)] == ["Zeta", "Alpha"]


def test_modifiers_after_the_collision_modifier_do_not_collide() -> None:
    """The Collision modifier keeps the mesh at its place in the stack: a Displace after it
    moves the cube's drawing, not what the cloth meets (Blender's cloth rests on the 0.3 m
    top, not the displaced 0.6 m one). The Displace is on again after the export."""
    scene, ob = sheet_on_cube()
    cube = bpy.data.objects["Cube"]
    displace = cube.modifiers.new("Displace", "DISPLACE")
    displace.strength, displace.mid_level, displace.direction = 0.3, 0.0, "Z"
    _, params, _ = export_problem_inputs(scene, ob)
    assert displace.show_viewport
    assert params.colliders[0].positions[0][:, 2].max() == pytest.approx(0.3)
    assert bpy_world_mesh("Cube")[0][:, 2].max() == pytest.approx(0.6)
    blender = run_blender_cloth(scene, ob)
    assert 0.3 < blender[-1][:, 2].max() < 0.36


def test_a_collider_changing_its_vertex_count_is_refused() -> None:
    scene, ob = sheet_on_cube()
    cube = bpy.data.objects["Cube"]
    subdivision = cube.modifiers.new("Subdivision", "SUBSURF")
    cube.modifiers.move(cube.modifiers.find("Subdivision"), 0)  # before the Collision modifier
    subdivision.levels = 0
    subdivision.keyframe_insert("levels", frame=1)
    subdivision.levels = 1
    subdivision.keyframe_insert("levels", frame=5)
    scene.frame_set(1)
    add_target(ob, 10)
    with pytest.raises(errors.FitInputError) as raised:
        prepare.prepare_fit(scene, ob, fit_request.request_from_object(ob))
    message = str(raised.value)
    assert "Collision object 'Cube' changes its vertex count" in message and "\n" not in message
    assert math.isclose(scene.frame_current, 1)
