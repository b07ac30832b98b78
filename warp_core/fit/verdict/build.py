"""Assembling a :class:`~.result.FitResult` from the optimizer's runs: errors, the
identifiability report, parameters at their bounds, and the outcome."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from ...models.base import ModelSettings, within_bounds
from ..objective.objective import FitObjective
from ..objective.tangent_columns import verdict_jacobian
from ..optimizers.base import EVALUATION_ERRORS, Counter, eval_jacobian
from ..optimizers.global_search import SearchResult
from ..problem.problem import FitProblem
from ..problem.spec import ParameterSpec, fit_parameters
from ..progress import PhaseReporter
from .identifiability import add_confidence_ranges, identifiability
from .outcome import NOISE_SLACK, FitScales, classify, contact_check, failed_reason, rounding_check
from .result import FitResult
from .sensitivity import start_gap

__all__ = ["build_result", "failed_result", "start_warnings"]

# A value within this fraction of a bound (the trust region's resolution) counts as on it.
_ON_BOUND = 1e-4
# A fit that does not match is probed twice: all free values nudged by NUDGES (relative).
# A smooth simulation moves about 1000 times more for the larger nudge; one that moves less
# than SMOOTH_RATIO times more is rough (chaotic, or switching discrete choices) at the
# scale of the nudges, and when that roughness reaches ROUGH_SHARE of the remaining error
# the reason says so.
NUDGES = (1e-6, 1e-3)
SMOOTH_RATIO = 100.0
ROUGH_SHARE = 0.01
# above this, a backward pass's solver steps were too far from the converged steps its
# gradient assumes for the gradient to be the rollout's (the soft body at its default VBD
# iterations: below 1e-3, 56 of 56 entries agreed with central differences in sign and
# within 2x; above 0.1, 84 % in sign, 60 % within 2x; bench/soft_body_gradients.py)
GRADIENT_RESIDUAL_WARNING = 1e-2


def build_result(
    problem: FitProblem,
    spec: ParameterSpec,
    objective: FitObjective,
    optimizer: str,
    scales: FitScales,
    found: SearchResult,
    t0: float,
    progress: PhaseReporter | None = None,
) -> FitResult:
    """The result of a fit that produced values; ``progress`` hears its rounding check and
    contact probe begin."""
    result = found.result
    values = {k: float(v) for k, v in result.values.items()}
    initial = spec.initial_values()
    warnings = start_warnings(problem, spec) + list(result.warnings)
    # one object's target; a shared fit's joint objective stands for several, all exact
    target = objective.target if isinstance(objective, FitObjective) else None
    noisy = target is not None and target.noise_spread is not None
    jac = result.jacobian
    # out of time: no more simulations for the verdict (it says what it can without them)
    spent = result.stop_reason == "time_budget"
    if isinstance(objective, FitObjective) and not spent:
        jac, note = _checked_jacobian(objective, values, jac)
        warnings += [note] if note else []
    if jac is None and not spent:
        jac = eval_jacobian(objective, spec, values, Counter())
    ident = []
    if jac is not None:
        scale = objective.residual_scale()
        points = objective.matched_points()
        tolerance_norm = math.sqrt(points) * scales.tolerance
        noise = None
        if noisy:
            # noisy targets: what is left at the optimum is their noise; the matched range is
            # what the tolerance leaves above it
            residuals = objective.residuals(values)
            residual_norm = float(np.linalg.norm(residuals))
            tolerance_norm = math.sqrt(max(tolerance_norm**2 - residual_norm**2, 0.0))
            # each profiled binding took two degrees of freedom: the noise is larger than the
            # residual per entry says
            free = len(residuals) - jac.shape[1]
            kept = max(free - 2 * target.profiled_count, 1)
            noise = (residual_norm * math.sqrt(max(free, 1) / kept), target.noise_spread)
        ident = identifiability(
            jac,
            spec.free_names,
            values,
            scale,
            threshold=scales.report,
            tolerance_norm=tolerance_norm,
            unit=scales.unit,
        )
        if noise is not None:
            modes = target.systematic_modes(objective.positions(values)[0])
            add_confidence_ranges(jac, ident, *noise, systematic=modes)
            _check_range_ends(objective, spec, values, ident, 0.5 * residual_norm**2)
    for entry in ident:
        warnings += entry["warnings"]
    undetermined = [e["name"] for e in ident if not e["determined"]]
    at_bounds, bound_warnings = _at_bounds(problem, spec, values)
    warnings += bound_warnings
    if target is not None and target.reports_tracks:
        warnings += target.track_warnings(objective.positions(values)[0])
    try:
        initial_rmse = objective.rmse(initial)
    except (FloatingPointError, ValueError):
        initial_rmse = None
    errors = objective.errors(values)
    all_errors = np.concatenate(list(errors.values()))
    rmse = objective.rmse(values)
    # a first-order run (Adam, L-BFGS) cannot tell an optimum from a stall but by a zero
    # gradient; one the trust region finished can, as Levenberg-Marquardt
    by_trust_region = optimizer == "lm" or result.finished_by == "trust_region"
    stationary = result.stationary if by_trust_region else result.stop_reason == "converged_gradient"
    outcome, reason = classify(rmse, scales, result.stop_reason, stationary, undetermined)
    rounding_gap = None
    if outcome == "converged":
        _phase(progress, "rounding")
        rounding_gap = objective.rounding_gap(values)
    rounding = rounding_check(rmse, rounding_gap, scales.tolerance, scales.unit)
    # a shared fit (several objects) is not probed
    probe = outcome == "converged" and target is not None
    if probe and objective.sim.contact_probe:
        _phase(progress, "contacts")
    gap = start_gap(objective, values) if probe else None
    contact = contact_check(rmse, gap, scales.tolerance, scales.unit)
    if rounding is not None or contact is not None:
        outcome, reason = "misfit", rounding or contact
        warnings.extend(w for w in (rounding, contact) if w is not None)
    elif outcome != "converged" and not spent:
        rough = _roughness(objective, spec, values)
        if rough is not None and rough >= ROUGH_SHARE * rmse:
            note = (
                f"the simulation is not smooth at this scale: a {NUDGES[0]:g} relative change of the "
                f"parameters already moves it by up to {scales.format(rough)} RMS, so the fitted values "
                "are uncertain and no values may match much closer"
            )
            reason += f"; {note}"
            warnings.append(note)
    if outcome != "converged" and objective.gradient_residual > GRADIENT_RESIDUAL_WARNING:
        warnings.append(
            f"the gradient assumes converged solver steps, and the steps were up to "
            f"{objective.gradient_residual:.2g} of their forces from converged, so it may not point "
            "downhill: raise the solver's iterations, or fit with Levenberg-Marquardt"
        )
    settings, maps = fitted_settings(problem, values)
    layout = problem.map_layout()
    matched = {e["name"]: e["matched_range"] for e in ident if e.get("matched_range") is not None}
    start = problem.model_settings.values()
    map_report = layout.report(values, start, undetermined, matched) if layout else {}
    return FitResult(
        params=values,
        initial_params=initial,
        model_settings=settings,
        maps=maps,
        map_report=map_report,
        loss_history=[float(v) for v in found.losses],
        initial_loss=float(found.losses[0]),
        final_loss=float(result.best_loss),
        per_vertex_error=errors,
        rmse=rmse,
        max_error=float(all_errors.max()),
        initial_rmse=initial_rmse,
        iterations=found.iterations,
        n_forward=objective.n_forward,
        n_backward=objective.n_backward,
        n_smoothed=objective.n_smoothed,
        jacobian=objective.jacobian_used,
        seconds=time.perf_counter() - t0,
        device=objective.device,
        optimizer=optimizer,
        stop_reason=result.stop_reason,
        cancelled=result.cancelled,
        identifiability=ident,
        warnings=warnings,
        outcome=outcome,
        outcome_reason=reason,
        motion=scales.motion,
        rmse_relative=rmse / scales.motion if scales.motion > 0.0 else None,
        tolerance=scales.tolerance,
        undetermined=undetermined,
        at_bounds=at_bounds,
        search=_search_summary(found),
        rounding_gap=rounding_gap,
        start_gap=gap,
        unit=scales.unit.symbol,
        track_errors=objective.track_errors(values) if target is not None else {},
        track_bindings=objective.track_bindings(values) if target is not None else {},
        noise_rmse=scales.jitter / NOISE_SLACK if scales.jitter is not None else None,
        contacts=objective.contacts(values) if target is not None else None,
    )


def _phase(progress: PhaseReporter | None, name: str) -> None:
    if progress is not None:
        progress.phase(name)


def fitted_settings(
    problem: FitProblem, values: dict[str, float]
) -> tuple[ModelSettings, dict[str, np.ndarray]]:
    """The model's settings with ``values`` applied, and kind -> the weights of each fitted
    map (the map's range from its smallest to its largest value: ``MapLayout.split``)."""
    layout = problem.map_layout()
    if layout is None:
        return problem.model_settings.replace(**values), {}
    model_values, maps = layout.split(values, problem.model_settings.values(), exact=True)
    return problem.model_settings.replace(**model_values), maps


def _checked_jacobian(
    objective: FitObjective, values: dict[str, float], jac: np.ndarray | None
) -> tuple[np.ndarray | None, str | None]:
    # ``tangent_columns.verdict_jacobian`` where it has one, else ``jac``
    try:
        checked, note = verdict_jacobian(objective, values)
    except EVALUATION_ERRORS:
        return jac, None
    return (jac if checked is None else checked), note


def failed_result(
    problem: FitProblem,
    spec: ParameterSpec,
    objective: FitObjective,
    optimizer: str,
    scales: FitScales,
    error: str,
    t0: float,
) -> FitResult:
    """The result of a fit that could simulate no start point: the start values, no errors."""
    initial = spec.initial_values()
    nan = float("nan")
    return FitResult(
        params=dict(initial),
        initial_params=initial,
        model_settings=fitted_settings(problem, initial)[0],
        loss_history=[],
        initial_loss=nan,
        final_loss=nan,
        per_vertex_error={},
        rmse=nan,
        max_error=nan,
        initial_rmse=None,
        iterations=0,
        n_forward=objective.n_forward,
        n_backward=objective.n_backward,
        seconds=time.perf_counter() - t0,
        device=objective.device,
        optimizer=optimizer,
        stop_reason="diverged",
        cancelled=False,
        identifiability=[],
        warnings=start_warnings(problem, spec) + [error],
        outcome="failed",
        outcome_reason=failed_reason(error),
        motion=scales.motion,
        rmse_relative=None,
        tolerance=scales.tolerance,
        unit=scales.unit.symbol,
    )


def _roughness(objective: FitObjective, spec: ParameterSpec, values: dict[str, float]) -> float | None:
    """The larger RMS change of the rollout (in the fit's unit) under the two NUDGES if the simulation
    is rough there, else None."""
    z = spec.to_free(values)
    changes = []
    try:
        x0, _ = objective.positions(values)
        for nudge in NUDGES:
            up = z + nudge <= spec.log_upper
            moved = spec.from_free(spec.clip(np.where(up, z + nudge, z - nudge)))
            x1, _ = objective.positions(moved)
            changes.append(objective.change(x0, x1))
    except (FloatingPointError, ValueError):
        return None
    if changes[1] >= SMOOTH_RATIO * changes[0]:
        return None
    return max(changes)


def _check_range_ends(
    objective: FitObjective,
    spec: ParameterSpec,
    values: dict[str, float],
    ident: list[dict[str, Any]],
    loss: float,
) -> None:
    """Noisy targets: a confidence range comes from the slope at the fitted values, which a
    motion that jumps within it (a contact starting, a fold) does not show. Each determined
    parameter is simulated at both ends of its range (its followers with it); where an end
    fits better than the fitted values, the fit has not found the best values within the
    range it claims, and the parameter is not determined."""
    for k, entry in enumerate(ident):
        if not entry["determined"] or "confidence_range" not in entry:
            continue
        name = entry["name"]
        for factor in entry["confidence_range"]:
            moved = objective.moved(values, spec.group(k), math.log(values[name] * factor))
            try:
                r = objective.residuals(moved)
            except EVALUATION_ERRORS:
                continue
            if np.all(np.isfinite(r)) and 0.5 * float(r @ r) < loss:
                entry["determined"] = False
                entry["warnings"].append(
                    f"{name} is not determined: at {moved[name]:.6g}, within its confidence range, "
                    "the targets are matched better than at the fitted value (the motion is not "
                    "smooth there)"
                )
                break
    objective.restore_params()


def _search_summary(found: SearchResult) -> dict[str, object]:
    out: dict[str, object] = {
        "global_phase": found.global_phase,
        "candidates": found.candidates,
        "refined": found.refined,
    }
    if found.result.finished_by is not None:
        out["finished_by"] = found.result.finished_by
    return out


def start_warnings(problem: FitProblem, spec: ParameterSpec) -> list[str]:
    """A start value outside the fit's bounds is moved onto the bound: say so."""
    out = []
    for k, name in enumerate(spec.free_names):
        v = float(spec.initial[name])
        lo, hi = float(spec.value_lower[k]), float(spec.value_upper[k])
        if not within_bounds(v, (lo, hi)):  # a bound read back from Blender's float32 is on it
            moved = lo if v < lo else hi
            out.append(
                f"the start value {name}={v:.6g} is outside the fit's range [{lo:.6g}, {hi:.6g}]; "
                f"the fit started from {moved:.6g}"
            )
    return out


def _at_bounds(
    problem: FitProblem, spec: ParameterSpec, values: dict[str, float]
) -> tuple[dict[str, str], list[str]]:
    """Free parameters that ended on a bound, and a warning for each."""
    hard = {name: p.bounds for name, p in fit_parameters(problem).items()}
    at: dict[str, str] = {}
    warnings = []
    z = spec.to_free(values)
    for k, name in enumerate(spec.free_names):
        v = values[name]
        if z[k] <= spec.log_lower[k] + _ON_BOUND:
            at[name] = "lower"
            floor = hard[name][0] <= 0.0 and name not in problem.bounds
            what = (
                f"the fit's floor {v:.6g} (the model allows down to 0)"
                if floor
                else f"its lower limit {v:.6g}"
            )
            warnings.append(f"{name} ended at {what}: the targets may want it lower than the fit allows")
        elif z[k] >= spec.log_upper[k] - _ON_BOUND:
            at[name] = "upper"
            warnings.append(
                f"{name} ended at its upper limit {v:.6g}: the targets may want it higher than allowed"
            )
    return at, warnings
