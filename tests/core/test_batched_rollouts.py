"""Batched rollouts: B parameter sets (and pin-goal sequences) of one mesh in the same
launches, each member bit for bit its single rollout, and the fit's Jacobian and global
phase through batches equal to one rollout after another."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from test_fit import clamped_sheet, synthetic_problem

from warp_core import ClothParams, grid_mesh
from warp_core.fit import FitSettings, fit
from warp_core.models.blender_cloth.batch import CPU_MAX_MEMBERS, bytes_per_member, members_per_batch
from warp_core.models.blender_cloth.simulator import ClothSimulator

FRAME_END = 10
MEMBER_VALUES = [
    {},
    dict(tension_stiffness=40.0, bending_stiffness=2.0),
    dict(air_damping=3.0, mass=0.5, shear_damping=1.0),
    dict(tension_stiffness=4.0, compression_stiffness=2.0, bending_damping=3.0),
]


def corner_sheet(n: int):
    mesh = grid_mesh(n, n, 1.0, 1.0)
    v = mesh.vertices
    corners = (np.abs(np.abs(v[:, 0]) - 0.5) < 1e-9) & (np.abs(np.abs(v[:, 1]) - 0.5) < 1e-9)
    mesh.pin_weights = corners.astype(float)
    return mesh


def moving_goals(mesh, member: int) -> np.ndarray:
    """Each member's pins swing on their own path."""
    t = np.arange(FRAME_END + 1)[:, None, None]
    shift = np.array([0.01 * (member + 1), 0.0, -0.005 * member])
    return mesh.vertices[None] + np.sin(0.3 * t) * shift


def single_runs(sim, members, goals, frozen=None):
    out = []
    for m, values in enumerate(members):
        sim.set_params(ClothParams().values())
        sim.set_params(values)
        member_goals = None if goals is None else goals[m]
        r = sim.rollout(FRAME_END, [3, 7, FRAME_END], member_goals, frozen=frozen, keep_states=False)
        out.append((r.numpy(), r.cg_iterations))
    return out


@pytest.mark.parametrize(
    ("n", "precision", "mode", "graphs"),
    [
        (6, "float32", None, True),  # Blender's in-turn dot products
        (6, "float64", None, False),  # kernel by kernel, host convergence checks
        (20, "float32", None, True),  # 400 vertices: the block order
        (20, "float64", "blocks", False),
        (20, "float32", "tiles", True),  # the tiles kernels (CUDA's) on the CPU
        (20, "float64", "chunks", True),  # several chunks per member
    ],
)
def test_each_member_is_its_single_rollout_bit_for_bit(n, precision, mode, graphs) -> None:
    mesh = corner_sheet(n)
    sim = ClothSimulator(mesh, ClothParams(), precision=precision)
    if mode is not None:
        sim.solver.dot_mode = mode
    sim.graphs_enabled = graphs
    goals = np.stack([moving_goals(mesh, m) for m in range(len(MEMBER_VALUES))])
    batch = sim.rollout_batch(MEMBER_VALUES, FRAME_END, [3, 7, FRAME_END], goals)
    assert batch.positions.shape == (len(MEMBER_VALUES), 3, n * n, 3)
    singles = single_runs(sim, MEMBER_VALUES, goals)
    for m, (x, counts) in enumerate(singles):
        assert np.array_equal(batch.positions[m], x), m
        assert np.array_equal(batch.cg_iterations[m], counts), m
    # the members differ (and converge after different counts), so equality means something
    assert len({tuple(c) for _, c in singles}) == len(MEMBER_VALUES)
    assert min(np.abs(singles[0][0] - x).max() for x, _ in singles[1:]) > 1e-4


def test_shared_goals_and_frozen_counts_match_single_rollouts() -> None:
    """One goal sequence for every member, and a base rollout's frozen CG counts (a
    Jacobian's tangent rollouts)."""
    mesh = corner_sheet(8)
    sim = ClothSimulator(mesh, ClothParams(), precision="float64")
    base = sim.rollout(FRAME_END, keep_states=False)
    goals = moving_goals(mesh, 1)
    members = MEMBER_VALUES[1:3]
    batch = sim.rollout_batch(members, FRAME_END, [3, 7, FRAME_END], goals, frozen=base.frozen)
    singles = single_runs(sim, members, [goals] * len(members), frozen=base.frozen)
    for m, (x, counts) in enumerate(singles):
        assert np.array_equal(batch.positions[m], x)
        assert np.array_equal(batch.cg_iterations[m], counts)


