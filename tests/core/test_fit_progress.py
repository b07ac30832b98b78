"""A running fit's progress: its phases in order, the global search's starts k of n, and an RMSE
in the target's unit that is the one its loss stands for."""

from __future__ import annotations

import math

import pytest
from test_fit import clamped_sheet, synthetic_problem
from test_tracks_fit import footage, hanging_sheet

from warp_core import ClothParams
from warp_core.fit import PHASES, FitProblem, FitProgress, FitSettings, fit, fit_shared, listener
from warp_core.fit.progress import COMPILE_S
from warp_core.targets import METRES, PIXELS

NAMES = ["tension_stiffness", "bending_stiffness"]


def phase_order(reports: list[FitProgress]) -> list[str]:
    """The phases as they followed one another (repeats of one phase merged)."""
    order: list[str] = []
    for r in reports:
        if not order or order[-1] != r.phase:
            order.append(r.phase)
    return order


def without_compiling(order: list[str], reports: list[FitProgress]) -> list[str]:
    """The order after its "compiling" phase, which only the process's first simulation of a
    model in one precision says (earlier tests may have simulated it): first, once, with the
    time it may take."""
    compiling = [r for r in reports if r.phase == "compiling"]
    assert len(compiling) <= 1
    if compiling:
        assert order[0] == "compiling" and compiling[0].expected_s == COMPILE_S
        assert math.isnan(compiling[0].rmse)  # nothing simulated yet
        return order[1:]
    return order


def test_a_fit_says_its_phases_and_the_rmse_its_loss_stands_for() -> None:
    problem = synthetic_problem(
        clamped_sheet(8), ClothParams(tension_stiffness=40.0, bending_stiffness=2.0), NAMES, [6, 12]
    )
    reports: list[FitProgress] = []
    result = fit(problem, FitSettings(), progress=listener(reports.append))
    assert result.outcome == "converged", result.outcome_reason
    order = phase_order(reports)
    assert set(order) <= set(PHASES)
    # an easy fit: the start, its local refinement, the verdict's rounding check (no colliders:
    # no contact probe, no global search)
    assert without_compiling(order, reports) == ["start", "refinement", "rounding"]

    accepted = [r for r in reports if r.accepted]
    assert [r.iteration for r in accepted] == list(range(result.iterations + 1))
    assert [r.loss for r in accepted] == result.loss_history
    assert accepted[0].phase == "start" and {r.phase for r in accepted[1:]} == {"refinement"}
    # the RMSE of each point in metres: loss = 0.5 * (vertices x target frames) * RMSE^2
    points = problem.mesh.vertex_count * len(problem.targets)
    for r in accepted:
        assert r.unit is METRES
        assert r.rmse == pytest.approx(math.sqrt(2.0 * r.loss / points), rel=1e-12)
    # ... the fit's own RMSE at the start values and at the end (its best point)
    assert accepted[0].rmse == pytest.approx(result.initial_rmse, rel=1e-9)
    assert min(r.rmse for r in accepted) == pytest.approx(result.rmse, rel=1e-9)
    # a phase change repeats the latest point; the rounding check comes after the last one
    (rounding,) = [r for r in reports if r.phase == "rounding"]
    assert not rounding.accepted and rounding.iteration == result.iterations
    assert rounding.rmse == accepted[-1].rmse and rounding.expected_s in (None, COMPILE_S)
    seconds = [r.seconds for r in reports]
    assert seconds == sorted(seconds) and 0.0 <= seconds[0] and seconds[-1] <= result.seconds

    # the kernels are built now: the next fit says nothing of them; a plain callback hears
    # the same points as before, numbered the same
    again: list[FitProgress] = []
    plain: list[tuple[int, float]] = []
    fit(problem, FitSettings(), progress=listener(again.append))
    fit(problem, FitSettings(), progress=lambda k, loss, values: plain.append((k, loss)))
    assert phase_order(again) == ["start", "refinement", "rounding"]
    assert again[-1].expected_s is None  # nor of the rounding check's
    assert plain == [(r.iteration, r.loss) for r in accepted]


