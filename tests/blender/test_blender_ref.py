"""Export of scene data through ``addon.models.blender_cloth.scene_model``, and the Blender
reference helpers."""

from __future__ import annotations

import bpy
import numpy as np
import pytest
from blender_ref import (
    ClothMesh,
    cloth_scene,
    corner_pin_weights,
    export_from_blender,
    grid_mesh,
    make_cloth_object,
    pin_row_weights,
    run_blender_cloth,
    set_linear_interpolation,
)


def _edge_set(edges: np.ndarray) -> set[tuple[int, int]]:
    return {(int(min(a, b)), int(max(a, b))) for a, b in edges}


def _modifier_flags(ob: bpy.types.Object) -> list[tuple[bool, bool]]:
    return [(m.show_viewport, m.show_render) for m in ob.modifiers]


# -- helpers ---------------------------------------------------------------------------


def test_pin_weight_helpers() -> None:
    mesh = grid_mesh(4, 3)
    top = pin_row_weights(mesh)
    assert np.flatnonzero(top).tolist() == [8, 9, 10, 11]
    assert np.flatnonzero(pin_row_weights(mesh, rows=2, side="-y")).tolist() == list(range(8))
    assert np.flatnonzero(pin_row_weights(mesh, side="+x")).tolist() == [3, 7, 11]
    assert np.flatnonzero(corner_pin_weights(mesh)).tolist() == [0, 3, 8, 11]
    with pytest.raises(ValueError):
        pin_row_weights(mesh, side="z")


def test_make_cloth_object_keeps_order_and_loose_edges() -> None:
    mesh = grid_mesh(3, 3)
    # one loose edge (a sewing spring in Blender) on top of the grid
    edges = np.vstack([mesh.edges, [[0, 8]]])
    with_loose = ClothMesh(mesh.vertices, mesh.polygon_vertices, mesh.polygon_offsets, edges)
    ob = make_cloth_object(with_loose, settings={"quality": 3}, frame_end=40)
    me = ob.data
    assert [tuple(p.vertices) for p in me.polygons] == [tuple(p) for p in mesh.polygons()]
    assert _edge_set(np.array([tuple(e.vertices) for e in me.edges])) == _edge_set(with_loose.edges)
    mod = cloth_scene.find_cloth_modifier(ob)
    assert mod.settings.quality == 3 and mod.settings.vertex_group_mass == ""
    assert cloth_scene.cache_frame_range(mod) == (1, 40)
    assert "pin" not in ob.vertex_groups
    with pytest.raises(AttributeError):
        make_cloth_object(mesh, name="Bad", settings={"no_such_field": 1.0})


# -- (a) round trip --------------------------------------------------------------------


SETTINGS = {
    "tension_stiffness": 21.5,
    "compression_stiffness": 12.25,
    "shear_stiffness": 3.5,
    "bending_stiffness": 0.75,
    "tension_damping": 4.0,
    "compression_damping": 6.5,
    "shear_damping": 2.5,
    "bending_damping": 0.125,
    "air_damping": 2.0,
    "mass": 0.4,
    "pin_stiffness": 2.5,
    "goal_friction": 1.5,
    "quality": 7,
    "time_scale": 0.8,
    "bending_model": "LINEAR",
}


def test_round_trip_grid() -> None:
    mesh = grid_mesh(10, 10, 1.0, 1.0)
    weights = pin_row_weights(mesh)
    weights[[0, 5, 12]] = [0.25, 0.5, 0.75]
    ob = make_cloth_object(
        mesh, pin_weights=weights, settings=SETTINGS, location=(1.0, -2.0, 3.0), frame_end=60
    )
    ob.rotation_euler = (0.0, 0.0, np.pi / 2)
    ob.scale = (2.0, 2.0, 2.0)
    bpy.context.scene.gravity = (0.5, 0.0, -9.0)
    ob.modifiers["Cloth"].settings.effector_weights.gravity = 0.5

    flags = _modifier_flags(ob)
    exported, params = export_from_blender(ob)
    assert _modifier_flags(ob) == flags

    rot = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    expected = 2.0 * mesh.vertices @ rot.T + np.array([1.0, -2.0, 3.0])
    np.testing.assert_allclose(exported.vertices, expected, rtol=0, atol=1e-7)
    np.testing.assert_array_equal(exported.polygon_vertices, mesh.polygon_vertices)
    np.testing.assert_array_equal(exported.polygon_offsets, mesh.polygon_offsets)
    assert exported.edges.shape == mesh.edges.shape
    assert _edge_set(exported.edges) == _edge_set(mesh.edges)
    # edges in Blender's own order, read independently of foreach_get
    assert exported.edges.tolist() == [list(e.vertices) for e in ob.data.edges]
    np.testing.assert_array_equal(exported.pin_weights, weights)

    for name, value in SETTINGS.items():
        got = getattr(params, name)
        if isinstance(value, str):
            assert got == value, name
        else:
            assert got == pytest.approx(value, rel=1e-6), name
    assert isinstance(params.quality, int)
    assert params.gravity == pytest.approx((0.25, 0.0, -4.5), rel=1e-6)
    params.validate()

    bpy.context.scene.use_gravity = False
    params = cloth_scene.export_cloth_params(ob.modifiers["Cloth"], bpy.context.scene)
    assert params.gravity == (0.0, 0.0, 0.0)


