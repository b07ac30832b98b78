"""A fitted weight map written into the cloth's vertex group and restored
(``addon/scene/map_groups.py``): created or replaced groups, bit-for-bit restores, refusals
that change nothing, and Blender's own cloth replaying a written structural map.
"""

from __future__ import annotations

import importlib
from typing import Any

import bpy
import numpy as np
import pytest
from blender_ref import (
    add_cloth_group,
    addon_package,
    export_from_blender,
    grid_mesh,
    make_cloth_object,
    model_deviation,
    pin_row_weights,
    ramp_weights,
    run_blender_cloth,
)

_PACKAGE = addon_package()
map_groups = importlib.import_module(f"{_PACKAGE.__name__}.addon.scene.map_groups")
FitInputError = importlib.import_module(f"{_PACKAGE.__name__}.addon.errors").FitInputError
cloth_scene = importlib.import_module(f"{_PACKAGE.__name__}.addon.models.blender_cloth.scene_model")
find_cloth_modifier = cloth_scene.find_cloth_modifier
TARGETS = cloth_scene.SCENE_MODEL.map_targets  # where each cloth map goes

# the structural case of test_stiffness_groups.py: its scene, frames and tolerance (max
# deviation / largest displacement; measured 6.3e-5 there with a ramp group, 2.2e-5 here
# with this file's map over 1.71 m of motion)
STRUCTURAL = dict(tension_stiffness=15.0, compression_stiffness=12.0, quality=5)
STRUCTURAL_MAX = {"tension_stiffness_max": 80.0, "compression_stiffness_max": 40.0}
STRUCTURAL_FRAMES = 60
STRUCTURAL_TOLERANCE = 6.3e-4


def sheet(settings: dict | None = None, frames: int = 10) -> bpy.types.Object:
    mesh = grid_mesh(6, 6, 1.0, 1.0)
    return make_cloth_object(mesh, pin_weights=pin_row_weights(mesh), settings=settings, frame_end=frames)


def ramp(ob: bpy.types.Object) -> np.ndarray:
    """Weights from 0 to 1 across the sheet in x, a little y mixed in: every vertex its own."""
    co = np.array([v.co[:] for v in ob.data.vertices])
    x = (co[:, 0] - co[:, 0].min()) / np.ptp(co[:, 0])
    y = (co[:, 1] - co[:, 1].min()) / np.ptp(co[:, 1])
    return 0.8 * x + 0.2 * y * x


def snapshot(ob: bpy.types.Object) -> dict[str, Any]:
    """Every vertex group (name, index, lock, members' weights), the active group and every
    plain ClothSettings value of the object: exact values, for == comparisons."""
    groups = {}
    for group in ob.vertex_groups:
        groups[group.name] = (group.index, group.lock_weight, map_groups.group_weights(ob, group))
    settings = find_cloth_modifier(ob).settings
    values = {}
    for prop in settings.bl_rna.properties:
        if prop.type in {"POINTER", "COLLECTION"} or prop.identifier == "rna_type":
            continue
        value = getattr(settings, prop.identifier)
        values[prop.identifier] = tuple(value) if getattr(prop, "is_array", False) else value
    return {"groups": groups, "active": ob.vertex_groups.active_index, "settings": values}


def read_back(ob: bpy.types.Object, group: str) -> np.ndarray:
    members = map_groups.group_weights(ob, ob.vertex_groups[group])
    assert sorted(members) == list(range(len(ob.data.vertices)))  # every vertex a member
    return np.array([members[i] for i in range(len(members))])


def test_write_creates_a_group_and_restore_removes_it() -> None:
    ob = sheet()
    ob.vertex_groups.new(name="Fit Structural Stiffness")  # taken: the new one gets another name
    ob.vertex_groups.active_index = 0
    before = snapshot(ob)
    weights = ramp(ob)
    state = map_groups.write_map(ob, "structural", weights, {"tension_stiffness_max": 55.5})

    settings = find_cloth_modifier(ob).settings
    assert state.previous_weights is None and state.previous_setting == ""
    assert state.group.startswith("Fit Structural Stiffness") and state.group != "Fit Structural Stiffness"
    assert settings.vertex_group_structural_stiffness == state.group
    assert settings.tension_stiffness_max == pytest.approx(55.5)
    assert np.array_equal(read_back(ob, state.group), weights.astype(np.float32))
    mesh, _ = export_from_blender(ob)
    assert np.array_equal(mesh.structural_stiffness_weight, weights.astype(np.float32))

    # kept as JSON between the write and the restore
    kept = map_groups.GroupState.from_json(state.to_json())
    assert kept == state
    map_groups.restore_map(ob, kept)
    assert state.group not in ob.vertex_groups
    assert settings.vertex_group_structural_stiffness == ""
    assert snapshot(ob) == before


