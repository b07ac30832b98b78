"""The soft body's forward tangents (``warp_core.models.soft_body.tangent``): the transpose of
its adjoint, central differences of whole rollouts, and the fit's Levenberg-Marquardt on
them (``FitSettings.jacobian``)."""

from __future__ import annotations

import numpy as np
import pytest
from soft_body_meshes import box_mesh, swinging_goals

from warp_core.fit import FitProblem, FitSettings, Target, fit
from warp_core.fit.objective.objective import FitObjective
from warp_core.fit.objective.tangent_columns import TANGENT_RESIDUAL, log_jacobian_of, verdict_jacobian
from warp_core.fit.problem.maps import MapSpec
from warp_core.fit.problem.problem import FitError
from warp_core.fit.problem.spec import parameter_spec
from warp_core.mesh import grid_mesh
from warp_core.models import get_model
from warp_core.models.soft_body import SoftBodyParams, SoftBodySimulator, adjoint_step, tangent_step
from warp_core.models.soft_body.adjoint import soft_body_gradient
from warp_core.models.soft_body.tangent import soft_body_tangents

NAMES = ("young_modulus", "poisson_ratio", "damping", "density")


def hanging_block(frames: int) -> tuple[SoftBodySimulator, np.ndarray]:
    """A 20 x 20 x 30 cm block (3 lattice cells) held by its top face, the hold swinging 5 cm
    sideways over ``frames`` frames, VBD at 60 iterations (each step converged)."""
    mesh = box_mesh((0.0, 0.0, -0.3), (0.2, 0.2, 0.0), (2, 2, 3), pin=lambda v: v[:, 2] > -1e-9)
    params = SoftBodyParams(
        young_modulus=1.3e4, poisson_ratio=0.25, damping=0.03, density=1200.0, lattice_cells=3, iterations=60
    )
    goals = np.repeat(mesh.vertices[None], frames + 1, axis=0)
    goals[:, :, 0] += 0.05 * np.sin(np.linspace(0.0, 3.0, frames + 1))[:, None]
    return SoftBodySimulator(mesh, params), goals


def dropped_block() -> SoftBodySimulator:
    """A 20 cm block (2 lattice cells) dropped 5 cm onto the ground (friction 0.5), landing
    by frame 4; VBD at 40 iterations."""
    mesh = box_mesh((0.0, 0.0, 0.05), (0.2, 0.2, 0.25), (2, 2, 2))
    params = SoftBodyParams(young_modulus=2e4, damping=0.02, lattice_cells=2, iterations=40, ground=True)
    return SoftBodySimulator(mesh, params)