def test_defaults_match_blender() -> None:
    """ClothParams defaults are Blender's defaults for a fresh cloth modifier."""
    ob = make_cloth_object(grid_mesh(3, 3))
    params = cloth_scene.export_cloth_params(cloth_scene.find_cloth_modifier(ob), bpy.context.scene)
    for name, value in vars(type(params)()).items():
        got = getattr(params, name)
        if isinstance(value, str | int):
            assert got == value, name
        else:
            assert got == pytest.approx(value, rel=1e-6), name
    assert cloth_scene.cache_frame_range(cloth_scene.find_cloth_modifier(ob)) == (1, 250)


def test_export_takes_cloth_input_not_stack_output() -> None:
    """Modifiers above the cloth shape the exported mesh, those below do not."""
    mesh = grid_mesh(5, 5)
    ob = make_cloth_object(mesh, pin_weights=pin_row_weights(mesh))
    cloth = ob.modifiers["Cloth"]
    displace = ob.modifiers.new("Displace", "DISPLACE")  # no texture: (1 - 0.5) * strength
    displace.strength = 0.4
    displace.direction = "Z"
    ob.modifiers.move(ob.modifiers.find("Displace"), 0)
    subsurf = ob.modifiers.new("Subdivision", "SUBSURF")
    ob.modifiers.new("Hidden", "SUBSURF").show_viewport = False
    assert [m.name for m in ob.modifiers] == ["Displace", "Cloth", "Subdivision", "Hidden"]
    flags = _modifier_flags(ob)

    exported, _ = export_from_blender(ob)
    assert _modifier_flags(ob) == flags
    assert exported.vertex_count == 25
    np.testing.assert_allclose(exported.vertices, mesh.vertices + [0.0, 0.0, 0.2], atol=1e-7)
    np.testing.assert_array_equal(exported.pin_weights, pin_row_weights(mesh))
    # the stack works again afterwards: subdivided cloth output
    assert len(ob.evaluated_get(bpy.context.evaluated_depsgraph_get()).data.vertices) > 25
    assert cloth.show_viewport and subsurf.show_viewport


# -- (b) units: free fall against the analytic backward-Euler recursion ----------------


def _substeps_per_frame(quality: int, time_scale: float) -> tuple[int, float]:
    """Blender's ``while (step < time_scale) step += dt`` loop, in float32."""
    dt = np.float32(np.float32(1.0) / np.float32(quality)) * np.float32(time_scale)
    step, n = np.float32(0.0), 0
    while step < np.float32(time_scale):
        step = np.float32(step + dt)
        n += 1
    return n, float(dt)


def _free_fall_z(frames: int, substeps: int, h: float, air: float, mass: float, g: float) -> np.ndarray:
    """Displacement z(t) - z(0) of a spring-free point mass, one linearized backward-Euler
    step per substep: (m + h c) dv = h (m g' - c v), c = 0.01 air, g' = 0.001 g."""
    c, gp = 0.01 * air, 0.001 * g
    z, v, out = 0.0, 0.0, [0.0]
    for _ in range(frames):
        for _ in range(substeps):
            v += h * (mass * gp - c * v) / (mass + h * c)
            z += h * v
        out.append(z)
    return np.array(out)


