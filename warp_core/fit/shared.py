"""One material for several objects: a shared fit.

Several pieces of the same fabric (a swatch hanging, the same swatch falling) each pin down
part of the material; one objective that sums their residuals pins down what no single one
does. Each object keeps its own mesh, pins, targets and unfitted settings; the fitted
parameters are one set for all. The residuals are stacked, so the joint loss is the sum of
the members' losses and the optimizers, the global phase and the outcome rules work on it
unchanged (:func:`.stages.run_objective`).

Every member must match its own targets for the shared fit to be called converged: a
pooled RMSE could hide one object that the shared values do not fit.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import one_line
from ..targets.units import METRES
from .objective.objective import FitObjective
from .problem.problem import FitError, FitProblem
from .problem.settings import FitSettings
from .problem.spec import parameter_spec
from .progress import ProgressListener, Reporter
from .stages import run_objective
from .verdict.identifiability import identifiability
from .verdict.outcome import fit_scales, rounding_check
from .verdict.report import format_mm
from .verdict.result import FitResult

__all__ = ["JointObjective", "SharedFitResult", "fit_shared"]


class JointObjective:
    """The members' objectives as one: residuals and Jacobian rows stacked member by member,
    losses and gradients summed. Has the methods the optimizers and the result use."""

    def __init__(self, members: list[FitObjective]) -> None:
        kinds = sorted({m.target.name for m in members})
        if len(kinds) > 1:
            raise ValueError(f"a shared fit needs one loss for every object, got {' and '.join(kinds)}")
        refusal = members[0].target.shared_refusal
        if refusal is not None:
            raise ValueError(refusal)
        self.members = members
        self.unit = METRES
        self.spec = members[0].spec
        self.tangent_step = members[0].tangent_step
        self.last_jacobian: tuple[tuple, np.ndarray] | None = None

    def tape_gradient_refusal(self) -> str | None:
        """The first member's reason to have no tape gradient (None where every member has one)."""
        return next((r for m in self.members if (r := m.tape_gradient_refusal()) is not None), None)

    @property
    def n_forward(self) -> int:
        return sum(m.n_forward for m in self.members)

    @property
    def n_backward(self) -> int:
        return sum(m.n_backward for m in self.members)

    @property
    def n_smoothed(self) -> int:
        return sum(m.n_smoothed for m in self.members)

    @property
    def jacobian_used(self) -> str | None:
        return next((m.jacobian_used for m in self.members if m.jacobian_used is not None), None)

    @property
    def gradient_residual(self) -> float:
        return max(m.gradient_residual for m in self.members)

    @property
    def device(self) -> str:
        return self.members[0].device

    def positions(self, values: dict[str, float], frozen: Any = None) -> tuple[np.ndarray, None]:
        """Every member's rollout at the target frames, as one (points, 3) array."""
        return np.concatenate([m.positions(values)[0].reshape(-1, 3) for m in self.members]), None

    def residuals(self, values: dict[str, float]) -> np.ndarray:
        return np.concatenate([m.residuals(values) for m in self.members])

    def change(self, x0: np.ndarray, x1: np.ndarray) -> float:
        """RMS distance (metres) between two joint rollouts."""
        return float(np.sqrt(np.mean(np.sum((x1 - x0) ** 2, axis=-1))))

    def log_jacobian(self, values: dict[str, float]) -> np.ndarray:
        jac = np.vstack([m.log_jacobian(values) for m in self.members])
        self.last_jacobian = (tuple(sorted(values.items())), jac)
        return jac

    def gradient(self, values: dict[str, float]) -> tuple[float, dict[str, float]]:
        total, grad = 0.0, dict.fromkeys(self.members[0].names, 0.0)
        for m in self.members:
            loss, g = m.gradient(values)
            total += loss
            for name, v in g.items():
                grad[name] += v
        return total, grad

    def member_rows(self, values: dict[str, float]) -> list[slice]:
        """Which residual rows belong to which member (the surface loss's count is fixed by
        the meshes, the vertex loss's by the targets)."""
        rows, start = [], 0
        for m in self.members:
            n = len(m.residuals(values))
            rows.append(slice(start, start + n))
            start += n
        return rows

    def errors(self, values: dict[str, float]) -> dict[int, np.ndarray]:
        """Per-vertex distances of every member's target frames, numbered 0, 1, ... member by
        member (frames of different objects may coincide, so they are not keys here)."""
        out: dict[int, np.ndarray] = {}
        for m in self.members:
            for e in m.errors(values).values():
                out[len(out)] = e
        return out

    def _pooled(self, per_member: list[float]) -> float:
        weights = [m.matched_points() for m in self.members]
        return math.sqrt(sum(w * v * v for w, v in zip(weights, per_member, strict=True)) / sum(weights))

    def rmse(self, values: dict[str, float]) -> float:
        """The RMSE the joint loss stands for: 0.5 * matched_points * RMSE^2 over all members."""
        return self._pooled([m.rmse(values) for m in self.members])

    def motion(self) -> float:
        return self._pooled([m.motion() for m in self.members])

    def rounding_gap(self, values: dict[str, float]) -> float | None:
        gaps = [m.rounding_gap(values) for m in self.members]
        return None if any(g is None for g in gaps) else self._pooled(gaps)

    def coordinate_scale(self) -> float:
        return max(m.coordinate_scale() for m in self.members)

    def matched_points(self) -> int:
        return sum(m.matched_points() for m in self.members)

    def rmse_of_loss(self, loss: float) -> float:
        """The pooled RMSE a joint loss stands for (see :meth:`rmse`): the members' kind maps a
        loss to an RMSE over its points, here over all the members' points."""
        if not (loss >= 0.0 and math.isfinite(loss)):
            return math.nan
        return math.sqrt(2.0 * loss / max(self.matched_points(), 1))

    def residual_scale(self) -> np.ndarray:
        values = self.spec.initial_values() if self.spec is not None else {}
        rows = self.member_rows(values)
        return np.concatenate(
            [
                np.broadcast_to(np.asarray(m.residual_scale(), dtype=np.float64), (r.stop - r.start,))
                for m, r in zip(self.members, rows, strict=True)
            ]
        )


