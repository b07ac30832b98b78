"""The ``soft_body`` model through its public interface, on the CPU with real Newton: the
registry, precision, ground and colliders, pins, determinism, parameters and a fit."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest
from side_by_side import jacobians_by_workers
from soft_body_meshes import box_mesh

from warp_core.fit import FitError, FitProblem, FitSettings, Target, fit
from warp_core.mesh import ClothMesh
from warp_core.models import get_model, model_names
from warp_core.models.soft_body import MODEL, PARAMETER_NAMES, Collider, SoftBodyParams, SoftBodySimulator

# A 20 cm jelly cube on a 4-cell lattice (5 cm cells: 64 cells, 384 tets, 125 nodes),
# dropped from 10 cm: it lands after about 3.4 frames and has settled by frame 30.
CUBE_LO, CUBE_HI = (-0.1, -0.1, 0.1), (0.1, 0.1, 0.3)
CELL = 0.05
DROP = SoftBodyParams(
    young_modulus=1e5, poisson_ratio=0.3, damping=0.01, substeps=4, iterations=10, lattice_cells=4
)
SETTLED = 30
# resting contact: a node sinks into a surface by its load over the contact stiffness
# (about 0.12 mm here); 1 % of a cell is the band the body has to rest in
REST_BAND = 0.01 * CELL


def cube() -> ClothMesh:
    return box_mesh(CUBE_LO, CUBE_HI, (2, 2, 2))


def hanging_block() -> ClothMesh:
    """A 10 x 10 x 20 cm block pinned at its top face (45 nodes, 96 tets)."""
    return box_mesh((0.0, 0.0, -0.2), (0.1, 0.1, 0.0), (2, 2, 4), pin=lambda v: v[:, 2] > -1e-9)


HANG = SoftBodyParams(
    young_modulus=1e4, poisson_ratio=0.3, damping=0.02, substeps=4, iterations=10, lattice_cells=4
)


def slab_collider(name: str, matrices: np.ndarray) -> Collider:
    """A 1 m x 1 m x 20 cm slab whose top face is at z = 0 in object space."""
    slab = box_mesh((-0.5, -0.5, -0.2), (0.5, 0.5, 0.0))
    return Collider(name, slab.vertices, slab.triangles(), matrices, friction=0.5)


def settled(rollout) -> tuple[np.ndarray, float]:
    """Positions (frames, N, 3) and the largest node speed of the last output frame."""
    return rollout.numpy(), float(np.abs(rollout.node_velocities.numpy()[-1]).max())


# ------------------------------------------------------------------ registry, precision
def test_the_registry_finds_the_model() -> None:
    model = get_model("soft_body")
    assert model is MODEL and "soft_body" in model_names()
    assert model.label == "Soft Body (VBD)"
    assert [p.name for p in model.parameters] == list(PARAMETER_NAMES)
    fit_bounds = {p.name: p.fit_bounds() for p in model.parameters}
    assert fit_bounds["poisson_ratio"] == (0.01, 0.49) and fit_bounds["damping"] == (1e-5, 10.0)
    settings = model.settings_from_dict(asdict(model.default_settings()))
    assert settings == model.default_settings()
    with_collider = DROP.replace(colliders=(slab_collider("table", np.eye(4)[None]),))
    back = model.settings_from_dict(with_collider.as_dict())
    assert back.colliders[0].name == "table" and np.array_equal(back.colliders[0].matrices, np.eye(4)[None])


def test_adam_steps_on_the_adjoint_through_collider_contacts() -> None:
    """A cube dropped on a table: Adam takes the adjoint's gradient through the collider's
    contacts (``test_soft_body_adjoint`` checks it against central differences); a gradient
    kind the model does not have is refused by name."""
    settings = DROP.replace(colliders=(slab_collider("table", np.eye(4)[None]),))
    x = SoftBodySimulator(cube(), settings).rollout(4, [4]).numpy()
    problem = FitProblem(cube(), settings, [Target(4, x[0])], ["young_modulus"], model="soft_body")
    result = fit(problem, FitSettings(precision="float32", optimizer="adam", max_iterations=2))
    assert result.gradient == "implicit" and result.n_backward > 0
    with pytest.raises(FitError, match="gradient must be 'auto' or one of 'implicit', got 'stable'"):
        fit(problem, FitSettings(precision="float32", gradient="stable"))


def test_float64_is_refused_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match="float32 only"):
        MODEL.build(cube(), DROP, device="cpu", precision="float64")
    problem = FitProblem(cube(), DROP, [Target(3, cube().vertices)], ["young_modulus"], model="soft_body")
    with pytest.raises(FitError, match="float32 only"):
        fit(problem, FitSettings(precision="float64"))


# ------------------------------------------------------------------ contact
@pytest.fixture(scope="module")
def dropped_on_ground():
    sim = MODEL.build(cube(), DROP.replace(ground=True, ground_height=-0.05), "cpu", "float32")
    return sim, sim.rollout(1 + SETTLED, keep_nodes=True)


def test_a_block_dropped_on_the_ground_comes_to_rest_on_it(dropped_on_ground) -> None:
    sim, rollout = dropped_on_ground
    x, speed = settled(rollout)
    lowest = x[:, :, 2].min(axis=1)
    assert sim.node_count == 125 and sim.tet_count == 384
    # it fell 15 cm and landed: on the plane, not in it, not above it
    assert abs(lowest[-1] - (-0.05)) < REST_BAND
    assert lowest.min() > -0.05 - 4 * REST_BAND  # the landing does not punch through
    # and rests: the last frames agree, the nodes barely move
    assert np.abs(x[-1] - x[-4]).max() < 1e-3 * CELL and speed < 0.01
    # a jelly cube keeps its shape: its top is about a cube's height above its bottom
    height = x[-1, :, 2].max() - lowest[-1]
    assert 0.18 < height < 0.2


def test_rollouts_are_bit_identical(dropped_on_ground) -> None:
    sim, first = dropped_on_ground
    again = sim.rollout(1 + SETTLED, keep_nodes=True)
    assert np.array_equal(first.numpy(), again.numpy())
    assert np.array_equal(first.node_velocities.numpy(), again.node_velocities.numpy())


def test_captured_frames_and_kernel_launches_agree_bit_for_bit() -> None:
    """Each frame's substeps replay as a captured graph, on the CPU too: with pins on moving
    goals and a moving collider (frame data copied into the graph's buffers), and after a
    new Young's modulus (which moves the contact stiffness, kept in arrays that the graphs
    read), the rollout is the one kernel-by-kernel launches make, bit for bit."""
    lift = np.repeat(np.eye(4)[None], 13, axis=0)
    lift[:, 2, 3] = -0.3 + 0.01 * np.arange(13)
    lift[:, 0, 3] = 0.004 * np.arange(13)
    mesh = hanging_block()
    goals = mesh.vertices[None] + (np.array([0.01, 0.0, -0.005]) * np.arange(13)[:, None])[:, None, :]
    settings = HANG.replace(colliders=(slab_collider("lift", lift),))
    captured, launched = SoftBodySimulator(mesh, settings), SoftBodySimulator(mesh, settings)
    launched.graphs_enabled = False
    for values in ({}, {"young_modulus": 3e4}):
        captured.set_params(values)
        launched.set_params(values)
        runs = [sim.rollout(12, goals=goals, keep_nodes=True) for sim in (captured, captured, launched)]
        assert captured.use_graphs and not launched.use_graphs
        x = [r.numpy() for r in runs]
        assert np.array_equal(x[0], x[1]) and np.array_equal(x[0], x[2])
        v = [r.node_velocities.numpy() for r in runs]
        assert np.array_equal(v[0], v[2])
        assert np.abs(x[0][-1] - x[0][0]).max() > 0.05  # it moved: the test compares motion


def test_a_static_collider_stops_the_block() -> None:
    table = slab_collider("table", np.eye(4)[None])
    sim = SoftBodySimulator(cube(), DROP.replace(colliders=(table,)))
    x, speed = settled(sim.rollout(1 + SETTLED, keep_nodes=True))
    assert abs(x[-1, :, 2].min()) < REST_BAND and speed < 0.01  # free fall: 7 m below by now


def test_a_moving_collider_lifts_the_block() -> None:
    """The slab's top starts 1 cm under the cube, rises 1 cm per frame for 10 frames and
    stops: the cube lands on it and rides up with it, 10 cm."""
    lift = np.repeat(np.eye(4)[None], 11, axis=0)
    lift[:, 2, 3] = 0.09 + 0.01 * np.arange(11)  # matrix k: frame 1 + k
    sim = SoftBodySimulator(cube(), DROP.replace(colliders=(slab_collider("lift", lift),)))
    x, speed = settled(sim.rollout(1 + 20, keep_nodes=True))
    bottom = x[:, :, 2].min(axis=1)  # row k: frame 1 + k
    assert abs(bottom[8] - 0.17) < 2 * REST_BAND  # on the slab while it rises
    assert abs(bottom[-1] - 0.19) < REST_BAND and speed < 0.02  # and where it stopped


def test_a_collider_that_scales_while_moving_is_refused() -> None:
    grow = np.repeat(np.eye(4)[None], 3, axis=0)
    grow[2, :3, :3] *= 1.5
    with pytest.raises(ValueError, match="must move rigidly"):
        SoftBodySimulator(cube(), DROP.replace(colliders=(slab_collider("grow", grow),)))


# ------------------------------------------------------------------ pins
def test_pinned_vertices_follow_moving_goals() -> None:
    mesh = hanging_block()
    sim = SoftBodySimulator(mesh, HANG)
    pinned = mesh.pin_weights > 0.5
    assert pinned.sum() == 9 and sim.pinned_nodes.sum() == 9  # the top face: its own nodes
    frames = 9
    shift = np.array([0.02, -0.01, 0.015]) * np.arange(frames)[:, None]
    goals = mesh.vertices[None] + shift[:, None, :]
    x = sim.rollout(frames, goals=goals).numpy()
    np.testing.assert_allclose(x[:, pinned], goals[:, pinned], atol=1e-6)
    # the free part is dragged along (and hangs below): it moved most of the way in x
    free = ~pinned
    assert np.all(x[-1, free, 0] - mesh.vertices[free, 0] > 0.5 * shift[-1, 0])
    with pytest.raises(ValueError, match="pin goals must have shape"):
        sim.rollout(frames, goals=goals[:3])


# ------------------------------------------------------------------ parameters
def test_set_params_changes_the_motion_and_restores_it_exactly() -> None:
    sim = SoftBodySimulator(hanging_block(), HANG)
    base = sim.rollout(10).numpy()
    sag = base[-1, :, 2].min() - (-0.2)
    sim.set_params({"young_modulus": 4e4})
    stiff = sim.rollout(10).numpy()
    assert -0.2 - stiff[-1, :, 2].min() < 0.5 * -sag  # four times stiffer: a quarter of the sag
    np.testing.assert_array_equal(sim.params.numpy(), np.float32([4e4, 0.3, 0.02, 1000.0, 1e5, 0.01]))
    sim.set_params({"density": 3000.0})
    heavy = sim.rollout(10).numpy()
    assert heavy[-1, :, 2].min() < stiff[-1, :, 2].min() - 1e-3
    sim.set_params({"young_modulus": 1e4, "density": 1000.0})
    assert np.array_equal(sim.rollout(10).numpy(), base)
    with pytest.raises(ValueError, match="unknown soft-body parameter"):
        sim.set_params({"stiffness": 1.0})
    with pytest.raises(ValueError, match="poisson_ratio"):
        sim.set_params({"poisson_ratio": 0.5})


def test_set_params_moves_as_a_simulator_built_with_those_values() -> None:
    """Contacts follow the material: a fit's simulator, built at its start values and moved to
    others, must move exactly as the bake's, built at the fitted ones (ground and collider)."""
    table = slab_collider("Table", np.eye(4)[None])
    scene = DROP.replace(ground=True, ground_height=-0.3, colliders=(table,))
    fitted = {"young_modulus": 2.0e4, "damping": 0.03, "density": 800.0}
    moved = SoftBodySimulator(cube(), scene)
    moved.rollout(3)  # in use before the change
    moved.set_params(fitted)
    built = SoftBodySimulator(cube(), scene.replace(**fitted))
    x = built.rollout(20).numpy()
    assert x[:, :, 2].min() < 0.1 - 1e-3  # it landed on the table and pressed into the contact band
    np.testing.assert_array_equal(moved.rollout(20).numpy(), x)