def test_the_global_search_counts_its_starts() -> None:
    """Air damping wrong and not fitted: the start's refinement falls short, so the global
    search simulates its space-filling starts (k of n) before refining the best of them."""
    truth = ClothParams(tension_stiffness=40.0, bending_stiffness=2.0, air_damping=3.0)
    problem = synthetic_problem(clamped_sheet(8), truth, NAMES, [6, 12])
    problem.model_settings = problem.model_settings.replace(air_damping=1.0)
    reports: list[FitProgress] = []
    settings = FitSettings(global_points_per_parameter=4, max_iterations=8)
    result = fit(problem, settings, progress=listener(reports.append))
    assert result.search["global_phase"] and result.search["refined"] >= 1
    order = without_compiling(phase_order(reports), reports)
    # no rounding check: the fit did not converge
    assert order == ["start", "refinement", "global", "refinement"]
    starts = [r for r in reports if r.phase == "global"]
    n = result.search["candidates"]
    assert n == 4 * len(NAMES)
    assert {r.phase_count for r in starts} == {n} and not any(r.accepted for r in starts)
    # one report per batch of starts simulated side by side: 1, 1 + width, ... up to n
    ks = [r.phase_index for r in starts]
    width = ks[1] - ks[0] if len(ks) > 1 else n
    assert ks == list(range(1, n + 1, width))
    # while the starts are simulated the RMSE stays the refinement's, which the search keeps
    assert {r.rmse for r in starts} == {starts[0].rmse}
    accepted = [r for r in reports if r.accepted]
    assert starts[0].rmse == accepted[starts[0].iteration].rmse
    assert min(r.rmse for r in accepted) == pytest.approx(result.rmse, rel=1e-9)


def test_a_shared_fit_reports_the_rmse_of_all_its_objects() -> None:
    truth = ClothParams(tension_stiffness=40.0, bending_stiffness=2.0)
    problems = [synthetic_problem(clamped_sheet(8), truth, NAMES, frames) for frames in ([6, 12], [9])]
    reports: list[FitProgress] = []
    shared = fit_shared(problems, FitSettings(), progress=listener(reports.append))
    assert without_compiling(phase_order(reports), reports)[:2] == ["start", "refinement"]
    accepted = [r for r in reports if r.accepted]
    points = sum(p.mesh.vertex_count * len(p.targets) for p in problems)
    for r in accepted:
        assert r.rmse == pytest.approx(math.sqrt(2.0 * r.loss / points), rel=1e-12)
    assert accepted[0].rmse == pytest.approx(shared.joint.initial_rmse, rel=1e-9)
    assert min(r.rmse for r in accepted) == pytest.approx(shared.joint.rmse, rel=1e-9)


def test_a_footage_fit_reports_pixels_and_its_refinement_stage() -> None:
    """Footage: the RMSE in pixels (loss = 0.5 * markers * RMSE^2 while no marker is past the
    Huber threshold), and after the search's verdict the refinement stage, numbered on."""
    mesh = hanging_sheet()
    truth = ClothParams(tension_stiffness=30.0, bending_stiffness=1.0)
    targets, _ = footage(mesh, truth, noise_px=0.5, seed=3)
    start = truth.replace(tension_stiffness=90.0, bending_stiffness=3.0)
    problem = FitProblem(mesh, start, [], free_parameters=NAMES, tracks=targets)
    reports: list[FitProgress] = []
    result = fit(problem, FitSettings(), progress=listener(reports.append))
    assert result.outcome == "converged", result.outcome_reason
    assert {r.unit for r in reports if r.phase != "compiling"} == {PIXELS}
    order = without_compiling(phase_order(reports), reports)
    assert order[:2] == ["start", "refinement"] and order[-2:] == ["refinement", "rounding"]
    accepted = [r for r in reports if r.accepted]
    assert [r.iteration for r in accepted] == sorted(r.iteration for r in accepted)
    assert accepted[-1].iteration == result.iterations
    markers = len(targets.marker_frame)
    final = min(r.rmse for r in accepted)
    assert final == pytest.approx(math.sqrt(2.0 * min(r.loss for r in accepted) / markers), rel=1e-12)
    assert final == pytest.approx(result.rmse, rel=1e-9)