@dataclass
class SharedFitResult:
    """A shared fit: the joint result (one parameter set, judged on every object) and each
    member's match at those values, in the order the problems were given."""

    joint: FitResult
    members: list[FitResult]
    # per member: the fitted parameters that its targets alone would leave undetermined
    undetermined_alone: list[list[str]] = field(default_factory=list)
    # parameters determined by the objects together but undetermined for at least one alone
    determined_jointly: list[str] = field(default_factory=list)

    @property
    def cancelled(self) -> bool:
        return self.joint.cancelled

    def summary(self, names: list[str]) -> dict[str, Any]:
        """JSON-ready: the joint result with the objects it covers and what each determines."""
        return {
            **self.joint.summary(),
            "objects": list(names),
            "undetermined_alone": {n: list(u) for n, u in zip(names, self.undetermined_alone, strict=True)},
            "determined_jointly": list(self.determined_jointly),
            "member_outcomes": {n: m.outcome for n, m in zip(names, self.members, strict=True)},
            "member_rmse_m": {n: m.rmse for n, m in zip(names, self.members, strict=True)},
        }


def fit_shared(
    problems: list[FitProblem],
    settings: FitSettings | None = None,
    progress: Callable[[int, float, dict[str, float]], None] | ProgressListener | None = None,
    cancel: Any = None,
    names: list[str] | None = None,
) -> SharedFitResult:
    """Fit one set of ``problems[0].free_parameters`` values to every problem's targets at once.

    The problems must use the same model, fitted parameters and ties; each keeps its own
    mesh, pins, targets and unfitted settings. The fit starts from the first problem's
    values; the others' start values, where they differ, are tried by the global phase.
    ``names`` (one per problem) name the objects in messages; ``progress`` hears the fit as
    :func:`~.engine.fit`'s does, its RMSE pooled over the objects. Raises FitError when the
    problems cannot be fitted together.
    """
    settings = settings or FitSettings()
    names = names or [f"object {k + 1}" for k in range(len(problems))]
    if len(problems) < 2:
        raise FitError("a shared fit needs at least two objects")
    if len(names) != len(problems):
        raise ValueError("one name per problem")
    mapped = [name for name, p in zip(names, problems, strict=True) if p.maps]
    if mapped:
        raise FitError(
            f"{', '.join(mapped)} fit a weight map, which belongs to one object's mesh: fit "
            "each object on its own, or a shared material without maps"
        )
    t0 = time.perf_counter()
    first = problems[0]
    report = Reporter(progress, t0, (first.model, settings.precision, str(settings.device)))
    try:
        for name, p in zip(names, problems, strict=True):
            _check_compatible(name, p, names[0], first)
            p.validate()
        spec = parameter_spec(first)
        report.preparing()
        members = [FitObjective(p, settings, spec.names, spec=spec) for p in problems]
        kinds = {name: m.target.name for name, m in zip(names, members, strict=True)}
        if len(set(kinds.values())) > 1:
            by_kind = "; ".join(
                f"{k}: {', '.join(n for n in names if kinds[n] == k)}" for k in sorted(set(kinds.values()))
            )
            raise ValueError(
                f"a shared fit needs one loss for every object ({by_kind}): set the same Loss on each"
            )
        joint = JointObjective(members)
    except ValueError as e:
        raise FitError(one_line(e)) from e
    report.measure(joint.unit, joint.rmse_of_loss)
    starts = [dict(s) for s in settings.extra_starts]
    for p in problems[1:]:
        start = p.model_settings.values()
        other = {n: float(start[n]) for n in spec.free_names}
        if other != {n: spec.initial[n] for n in spec.free_names} and other not in starts:
            starts.append(other)
    run_settings = dataclasses.replace(settings, extra_starts=starts)
    try:
        result = run_objective(first, spec, joint, run_settings, report, cancel, t0)
    except FitError:
        raise
    except Exception as e:  # the contract of fit(): nothing but FitError leaves
        raise FitError(f"the shared fit stopped on an unexpected error: {one_line(e)}") from e
    if result.outcome == "failed":
        return SharedFitResult(result, [result] * len(problems), [[] for _ in problems], [])
    return _assemble(problems, names, spec, joint, settings, result)


