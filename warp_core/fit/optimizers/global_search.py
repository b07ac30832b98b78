"""A global phase around the local method, kept cheap for easy fits.

The local method is Levenberg-Marquardt's trust region (``lm.trust_region_run``), or L-BFGS
on the tape gradient where there are more parameters than a Jacobian of tangents at every
step affords (``lbfgs.lbfgs_finished_run``: the trust region finishes what it leaves); only
the trust region stops early as "slow" (step 2).

1. The local method runs from the start values first. Most fits end there: matched.
2. Only when that run stops short of the targets (at an optimum that leaves them off, or
   slowly: the loss not halving over three steps) does the global phase run: a small
   space-filling set of start points in log space over each free parameter's plausible
   range (a Latin hypercube of ``per_parameter`` points per parameter, the most spread of a
   few fixed draws) plus any extra starts (e.g. a material preset), one simulation each.
3. The best of them (at most ``refine``, none near a point already refined) are refined
   by the local method, stopping as soon as the targets are matched. After an optimum
   that leaves the targets off, any of them may lead to another valley; after a slow run,
   only starts already better than where it got are worth its budget. A run left for
   being slow is then resumed to the end of the budget; if it ends at an optimum that
   leaves the targets off, the starts passed over get their turn as in the first case.

All runs share one iteration budget, clock and cancel flag (:class:`~.run.Tracker`), so
the phase costs at most ``per_parameter * n`` extra simulations plus the iterations it
takes from the same budget. Where one of them stops the phase before it is done (a
refinement cut short, a start left unrefined), an unmatched result carries that stop: the
best optimum found so far is not the model's best, and the outcome says the fit did not
settle rather than that the model misses the targets. A start that diverges is replaced by the best of the
recovery points and the design (see :func:`~.optimize.start_point`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..problem.spec import ParameterSpec
from .base import (
    OptimizeResult,
    OptimizeSettings,
    ProgressCallback,
    ResidualObjective,
    RunState,
    SideBySideObjective,
    eval_residuals,
    eval_residuals_many,
    start_point,
)
from .lm import trust_region_run
from .run import Tracker

__all__ = ["LocalMethod", "SearchOptions", "SearchResult", "design_points", "search"]

# One local run from a start, sharing the fit's tracker: (objective, spec, settings, tracker,
# start, report_start) -> result. Levenberg-Marquardt's trust region, or L-BFGS on the tape
# gradient (``lbfgs.lbfgs_run``, or ``lbfgs_finished_run`` with the trust region's finish).
LocalMethod = Callable[..., OptimizeResult]

# Two start points closer than this in every log value (a factor of 1.6) lead to the
# same optimum: only one is refined.
_NEAR = 0.5
_DESIGN_DRAWS = 16


@dataclass
class SearchOptions:
    enabled: bool = True
    per_parameter: int = 8
    refine: int = 3
    plausible: dict[str, tuple[float, float]] = field(default_factory=dict)  # by free name
    extra_starts: list[dict[str, float]] = field(default_factory=list)
    matched_loss: float = 0.0  # the loss at which the targets count as matched


@dataclass
class SearchResult:
    result: OptimizeResult  # the best run
    losses: list[float]  # every reported loss, as the progress callback saw them
    iterations: int  # accepted steps over all runs
    global_phase: bool = False
    candidates: int = 0  # global start points simulated
    refined: int = 0  # of them refined by the local method


def design_points(
    spec: ParameterSpec, plausible: dict[str, tuple[float, float]], per_parameter: int
) -> list[np.ndarray]:
    """A centred Latin hypercube in the log of each free parameter's plausible range (within
    its bounds): ``per_parameter`` points per parameter, the draw with the largest
    smallest distance between points among a few from a fixed seed (so fits repeat)."""
    n = spec.n_free
    m = max(2, per_parameter) * n
    lo, hi = np.empty(n), np.empty(n)
    for k, name in enumerate(spec.free_names):
        p_lo, p_hi = plausible.get(name, (np.exp(spec.log_lower[k]), np.exp(spec.log_upper[k])))
        lo[k] = max(np.log(p_lo), spec.log_lower[k])
        hi[k] = min(np.log(p_hi), spec.log_upper[k])
        if not (np.isfinite(lo[k]) and np.isfinite(hi[k]) and lo[k] < hi[k]):
            z0 = spec.initial_free()[k]
            lo[k], hi[k] = z0 - np.log(10.0), z0 + np.log(10.0)
    rng = np.random.default_rng(0)
    best, best_gap = None, -1.0
    for _ in range(_DESIGN_DRAWS):
        u = np.stack([(rng.permutation(m) + 0.5) / m for _ in range(n)], axis=1)
        gap = _smallest_gap(u)
        if gap > best_gap:
            best, best_gap = u, gap
    return [spec.clip(lo + row * (hi - lo)) for row in best]


def _smallest_gap(u: np.ndarray) -> float:
    d = np.abs(u[:, None, :] - u[None, :, :]).max(axis=-1)
    d[np.diag_indices(len(u))] = np.inf
    return float(d.min())


def search(
    objective: ResidualObjective,
    spec: ParameterSpec,
    settings: OptimizeSettings,
    options: SearchOptions,
    progress: ProgressCallback | None = None,
    cancel: Any = None,
    local_method: LocalMethod = trust_region_run,
) -> SearchResult:
    """The local method from the start, then the global phase where it falls short (see
    the module docstring). Raises ``FitDivergedError`` when no start point simulates."""
    tracker = Tracker(settings, progress, cancel)
    design = design_points(spec, options.plausible, options.per_parameter) if options.enabled else []
    design += [_start_vector(spec, start) for start in options.extra_starts]

    def evaluate(values: dict[str, float]) -> np.ndarray | None:
        return eval_residuals(objective, values, tracker.counter)

    z, values, r, warnings = start_point(spec, settings, evaluate, extra=design)
    tracker.warnings += warnings
    local = replace(settings, slow_exit=options.enabled)
    best = local_method(
        objective,
        spec,
        local,
        tracker,
        RunState(z, r, None, settings.trust_radius, values),
        report_start=True,
    )
    out = SearchResult(best, tracker.losses, 0)
    run_state = _Refining(objective, spec, local, tracker, options, out, local_method, refined=[z])
    ranked: list[tuple[float, np.ndarray, np.ndarray]] | None = None
    if options.enabled and _short_of_target(best, options, tracker):
        out.global_phase = True
        run_state.refined.append(best.state.z if best.state is not None else _start_vector(spec, best.values))
        ranked = _ranked(objective, spec, design, run_state.refined, tracker, out)
        tracker.phase("refinement")
        # after a slow run only starts already better than where it got are worth its budget
        run_state.refine(ranked, only_better=not best.stationary)
    while out.result.stop_reason == "slow" and out.result.state is not None:
        out.result = local_method(objective, spec, settings, tracker, out.result.state)
        if ranked is not None and _short_of_target(out.result, options, tracker) and out.result.stationary:
            # the slow run, resumed, ended at an optimum that leaves the targets off: the
            # design starts passed over so far may lead to another valley
            run_state.refine(ranked, only_better=False)
    if run_state.cut and out.result.best_loss > options.matched_loss:
        # cancelled, out of time or out of iterations before the search was done: whatever
        # the best run reached, the fit did not finish (a matched result stands as it is),
        # and its outcome says so rather than call the best optimum so far the model's
        out.result = replace(out.result, stop_reason=run_state.cut, cancelled=run_state.cut == "cancelled")
    out.iterations = tracker.steps
    return out


@dataclass
class _Refining:
    """The local refinement of ranked design starts, shared by both rounds of a search."""

    objective: ResidualObjective
    spec: ParameterSpec
    settings: OptimizeSettings
    tracker: Tracker
    options: SearchOptions
    out: SearchResult
    local_method: LocalMethod
    refined: list[np.ndarray]
    # "cancelled", "time_budget" or "max_iterations" when that cut the phase short: a
    # refinement stopped by it, or a start left unrefined
    cut: str | None = None

    def refine(self, ranked: list[tuple[float, np.ndarray, np.ndarray]], only_better: bool) -> None:
        out, tracker = self.out, self.tracker
        for loss, z_c, r_c in ranked:
            if self.cut or (cut := tracker.interrupted()):
                self.cut = self.cut or cut
                return
            if out.refined >= self.options.refine:
                return
            if out.result.best_loss <= self.options.matched_loss:
                return
            if only_better and loss >= out.result.best_loss:
                return
            if any(np.max(np.abs(z_c - p)) < _NEAR for p in self.refined):
                continue
            if tracker.out_of_iterations():
                # a start the phase would refine is left: the iteration limit, not the
                # search, ended the fit
                self.cut = "max_iterations"
                return
            self.refined.append(z_c)
            out.refined += 1
            run = self.local_method(
                self.objective,
                self.spec,
                self.settings,
                tracker,
                RunState(z_c, r_c, None, self.settings.trust_radius),
            )
            if run.stop_reason in ("cancelled", "time_budget", "max_iterations"):
                self.cut = run.stop_reason
            if run.best_loss < out.result.best_loss:
                out.result = run


def _short_of_target(result: OptimizeResult, options: SearchOptions, tracker: Tracker) -> bool:
    if result.best_loss <= options.matched_loss:
        return False
    if tracker.interrupted() or tracker.out_of_iterations():
        return False
    return result.stationary or result.stop_reason in ("slow", "no_jacobian")


def _start_vector(spec: ParameterSpec, start: dict[str, float]) -> np.ndarray:
    """Free log values of a start given as values (missing ones from the spec's start;
    zero or negative ones at the lower bound)."""
    z = spec.initial_free()
    for k, name in enumerate(spec.free_names):
        v = start.get(name)
        if v is not None and np.isfinite(v):
            z[k] = np.log(v) if v > 0.0 else spec.log_lower[k]
    return spec.clip(z)


def _ranked(
    objective: ResidualObjective,
    spec: ParameterSpec,
    design: list[np.ndarray],
    tried: list[np.ndarray],
    tracker: Tracker,
    out: SearchResult,
) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """The design points that simulate, best first (one simulation each, as many at once as
    the objective runs side by side; points next to an already tried one are skipped)."""
    ranked = []
    fresh = [z_c for z_c in design if not any(np.max(np.abs(z_c - p)) < 1e-9 for p in tried)]
    width = objective.side_by_side() if isinstance(objective, SideBySideObjective) else 1
    for start in range(0, len(fresh), width):
        if tracker.interrupted():
            break
        batch = fresh[start : start + width]
        tracker.phase("global", start + 1, len(fresh))
        found = eval_residuals_many(objective, [spec.from_free(z_c) for z_c in batch], tracker.counter)
        out.candidates += len(batch)
        ranked += [
            (0.5 * float(r_c @ r_c), z_c, r_c)
            for z_c, r_c in zip(batch, found, strict=True)
            if r_c is not None
        ]
    ranked.sort(key=lambda item: item[0])
    return ranked
