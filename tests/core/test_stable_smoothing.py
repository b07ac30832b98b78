"""The stable gradient's smoothing (``tangents.smoothed_where_chaotic``): where the tape
claims a tangent step moves the cloth by more than a fraction of its whole motion, the
entry becomes the loss's central difference over that step, frozen CG counts, the step
taken by a free parameter and its tied followers together."""

from __future__ import annotations

import math

import numpy as np
import pytest

from warp_core import ClothParams, ClothSimulator, grid_mesh
from warp_core.fit import FitProblem, FitSettings, Target
from warp_core.fit.objective import tangents as tangents_module
from warp_core.fit.objective.objective import FitObjective
from warp_core.fit.problem.spec import parameter_spec

TRUTH = ClothParams(tension_stiffness=40.0, compression_stiffness=40.0, bending_stiffness=2.0, quality=3)
FRAMES = [6, 12]


def _objective() -> tuple[FitObjective, dict[str, float]]:
    """A 6 x 6 sheet pinned along its top edge, tension tied to compression, bending free;
    the start (15, 0.5) is off the truth (40, 2)."""
    mesh = grid_mesh(6, 6, 1.0, 1.0)
    y = mesh.vertices[:, 1]
    mesh.pin_weights = (y >= y.max() - 1e-9).astype(float)
    targets = ClothSimulator(mesh, TRUTH, precision="float64").simulate(max(FRAMES), FRAMES)
    start = TRUTH.replace(tension_stiffness=15.0, compression_stiffness=15.0, bending_stiffness=0.5)
    problem = FitProblem(
        mesh,
        start,
        [Target(f, targets[k]) for k, f in enumerate(FRAMES)],
        free_parameters=["tension_stiffness", "bending_stiffness"],
        ties={"compression_stiffness": "tension_stiffness"},
    )
    spec = parameter_spec(problem)
    return FitObjective(problem, FitSettings(), spec.names, spec=spec), spec.initial_values()


def _loss(objective: FitObjective, values: dict[str, float], frozen: np.ndarray) -> float:
    x, _ = objective.positions(values, frozen=frozen)
    r = objective.residuals_at(x)
    return 0.5 * float(r @ r)


def test_a_smooth_scene_keeps_the_tape_gradient() -> None:
    objective, values = _objective()
    loss, stable = objective.gradient(values, kind="stable")
    assert objective.n_smoothed == 0 and objective.smoothed_last == ()
    # the same as the tape alone: the model's stable reverse, no rollout added
    forwards = objective.n_forward
    _, again = objective.gradient(values, kind="stable")
    assert again == stable and objective.n_forward == forwards + 1
    # and it is the slope: d loss / d log value within 5 % of the +-1 % central difference
    # (measured: 2.7 % for tension, whose +-1 % step is not infinitesimal)
    _, frozen = objective.positions(values)
    for group in (["tension_stiffness", "compression_stiffness"], ["bending_stiffness"]):
        sides = [
            _loss(objective, objective.moved(values, group, math.log(values[group[0]]) + s), frozen)
            for s in (0.01, -0.01)
        ]
        slope = (sides[0] - sides[1]) / 0.02
        tape = sum(stable[n] * values[n] for n in group)
        assert tape == pytest.approx(slope, rel=0.05), group
    assert loss > 0.0


def test_entries_the_tape_overstates_become_the_loss_slope_over_the_tangent_step(monkeypatch) -> None:
    # a fraction of 0 treats every entry as overstated: each free parameter's entry is then
    # the central difference of the loss over +-1 % of its log value, its follower moved
    # with it, the CG counts of the base rollout repeated; the follower's entry is 0
    monkeypatch.setattr(tangents_module, "CHAOS_FRACTION", 0.0)
    objective, values = _objective()
    forwards = objective.n_forward
    loss, smoothed = objective.gradient(values, kind="stable")
    assert objective.n_smoothed == 2 and objective.n_forward == forwards + 1 + 4
    assert objective.smoothed_last == ("tension_stiffness", "bending_stiffness")
    _, frozen = objective.positions(values)
    for group in (["tension_stiffness", "compression_stiffness"], ["bending_stiffness"]):
        z = math.log(values[group[0]])
        up = _loss(objective, objective.moved(values, group, z + 0.01), frozen)
        down = _loss(objective, objective.moved(values, group, z - 0.01), frozen)
        slope = (up - down) / ((z + 0.01) - (z - 0.01))
        assert smoothed[group[0]] * values[group[0]] == pytest.approx(slope, rel=1e-12), group
    assert smoothed["compression_stiffness"] == 0.0
    # the exact and implicit kinds are never smoothed
    _, exact = objective.gradient(values, kind="exact")
    assert objective.n_smoothed == 2 and exact["compression_stiffness"] != 0.0
    assert loss > 0.0


def test_the_motion_norm_is_the_residual_of_the_cloth_at_rest() -> None:
    objective, _ = _objective()
    rest = objective.problem.mesh.vertices
    expected = math.sqrt(sum(float(np.sum((t.positions - rest) ** 2)) for t in objective.problem.targets))
    assert objective.motion_norm() == pytest.approx(expected, rel=1e-12)