def _check_compatible(name: str, problem: FitProblem, first_name: str, first: FitProblem) -> None:
    if problem.model != first.model:
        raise ValueError(f"{name} uses the {problem.model} model, {first_name} {first.model}: one model only")
    if list(problem.free_parameters) != list(first.free_parameters) or dict(problem.ties) != dict(first.ties):
        raise ValueError(
            f"{name} fits {', '.join(problem.free_parameters) or 'nothing'}, "
            f"{first_name} {', '.join(first.free_parameters)}: "
            "a shared fit needs the same fitted parameters and ties on every object"
        )


def _assemble(
    problems: list[FitProblem],
    names: list[str],
    spec: Any,
    joint: JointObjective,
    settings: FitSettings,
    result: FitResult,
) -> SharedFitResult:
    """Each member's match at the shared values, what each alone would leave undetermined,
    and the joint outcome (converged only if every member is matched)."""
    values = dict(result.params)
    key = tuple(sorted(values.items()))
    jac = None
    if joint.last_jacobian is not None and joint.last_jacobian[0] == key:
        jac = joint.last_jacobian[1]
    else:
        try:
            jac = joint.log_jacobian(values)
        except (FloatingPointError, ValueError):
            jac = None
    rows = joint.member_rows(values)
    members, alone = [], []
    for name, problem, m, r in zip(names, problems, joint.members, rows, strict=True):
        scales = fit_scales(
            m.motion(),
            m.coordinate_scale(),
            settings.precision,
            settings.tolerance_m,
            settings.rmse_tolerance_m,
        )
        undetermined = []
        if jac is not None:
            ident = identifiability(
                jac[r], spec.free_names, values, m.residual_scale(), threshold=scales.report
            )
            undetermined = [e["name"] for e in ident if not e["determined"]]
        alone.append(undetermined)
        members.append(_member_result(name, problem, m, values, result, scales.tolerance))
    determined_jointly = [
        n for n in spec.free_names if n not in result.undetermined and any(n in u for u in alone)
    ]
    unmatched = [(n, m) for n, m in zip(names, members, strict=True) if m.outcome != "converged"]
    if result.outcome == "converged" and unmatched and not result.cancelled:
        result.outcome = "misfit"
        result.outcome_reason = "; ".join(m.outcome_reason for _, m in unmatched)
    return SharedFitResult(result, members, alone, determined_jointly)


def _member_result(
    name: str,
    problem: FitProblem,
    m: FitObjective,
    values: dict[str, float],
    joint: FitResult,
    tolerance_m: float,
) -> FitResult:
    """One object's match at the shared values: its own errors, RMSE and outcome."""
    initial = dict(joint.initial_params)
    try:
        initial_rmse = m.rmse(initial)
        initial_loss = 0.5 * float(np.sum(m.residuals(initial) ** 2))
    except (FloatingPointError, ValueError):
        initial_rmse, initial_loss = None, float("nan")
    errors = m.errors(values)
    rmse = m.rmse(values)
    outcome, reason = joint.outcome, joint.outcome_reason
    rounding = rounding_check(rmse, m.rounding_gap(values), tolerance_m) if rmse <= tolerance_m else None
    if rmse <= tolerance_m and not joint.cancelled and rounding is None:
        outcome, reason = "converged", f"{name} is matched to {format_mm(rmse)} RMSE"
    elif rounding is not None:
        outcome, reason = "misfit", f"{name}: {rounding}"
    elif outcome == "converged":
        outcome = "misfit"
        reason = (
            f"{name} is not matched by the shared values: RMSE {format_mm(rmse)} (tolerance "
            f"{format_mm(tolerance_m)}) while the objects together are; they may not share one "
            "material, or differ in a setting that is not fitted"
        )
    motion = m.motion()
    return dataclasses.replace(
        joint,
        model_settings=problem.model_settings.replace(**values),
        initial_loss=initial_loss,
        final_loss=0.5 * float(np.sum(m.residuals(values) ** 2)),
        per_vertex_error=errors,
        rmse=rmse,
        max_error=float(np.concatenate(list(errors.values())).max()),
        initial_rmse=initial_rmse,
        n_forward=m.n_forward,
        n_backward=m.n_backward,
        warnings=list(joint.warnings),
        outcome=outcome,
        outcome_reason=reason,
        motion=motion,
        rmse_relative=rmse / motion if motion > 0.0 else None,
        tolerance=tolerance_m,
    )