def test_jacobian_rollouts_side_by_side_equal_one_after_another(monkeypatch) -> None:
    """A Jacobian's rollouts run on two simulators at once on the CPU (``parallel_rollouts``):
    the columns are the ones the objective's own simulator gives alone, bit for bit, with pins
    and a moving collider (frame data each rollout loads) and a new Young's modulus."""
    lift = np.repeat(np.eye(4)[None], 13, axis=0)
    lift[:, 2, 3] = -0.3 + 0.01 * np.arange(13)
    mesh = hanging_block()
    truth = HANG.replace(colliders=(slab_collider("lift", lift),))
    frames = [4, 8, 12]
    x = SoftBodySimulator(mesh, truth).rollout(12, frames).numpy()
    names = ["young_modulus", "damping", "density"]
    start = truth.replace(young_modulus=3e4, damping=0.01)
    targets = [Target(f, x[k]) for k, f in enumerate(frames)]
    problem = FitProblem(mesh, start, targets, names, model="soft_body")
    settings = FitSettings(precision="float32", jacobian="differences")
    found = jacobians_by_workers(monkeypatch, problem, settings, {"young_modulus": 2e4})
    for workers in (1, 2):
        assert found[workers][2] == 2 + 2 * 2 * 3  # two base points, six column rollouts each
    for a, b in zip(found[1][:2], found[2][:2], strict=True):
        assert np.array_equal(a, b)
        assert np.abs(a).max() > 0.0