@pytest.mark.parametrize("kind", ["shear", "bending", "shrink"])
def test_each_kind_names_its_own_group_and_maximum(kind: str) -> None:
    ob = sheet()
    before = snapshot(ob)
    maximum = TARGETS[kind].max_fields[0]
    state = map_groups.write_map(ob, kind, ramp(ob), {maximum: 25.0 if kind != "shrink" else 0.25})
    settings = find_cloth_modifier(ob).settings
    assert getattr(settings, state.setting) == state.group == TARGETS[kind].new_group
    assert getattr(settings, maximum) == pytest.approx(25.0 if kind != "shrink" else 0.25)
    map_groups.restore_map(ob, state)
    assert snapshot(ob) == before


def test_write_replaces_an_existing_group_and_restore_brings_it_back() -> None:
    ob = sheet()
    custom = ramp_weights(export_from_blender(ob)[0]) * 0.9 + 0.05
    custom[::7] = 0.0  # these stay out of the group
    custom[3] = 0.0
    add_cloth_group(ob, "Stiff", custom, "vertex_group_structural_stiffness")
    ob.vertex_groups["Stiff"].add([3], 0.0, "REPLACE")  # a member of weight 0
    ob.vertex_groups.new(name="other").add([0, 1, 2], 0.3, "REPLACE")
    before = snapshot(ob)
    previous = map_groups.group_weights(ob, ob.vertex_groups["Stiff"])
    assert 0 not in previous and previous[3] == 0.0

    weights = 1.0 - ramp(ob)
    state = map_groups.write_map(ob, "structural", weights)
    assert state.group == "Stiff" and state.previous_weights == previous
    assert len(ob.vertex_groups) == 3  # pin, Stiff, other
    assert np.array_equal(read_back(ob, "Stiff"), weights.astype(np.float32))
    assert snapshot(ob)["groups"]["other"] == before["groups"]["other"]

    map_groups.restore_map(ob, map_groups.GroupState.from_json(state.to_json()))
    assert snapshot(ob) == before


def test_a_missing_named_group_is_replaced_by_a_new_one_and_the_name_restored() -> None:
    ob = sheet()
    find_cloth_modifier(ob).settings.vertex_group_bending = "Gone"
    before = snapshot(ob)
    state = map_groups.write_map(ob, "bending", ramp(ob))
    assert state.previous_weights is None and state.group == "Fit Bending Stiffness"
    map_groups.restore_map(ob, state)
    assert snapshot(ob) == before


BAD_INPUT = [
    ("wrong length", "structural", lambda n: np.zeros(n - 1), None, "has 35 weights"),
    ("NaN", "structural", lambda n: np.where(np.arange(n) == 4, np.nan, 0.5), None, "vertex 4 is nan"),
    ("above 1", "shear", lambda n: np.where(np.arange(n) == 2, 1.5, 0.5), None, "vertex 2 is 1.5"),
    ("below 0", "bending", lambda n: np.full(n, -0.1), None, "from 0 to 1"),
    ("unknown kind", "damping", lambda n: np.zeros(n), None, "unknown map 'damping'"),
    (
        "foreign maximum",
        "shear",
        lambda n: np.zeros(n),
        {"bending_stiffness_max": 2.0},
        "use shear_stiffness_max",
    ),
    ("maximum out of range", "shrink", lambda n: np.zeros(n), {"shrink_max": 1.5}, "outside Blender's range"),
    (
        "maximum below minimum",
        "shear",
        lambda n: np.zeros(n),
        {"shear_stiffness_max": 1.0},
        "below shear_stiffness",
    ),
]