@pytest.mark.parametrize("scene", ["hanging", "ground"])
def test_the_tangents_are_the_transpose_of_the_adjoint(scene: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``w . (J d) = (J^T w) . d`` for a random ``w`` over three frames and each parameter's
    log direction ``d``: the tangents and the adjoint solve the same linear systems, one
    forward and one back, so with both solves run to 1e-10 they agree to rounding (measured:
    within 4e-7 hanging over 10 frames; with the ground contacts' float32 Jacobians within
    2e-5). At the solves' own 1e-6 the two part by up to 6e-4 on a small derivative (the
    Poisson ratio's), which is why the solves are tightened here (the adjoint's to no share of
    its step's residual)."""
    monkeypatch.setattr(adjoint_step, "SOLVE_TOLERANCE", 1e-10)
    monkeypatch.setattr(adjoint_step, "SOLVE_SHARE", 0.0)
    monkeypatch.setattr(tangent_step, "SOLVE_TOLERANCE", 1e-10)
    if scene == "hanging":
        sim, goals = hanging_block(10)
        frame_end, frames, tolerance = 11, [5, 8, 11], 1e-6
    else:
        sim, goals = dropped_block(), None
        frame_end, frames, tolerance = 19, [7, 13, 19], 1e-4
    values = sim.settings.values()
    found = soft_body_tangents(sim, frame_end, frames, [{n: values[n]} for n in NAMES], goals)
    w = np.random.default_rng(3).normal(size=found.positions.shape)
    adjoint = soft_body_gradient(sim, frame_end, frames, w, goals, device_resident=False).parameters
    for k, name in enumerate(NAMES):
        forward, back = float(np.sum(w * found.tangents[k])), adjoint[name] * values[name]
        assert abs(forward - back) <= tolerance * abs(back), (name, forward, back)


def test_the_tangents_match_central_differences_of_the_rollout() -> None:
    """Each parameter's tangent of every position over three frames of 30 against central
    differences of whole rollouts at +-1 % (steps converged at 60 iterations). Measured:
    relative to the difference's norm 3.8e-4 (E), 6.8e-4 (nu), 6.1e-4 (damping), 2.6e-4
    (density): the differences' own O(h^2) error and float32 rounding."""
    sim, goals = hanging_block(30)
    frames = [11, 21, 31]
    values = sim.settings.values()
    found = soft_body_tangents(sim, 31, frames, [{n: values[n]} for n in NAMES], goals)
    assert found.positions.shape == (3, sim.vertex_count, 3)
    h = 0.01
    for k, name in enumerate(NAMES):
        sides = []
        for sign in (1.0, -1.0):
            sim.set_params({name: values[name] * np.exp(sign * h)})
            sides.append(sim.rollout(31, frames, goals).numpy())
        sim.set_params({name: values[name]})
        difference = (sides[0] - sides[1]) / (2.0 * h)
        error = np.linalg.norm(found.tangents[k] - difference) / np.linalg.norm(difference)
        assert error < 2e-3, (name, error)


def test_levenberg_marquardt_fits_a_hanging_block_on_tangents() -> None:
    """E and damping of the hanging block from 2x and 0.5x: "auto" takes the tangents (every
    step ends at its root at 60 iterations), converges to the hidden values, says so, and
    runs fewer rollouts than on differences (each Jacobian reads the recording of the
    rollout its step ran, where differences run four). Measured: both converge within 1e-5
    of each value, on tangents in 5 rollouts (1.6 s), on differences in 25 (3.0 s)."""
    sim, goals = hanging_block(20)
    frames = [7, 14, 21]
    targets = sim.rollout(21, frames, goals).numpy()
    start = sim.settings.replace(young_modulus=2.6e4, damping=0.015)
    problem = stiffness_problem(sim.mesh, start, frames, targets, goals)
    results = {
        kind: fit(problem, FitSettings(precision="float32", optimizer="lm", jacobian=kind))
        for kind in ("auto", "differences")
    }
    assert results["auto"].jacobian == "tangents"
    assert results["differences"].jacobian == "differences"
    for kind, result in results.items():
        assert result.outcome == "converged", (kind, result.outcome_reason)
        assert abs(result.params["young_modulus"] / 1.3e4 - 1.0) < 1e-4
        assert abs(result.params["damping"] / 0.03 - 1.0) < 1e-4
    assert results["auto"].n_forward < results["differences"].n_forward


def test_auto_takes_differences_once_the_steps_leave_their_roots() -> None:
    """The block dropped on the ground at VBD's default 10 iterations: its steps end away
    from their roots (measured at the start: 0.026 of their inertia or weight), where the
    tangents are not the rollout's derivatives, so "auto" refuses them at the first Jacobian
    and fits on differences; the fit converges and the result says which it took. Measured:
    25 rollouts, as on differences alone (the refusal reads the recording of the start's
    rollout), the same values bit for bit, E and damping within 2.4e-5 of the hidden ones."""
    sim = dropped_block()
    frames = [7, 13, 19]
    truth = sim.settings.replace(iterations=10)
    targets = SoftBodySimulator(sim.mesh, truth).rollout(19, frames).numpy()
    result = fit_from_off(sim.mesh, truth, frames, targets)
    assert result.jacobian == "differences"
    assert result.outcome == "converged", result.outcome_reason
    assert abs(result.params["young_modulus"] / 2e4 - 1.0) < 1e-4
    assert abs(result.params["damping"] / 0.02 - 1.0) < 1e-4


def test_a_jacobian_at_the_point_just_simulated_reads_its_kept_recording() -> None:
    """Levenberg-Marquardt takes each Jacobian where its step has just simulated: the
    tangents read that rollout's kept recording instead of running it again (a rollout
    fewer a Jacobian), the same columns bit for bit as a simulator that keeps none; at a
    point not just simulated they run their own. Where "auto" refuses the tangents (the
    block at VBD's default 10 iterations) the refusal runs no rollout either."""
    sim = dropped_block()
    frames = [7, 13, 19]
    targets = sim.rollout(19, frames).numpy()
    for iterations, kind in ((40, "tangents"), (10, "differences")):
        start = sim.settings.replace(young_modulus=3e4, damping=0.01, iterations=iterations)
        problem = stiffness_problem(sim.mesh, start, frames, targets)
        spec = parameter_spec(problem)
        values = spec.initial_values()
        moved = {**values, "young_modulus": 2.5e4}
        settings = FitSettings(precision="float32", optimizer="lm")
        found = {}
        for keep in (True, False):
            objective = FitObjective(problem, settings, spec.names, spec=spec)
            objective.sim.keep_recording = keep
            objective.residuals(values)
            first = objective.log_jacobian(values)
            objective.residuals(moved)
            again = objective.log_jacobian(moved)
            assert objective.jacobian_used == kind
            found[keep] = (first, again, objective.n_forward, objective)
        assert np.array_equal(found[True][0], found[False][0])
        assert np.array_equal(found[True][1], found[False][1])
        if kind == "tangents":
            assert (found[True][2], found[False][2]) == (2, 4)
            kept = found[True][3]
            kept.residuals({**values, "damping": 0.012})  # the last rollout is elsewhere now
            kept.log_jacobian(moved)
            assert kept.n_forward == 4
        else:  # one refused pass (run or read) and two Jacobians of four rollouts each
            assert (found[True][2], found[False][2]) == (10, 11)


def stiffness_problem(mesh, start: SoftBodyParams, frames: list[int], targets: np.ndarray, goals=None):
    """E and damping of ``mesh`` from ``start``, targets at ``frames``."""
    targets_at = [Target(f, targets[k]) for k, f in enumerate(frames)]
    return FitProblem(mesh, start, targets_at, ["young_modulus", "damping"], model="soft_body", goals=goals)


def fit_from_off(
    mesh, settings: SoftBodyParams, frames: list[int], targets: np.ndarray, jacobian: str = "auto"
):
    """Levenberg-Marquardt on E and damping from 2x and 0.5x off (``settings``'s other
    values), targets at ``frames``, its Jacobian as ``jacobian`` says."""
    problem = stiffness_problem(mesh, settings.replace(young_modulus=4e4, damping=0.01), frames, targets)
    return fit(problem, FitSettings(precision="float32", optimizer="lm", jacobian=jacobian))


def test_a_dropped_block_fits_on_tangents_once_its_steps_converge() -> None:
    """A 20 cm block dropped 2 cm onto the ground at VBD's 40 iterations: its steps reach
    their roots (measured 1.7e-4) because the contacts are undamped
    (``scene.set_contact_stiffness``): with Newton's contact damping, which acts only while a
    node approaches, they stalled 4.4 of their forces away at 40 and at 50 iterations. So
    "auto" fits on tangents, and they are the rollout's derivatives: the fit converges on
    them to the hidden values."""
    mesh = box_mesh((0.0, 0.0, 0.02), (0.2, 0.2, 0.22), (2, 2, 2))
    params = SoftBodyParams(young_modulus=2e4, damping=0.02, lattice_cells=2, iterations=40, ground=True)
    sim = SoftBodySimulator(mesh, params)
    frames = [7, 13, 19]
    targets = sim.rollout(19, frames).numpy()
    sim.set_params({"young_modulus": 3e4})
    moved = sim.rollout(19, frames).numpy()
    gradient = soft_body_gradient(sim, 19, frames, moved - targets, device_resident=False)
    assert gradient.residual < TANGENT_RESIDUAL
    result = fit_from_off(mesh, params, frames, targets)
    assert result.jacobian == "tangents"
    assert result.outcome == "converged", result.outcome_reason
    assert abs(result.params["young_modulus"] / 2e4 - 1.0) < 1e-3
    assert abs(result.params["damping"] / 0.02 - 1.0) < 1e-3


def test_the_steps_are_checked_on_the_device_as_the_backward_pass_checks_them() -> None:
    """The tangents' check of every step (``max_residual``) on the adjoint's device loop (a
    GPU's default; asked for here on the CPU). The dropped block at VBD's 10
    iterations, to each frame in turn: refused exactly where the host's backward pass finds
    a step over 1e-3 among the same steps, with its worst residual; the hanging block at 60
    passes, and its tangents are those taken with no check at all, bit for bit."""
    block = dropped_block()
    # one substep a frame: where the worst residual first passes 1e-3 it is the last step's
    sim = SoftBodySimulator(block.mesh, block.settings.replace(iterations=10, substeps=1))
    values = sim.settings.values()
    directions = [{n: values[n]} for n in ("young_modulus", "damping")]
    refusals = 0
    for frame in range(2, 20):
        found = soft_body_tangents(sim, frame, [frame], directions, max_residual=1e-3, check_on_device=True)
        grads = np.ones((1, sim.vertex_count, 3))
        host = soft_body_gradient(sim, frame, [frame], grads, device_resident=False)
        if host.residual > 1e-3:
            refusals += 1
            assert found.tangents is None and found.solve_products == 0
            assert found.residual == pytest.approx(host.residual, rel=1e-9), frame
        else:
            assert found.tangents is not None, frame
    assert 0 < refusals < 18

    sim, goals = hanging_block(10)
    checked = soft_body_tangents(
        sim, 11, [5, 8, 11], directions, goals, max_residual=1e-3, check_on_device=True
    )
    unchecked = soft_body_tangents(sim, 11, [5, 8, 11], directions, goals)
    assert checked.tangents is not None and np.abs(checked.tangents).max() > 0.0
    np.testing.assert_array_equal(checked.positions, unchecked.positions)
    np.testing.assert_array_equal(checked.tangents, unchecked.tangents)
    assert checked.residual == unchecked.residual < 1e-3


def test_tangents_are_refused_where_the_model_has_none() -> None:
    """A cloth fit asked for tangents, or any fit for an unknown kind, is refused by name."""
    mesh = grid_mesh(4, 4, 0.4)
    settings = get_model("blender_cloth").default_settings()
    problem = FitProblem(mesh, settings, [Target(3, mesh.vertices.copy())], ["tension_stiffness"])
    with pytest.raises(FitError, match="no forward tangents"):
        fit(problem, FitSettings(jacobian="tangents"))
    with pytest.raises(FitError, match="jacobian must be one of"):
        fit(problem, FitSettings(jacobian="adjoint"))
    assert fit(problem, FitSettings(jacobian="auto", max_iterations=1)).jacobian == "differences"


def region_bar(iterations: int) -> tuple[FitObjective, dict[str, float]]:
    """A 10 x 10 x 20 cm bar hanging from its top face and swung 6 cm, painted in two slices
    (the upper at 2e4 Pa, the lower at 6e4), fitted as two stiffness regions; the objective
    (tangent Jacobians) at 1.5x and 0.7x of them."""
    mesh = box_mesh((0.0, 0.0, -0.2), (0.1, 0.1, 0.0), (1, 1, 4), pin=lambda v: v[:, 2] > -1e-9)
    lower = (mesh.vertices[:, 2] < -0.1 + 1e-9) * 1.0
    weights = {"upper": 1.0 - lower, "lower": lower}
    goals = swinging_goals(mesh, 8, 0.06, 3.0)
    settings = SoftBodyParams(damping=0.02, lattice_cells=4, iterations=iterations)
    mesh.young_modulus_weight = lower
    hidden = settings.replace(young_modulus=2e4, young_modulus_max=6e4)
    x = SoftBodySimulator(mesh, hidden).rollout(9, [5, 9], goals).numpy()
    mesh.young_modulus_weight = None
    problem = FitProblem(
        mesh,
        settings,
        [Target(5, x[0]), Target(9, x[1])],
        [],
        model="soft_body",
        goals=goals,
        maps=[MapSpec("stiffness", weights)],
    )
    spec = parameter_spec(problem)
    objective = FitObjective(
        problem, FitSettings(precision="float32", jacobian="tangents"), spec.names, spec=spec
    )
    return objective, {"stiffness:upper": 3e4, "stiffness:lower": 4.2e4}


def test_region_tangents_match_central_differences_where_the_steps_converge() -> None:
    """Each region's tangent against central differences (+-1 %) of the region simulator's
    own rollouts, every position over two frames. The tangents are those of each step's
    root: at 100 VBD iterations, where the bar's steps converge, they agree (measured: 9.6e-5
    and 6.7e-4 of the differences' norm; 2.5e-5 and 1e-4 at 300); at VBD's default 10 they
    part by 0.51 and 2.47: the derivative of the truncated iterations, which differences
    take and tangents do not, is another number there."""
    for iterations, bound in ((100, 2e-3), (10, None)):
        objective, values = region_bar(iterations)
        sim, problem = objective.sim, objective.problem
        errors = []
        for name in values:
            sim.set_params(values)
            _, tangent = sim.position_tangents(
                problem.frame_end, objective.frames, [{name: values[name]}], problem.goals
            )
            sides = []
            for sign in (1.0, -1.0):
                sim.set_params({**values, name: values[name] * np.exp(sign * 0.01)})
                sides.append(sim.rollout(problem.frame_end, objective.frames, problem.goals).numpy())
            difference = (sides[0] - sides[1]) / 0.02
            errors.append(np.linalg.norm(tangent[0] - difference) / np.linalg.norm(difference))
        if bound is not None:
            assert max(errors) < bound, errors
        else:
            assert min(errors) > 0.1, errors


@pytest.mark.parametrize("iterations", [10, 40])
def test_a_verdict_reads_told_tangents_only_where_the_steps_converge(iterations: int) -> None:
    """A fit told to take tangents (``jacobian`` "tangents") takes them without checking the
    steps; its verdict (what is determined, the matched ranges) checks them. The block
    dropped on the ground: at VBD's 10 iterations its steps end away from their roots, so
    the verdict reads the rollouts' differences, the same numbers, and warns (here the
    tangents part from them by only 1 %; on stiffer bodies they put the hidden values outside
    the ranges, ``verdict_jacobian``); at 40 the steps converge and the verdict keeps the
    tangents (measured within 5.5e-3 of the float32 differences), with no warning. A fit
    left at "auto" keeps its own Jacobian."""
    sim = dropped_block()
    frames = [7, 13, 19]
    truth = sim.settings.replace(iterations=iterations)
    targets = SoftBodySimulator(sim.mesh, truth).rollout(19, frames).numpy()
    problem = stiffness_problem(sim.mesh, truth, frames, targets)
    values = {"young_modulus": 3e4, "damping": 0.015}
    spec = parameter_spec(problem)

    def objective(jacobian: str) -> FitObjective:
        return FitObjective(
            problem, FitSettings(precision="float32", jacobian=jacobian), spec.names, spec=spec
        )

    told = objective("tangents")
    tangents = log_jacobian_of(told, values)
    assert told.jacobian_used == "tangents"
    differences = log_jacobian_of(objective("differences"), values)
    checked, warning = verdict_jacobian(told, values)
    if iterations == 10:
        np.testing.assert_array_equal(checked, differences)
        assert warning is not None and "central differences" in warning
    else:
        parted = np.abs(tangents - differences).max(axis=0) / np.abs(differences).max(axis=0)
        assert parted.max() < 1e-2
        np.testing.assert_allclose(checked, tangents, rtol=1e-6, atol=1e-6 * np.abs(tangents).max())
        assert warning is None
    auto = objective("auto")
    log_jacobian_of(auto, values)
    assert verdict_jacobian(auto, values) == (None, None)
    result = fit_from_off(sim.mesh, truth, frames, targets, jacobian="tangents")
    assert result.jacobian == "tangents"
    assert (warning in result.warnings) if warning else not any("tangents" in w for w in result.warnings)