def test_max_stretch_reads_the_mesh_edges() -> None:
    mesh = hanging_block()
    sim = SoftBodySimulator(mesh, HANG)
    assert sim.max_stretch(mesh.vertices[None]) == pytest.approx(1.0)
    stretched = mesh.vertices * [1.0, 1.0, 3.0]
    assert sim.max_stretch(np.stack([mesh.vertices, stretched])) == pytest.approx(3.0)


# ------------------------------------------------------------------ fit
@pytest.mark.parametrize("factor", [3.0, 1.0 / 3.0], ids=["from-3x-above", "from-3x-below"])
def test_a_fit_recovers_stiffness_and_damping(factor: float) -> None:
    """Targets from the model itself: the hanging block released at rest, its sag and
    bounce (Young's modulus) and their decay (damping) at every third frame from 4 to 16."""
    mesh = hanging_block()
    truth = HANG
    frames = [4, 7, 10, 13, 16]
    x = SoftBodySimulator(mesh, truth).rollout(16, frames).numpy()
    start = truth.replace(young_modulus=truth.young_modulus * factor, damping=truth.damping / factor)
    problem = FitProblem(
        mesh,
        start,
        [Target(f, x[k]) for k, f in enumerate(frames)],
        ["young_modulus", "damping"],
        model="soft_body",
    )
    result = fit(problem, FitSettings(precision="float32", global_search=False, max_iterations=20))
    assert result.outcome == "converged", result.outcome_reason
    assert result.params["young_modulus"] == pytest.approx(truth.young_modulus, rel=0.02)
    assert result.params["damping"] == pytest.approx(truth.damping, rel=0.02)