@pytest.mark.parametrize(
    ("kind", "make", "max_values", "words"),
    [case[1:] for case in BAD_INPUT],
    ids=[case[0] for case in BAD_INPUT],
)
def test_bad_input_is_refused_and_changes_nothing(kind, make, max_values, words) -> None:
    ob = sheet()
    add_cloth_group(ob, "Stiff", ramp(ob), "vertex_group_shear_stiffness")
    before = snapshot(ob)
    with pytest.raises(FitInputError, match="Cloth") as raised:
        map_groups.write_map(ob, kind, make(len(ob.data.vertices)), max_values)
    assert words in str(raised.value)
    assert snapshot(ob) == before


def test_a_range_of_one_value_is_written() -> None:
    """A map whose fitted values are all one: its base and Max are the same double, which
    Blender rounds up to float32 for the base; the Max is not "below" it."""
    value = 12.434125664653395  # float32 rounds it up (12.434125900268555)
    ob = sheet({"tension_stiffness": value, "compression_stiffness": value})
    assert ob.modifiers["Cloth"].settings.tension_stiffness > value
    maxima = {"tension_stiffness_max": value, "compression_stiffness_max": value}
    state = map_groups.write_map(ob, "structural", np.zeros(len(ob.data.vertices)), maxima)
    settings = ob.modifiers["Cloth"].settings
    assert settings.tension_stiffness_max == np.float32(value) and settings.vertex_group_structural_stiffness
    map_groups.restore_map(ob, state)
    assert not settings.vertex_group_structural_stiffness


def test_objects_without_a_cloth_mesh_are_refused() -> None:
    empty = bpy.data.objects.new("Marker", None)
    bpy.context.scene.collection.objects.link(empty)
    with pytest.raises(FitInputError, match="Marker is not a mesh object"):
        map_groups.write_map(empty, "structural", np.zeros(4))

    me = bpy.data.meshes.new("Plain")
    me.from_pydata([(0, 0, 0), (1, 0, 0), (0, 1, 0)], [], [(0, 1, 2)])
    plain = bpy.data.objects.new("Plain", me)
    bpy.context.scene.collection.objects.link(plain)
    with pytest.raises(FitInputError, match="Plain has no Cloth modifier; add one"):
        map_groups.write_map(plain, "structural", np.zeros(3))
    assert len(plain.vertex_groups) == 0


def test_blender_replays_a_written_structural_map() -> None:
    """Blender's cloth run on the written group matches our model given the same map as
    the mesh's structural weights; the first run without a group shows the write resets the
    cloth's cache (a stale cache would replay the first run)."""
    mesh = grid_mesh(10, 10, 1.0, 1.0)
    ob = make_cloth_object(
        mesh, pin_weights=pin_row_weights(mesh, rows=1), settings=STRUCTURAL, frame_end=STRUCTURAL_FRAMES
    )
    uniform = run_blender_cloth(ob, STRUCTURAL_FRAMES)
    exported, params = export_from_blender(ob)
    assert exported.structural_stiffness_weight is None

    weights = ramp(ob)
    map_groups.write_map(ob, "structural", weights, STRUCTURAL_MAX)
    reference = run_blender_cloth(ob, STRUCTURAL_FRAMES)
    assert np.abs(reference - uniform).max() > 1e-2  # the map changed Blender's result

    exported.structural_stiffness_weight = weights.astype(np.float32).astype(np.float64)
    dev, displacement = model_deviation(exported, params.replace(**STRUCTURAL_MAX), reference)
    assert displacement > 0.3  # the scene really moves
    assert dev <= STRUCTURAL_TOLERANCE, f"{dev:.2e}"


def test_a_restore_that_cannot_be_done_is_refused_and_changes_nothing() -> None:
    ob = sheet()
    add_cloth_group(ob, "Stiff", ramp(ob), "vertex_group_shear_stiffness")
    state = map_groups.write_map(ob, "shear", 1.0 - ramp(ob), {"shear_stiffness_max": 30.0})
    ob.vertex_groups["Stiff"].name = "Renamed"
    after_write = snapshot(ob)
    with pytest.raises(FitInputError, match="Cloth has no vertex group 'Stiff' any more; rename"):
        map_groups.restore_map(ob, state)
    assert snapshot(ob) == after_write
    with pytest.raises(ValueError, match="Not a stored vertex-group state"):
        map_groups.GroupState.from_json('{"kind": "shear"}')