@pytest.mark.parametrize(
    "quality, time_scale, air, mass",
    [(5, 1.0, 1.0, 0.3), (12, 1.0, 1.0, 0.3), (4, 0.5, 5.0, 1.0)],
)
def test_free_fall_units(quality: int, time_scale: float, air: float, mass: float) -> None:
    """A free quad keeps every spring at rest, so Blender's solver reduces to the point-mass
    recursion: time is in frames, h = time_scale / quality, gravity is scaled by 0.001."""
    settings = {"quality": quality, "time_scale": time_scale, "air_damping": air, "mass": mass}
    ob = make_cloth_object(grid_mesh(2, 2), settings=settings, frame_end=31)
    g = float(bpy.context.scene.gravity[2])
    assert g == pytest.approx(-9.81)
    traj = run_blender_cloth(ob, 31)
    assert traj.shape == (31, 4, 3)

    expected = _free_fall_z(30, *_substeps_per_frame(quality, time_scale), air, mass, g)
    dz = traj[:, :, 2] - traj[0, :, 2]
    scale = np.abs(expected).max()
    assert scale > 0.5  # it really fell
    np.testing.assert_allclose(dz, np.repeat(expected[:, None], 4, axis=1), rtol=0, atol=1e-5 * scale)
    np.testing.assert_allclose(traj[:, :, :2] - traj[:1, :, :2], 0.0, atol=1e-6)


def test_free_fall_quality_12_runs_13_substeps() -> None:
    """Blender's float32 step loop runs one extra substep at quality 12 (time runs fast):
    the nominal 12-substep recursion misses Blender's result by far."""
    assert _substeps_per_frame(12, 1.0)[0] == 13
    assert _substeps_per_frame(5, 1.0)[0] == 5
    ob = make_cloth_object(grid_mesh(2, 2), settings={"quality": 12}, frame_end=31)
    dz = run_blender_cloth(ob, 31)[:, 0, 2]
    nominal = _free_fall_z(30, 12, 1.0 / 12, 1.0, 0.3, -9.81)
    assert np.abs(dz - dz[0] - nominal).max() > 0.1


# -- (c) pin goals follow the animation ------------------------------------------------


def test_pin_goals_follow_keyframes() -> None:
    mesh = grid_mesh(3, 3)
    weights = np.zeros(mesh.vertex_count)
    weights[8] = 1.0
    ob = make_cloth_object(mesh, pin_weights=weights, frame_end=30)
    scene = bpy.context.scene
    start, end = np.array([0.0, 0.0, 0.0]), np.array([2.0, -1.0, 3.0])
    ob.location = start
    ob.keyframe_insert("location", frame=1)
    ob.location = end
    ob.keyframe_insert("location", frame=20)
    set_linear_interpolation(ob)
    scene.frame_set(7)
    flags = _modifier_flags(ob)

    frames = [1, 5, 10, 20, 25]
    goals = cloth_scene.sample_pin_goals(ob, bpy.context.evaluated_depsgraph_get(), scene, frames)
    assert goals.shape == (len(frames), mesh.vertex_count, 3)
    for k, f in enumerate(frames):
        offset = start + (end - start) * min(f - 1, 19) / 19
        np.testing.assert_allclose(goals[k], mesh.vertices + offset, atol=1e-6, err_msg=f"frame {f}")
    assert scene.frame_current == 7
    assert _modifier_flags(ob) == flags

    # Blender's cloth puts the hard-pinned vertex exactly on those goals
    traj = run_blender_cloth(ob, 25)
    np.testing.assert_allclose(traj[np.array(frames) - 1, 8], goals[:, 8], atol=1e-5)


def test_pin_goals_follow_shape_key() -> None:
    mesh = grid_mesh(3, 3)
    ob = make_cloth_object(mesh, pin_weights=corner_pin_weights(mesh))
    ob.shape_key_add(name="Basis")
    key = ob.shape_key_add(name="Lift")
    co = mesh.vertices.copy()
    co[:, 2] += 0.3
    key.data.foreach_set("co", co.astype(np.float32).ravel())
    key.value = 0.0
    key.keyframe_insert("value", frame=1)
    key.value = 1.0
    key.keyframe_insert("value", frame=11)
    set_linear_interpolation(ob.data.shape_keys)

    scene = bpy.context.scene
    scene.frame_set(1)
    goals = cloth_scene.sample_pin_goals(ob, bpy.context.evaluated_depsgraph_get(), scene, [1, 6, 11, 15])
    for k, lift in enumerate([0.0, 0.15, 0.3, 0.3]):
        np.testing.assert_allclose(goals[k], mesh.vertices + [0.0, 0.0, lift], atol=1e-6)
    assert scene.frame_current == 1
    # with shape keys the exported rest state is the evaluated cloth input at this frame
    exported, _ = export_from_blender(ob)
    np.testing.assert_allclose(exported.vertices, mesh.vertices, atol=1e-7)
    np.testing.assert_array_equal(exported.pin_weights, corner_pin_weights(mesh))