def test_a_body_far_from_the_origin_moves_as_it_does_near_it() -> None:
    """10 km out, float32 coordinates have units in the last place of 1 mm, about a
    substep's fall early on: the body is simulated relative to its own centre, so moved
    there it moves as at the origin, up to the rounding of the output to float32 (simulated
    in world coordinates, it was off by 2.7 mm of its 26 mm motion)."""
    near = SoftBodySimulator(hanging_block(), HANG).rollout(8).numpy()
    far_mesh = hanging_block()
    shift = np.array([1e4, -7e3, 3e3])
    far_mesh.vertices = far_mesh.vertices + shift
    far = SoftBodySimulator(far_mesh, HANG).rollout(8).numpy() - shift
    assert np.abs(near - hanging_block().vertices).max() > 0.02
    assert np.abs(far - near).max() < np.spacing(np.float32(1e4))


def test_a_problem_with_colliders_saves_and_loads(tmp_path) -> None:
    """Colliders hold arrays: the problem file keeps them exactly, and the loaded problem
    simulates as the saved one."""
    from warp_core.fit.problem.files import load_problem, save_problem

    lift = np.repeat(np.eye(4)[None], 6, axis=0)
    lift[:, 2, 3] = 0.02 * np.arange(6)
    params = DROP.replace(colliders=(slab_collider("Lift", lift),))
    mesh = cube()
    x = SoftBodySimulator(mesh, params).rollout(5, [5]).numpy()
    problem = FitProblem(mesh, params, [Target(5, x[0])], ["young_modulus"], model="soft_body")
    loaded = load_problem(save_problem(problem, tmp_path / "lift.npz"))
    (collider,) = loaded.model_settings.colliders
    np.testing.assert_array_equal(collider.matrices, lift)
    np.testing.assert_array_equal(collider.triangles, params.colliders[0].triangles)
    assert loaded.model_settings.replace(colliders=()) == params.replace(colliders=())
    np.testing.assert_array_equal(
        SoftBodySimulator(loaded.mesh, loaded.model_settings).rollout(5, [5]).numpy(), x
    )