def test_batches_refuse_what_they_do_not_simulate() -> None:
    mesh = corner_sheet(6)
    sim = ClothSimulator(mesh, ClothParams(use_pressure=True), precision="float32")
    with pytest.raises(ValueError, match="pressure cannot run as a batch"):
        sim.rollout_batch([{}, {}], FRAME_END)
    sim = ClothSimulator(mesh, ClothParams(), precision="float32")
    with pytest.raises(ValueError, match="unknown cloth parameter"):
        sim.rollout_batch([{"stiffness": 1.0}], FRAME_END)
    with pytest.raises(ValueError, match="tension_stiffness"):
        sim.rollout_batch([{}, {"tension_stiffness": -1.0}], FRAME_END)
    with pytest.raises(ValueError, match="pin goals for 3 members"):
        sim.rollout_batch([{}, {}], FRAME_END, goals=np.zeros((3, FRAME_END + 1, 36, 3)))
    with wp.Tape(), pytest.raises(ValueError, match="no tape gradient"):
        sim.rollout_batch([{}, {}], FRAME_END)


def test_batch_size_follows_memory() -> None:
    sim = ClothSimulator(corner_sheet(20), ClothParams(), precision="float64")
    per_member = bytes_per_member(sim)
    # at least the positions, velocities, forces and system blocks of every vertex
    assert per_member > 400 * (4 * 24 + 2 * 72)
    assert members_per_batch(sim, 10) == 10
    assert members_per_batch(sim, 1000) == CPU_MAX_MEMBERS


def test_batched_jacobian_equals_the_sequential_one() -> None:
    from warp_core.fit.objective.objective import FitObjective
    from warp_core.fit.problem.spec import parameter_spec

    truth = ClothParams(tension_stiffness=40.0, bending_stiffness=2.0, air_damping=2.0)
    names = ["tension_stiffness", "bending_stiffness", "air_damping"]
    p = synthetic_problem(clamped_sheet(8), truth, names, [6, 12])
    spec = parameter_spec(p)
    columns = {}
    for mode in ("off", "on"):
        objective = FitObjective(p, FitSettings(batch_rollouts=mode), spec.names, spec=spec)
        values = spec.initial_values()
        first = objective.log_jacobian(values)
        moved = objective.log_jacobian({**values, "air_damping": 1.7})
        columns[mode] = (first, moved)
        assert objective.n_forward == 2 + 2 * 2 * 3
    for a, b in zip(columns["off"], columns["on"], strict=True):
        assert np.array_equal(a, b)
        assert np.abs(a).max() > 0.0


def test_global_phase_in_batches_equals_one_point_after_another(monkeypatch) -> None:
    """The global phase's 32 start points as batches: the same values, RMSE, loss history
    and simulation count as one point after another."""
    from warp_core.fit.objective import tangents

    monkeypatch.setattr(tangents, "cpu_workers", lambda *_args: 1)
    batch_sizes: list[int] = []
    plain = ClothSimulator.rollout_batch

    def counted(self, param_sets, *args, **kwargs):
        batch_sizes.append(len(param_sets))
        return plain(self, param_sets, *args, **kwargs)

    monkeypatch.setattr(ClothSimulator, "rollout_batch", counted)
    truth = ClothParams(tension_stiffness=40.0, bending_stiffness=2.0, air_damping=3.0)
    p = synthetic_problem(clamped_sheet(8), truth, ["tension_stiffness", "bending_stiffness"], [6, 12])
    p.model_settings = p.model_settings.replace(air_damping=1.0)  # wrong and not fitted: no values match
    runs = {mode: fit(p, FitSettings(batch_rollouts=mode)) for mode in ("off", "on")}
    one, batched = runs["off"], runs["on"]
    # the 32 start points in one batch, each Jacobian's 4 tangent rollouts in one
    assert sorted(set(batch_sizes)) == [4, 32] and batch_sizes.count(32) == 1
    assert batched.search["global_phase"]
    assert batched.search["candidates"] == 2 * FitSettings().global_points_per_parameter
    assert one.params == batched.params and one.rmse == batched.rmse
    assert one.loss_history == batched.loss_history and one.n_forward == batched.n_forward
    assert one.outcome == batched.outcome == "misfit"


def test_each_member_paints_its_own_weight_maps() -> None:
    """Members with their own structural and bending maps (and one with the simulator's)
    each equal the single rollout with those maps painted, bit for bit; a later batch
    without maps runs the simulator's own weights again."""
    mesh = corner_sheet(8)
    x, y = mesh.vertices[:, 0], mesh.vertices[:, 1]
    own = {"structural": np.clip(0.5 + x, 0.0, 1.0)}
    members = [
        {"structural": np.clip(0.5 - y, 0.0, 1.0), "bending": np.clip(0.5 + y, 0.0, 1.0)},
        {},
        {"structural": np.exp(-(x**2 + y**2) / 0.1)},
    ]
    ranges = dict(
        tension_stiffness=4.0, tension_stiffness_max=40.0, bending_stiffness=0.1, bending_stiffness_max=5.0
    )
    values = [dict(air_damping=2.0), {}, dict(tension_stiffness=8.0)]
    sim = ClothSimulator(mesh, ClothParams(**ranges), precision="float32")
    sim.set_maps(own)
    batch = sim.rollout_batch(values, FRAME_END, [3, 7, FRAME_END], maps=members)
    again = sim.rollout_batch(values, FRAME_END, [3, 7, FRAME_END])
    for m, (member_values, member_maps) in enumerate(zip(values, members, strict=True)):
        single = ClothSimulator(mesh, ClothParams(**ranges), precision="float32")
        single.set_maps({**own, **member_maps})
        single.set_params(member_values)
        r = single.rollout(FRAME_END, [3, 7, FRAME_END], keep_states=False)
        assert np.array_equal(batch.positions[m], r.numpy()), m
        assert np.array_equal(batch.cg_iterations[m], r.cg_iterations), m
        if member_maps:  # the maps move the cloth: the comparison can fail
            assert not np.array_equal(again.positions[m], r.numpy()), m
    plain = ClothSimulator(mesh, ClothParams(**ranges), precision="float32")
    plain.set_maps(own)
    plain.set_params(values[0])
    assert np.array_equal(again.positions[0], plain.rollout(FRAME_END, [3, 7, FRAME_END]).numpy())
    with pytest.raises(ValueError, match="weight maps for 2 members"):
        sim.rollout_batch(values, FRAME_END, [FRAME_END], maps=members[:2])


def test_a_region_fit_in_batches_equals_one_rollout_after_another(monkeypatch) -> None:
    """The regions' Jacobians and global phase as batches (each member painting its own
    region values): the same values, RMSE and simulation count as one rollout at a time."""
    from test_map_regions import two_region_problem

    painted: list[int] = []
    plain = ClothSimulator.rollout_batch

    def counted(self, param_sets, *args, **kwargs):
        painted.append(len(kwargs.get("maps") or []))
        return plain(self, param_sets, *args, **kwargs)

    monkeypatch.setattr(ClothSimulator, "rollout_batch", counted)
    problem, _ = two_region_problem(blend=0.4)
    runs = {mode: fit(problem, FitSettings(batch_rollouts=mode)) for mode in ("off", "on")}
    # each Jacobian's 4 rollouts (two regions, central differences) in one batch
    assert painted and set(painted) == {4}
    one, batched = runs["off"], runs["on"]
    assert one.outcome == batched.outcome == "converged"
    assert one.params == batched.params and one.rmse == batched.rmse
    assert one.loss_history == batched.loss_history and one.n_forward == batched.n_forward
    assert np.array_equal(one.maps["structural"], batched.maps["structural"])
