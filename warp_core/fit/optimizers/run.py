"""The bookkeeping of a fit's optimizer runs: one clock, cancel check, evaluation counts and
progress numbering shared by every local run of a fit (the start, then the global phase's
refinements), and each run's own accepted losses."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..problem.spec import ParameterSpec
from ..progress import PhaseReporter
from .base import (
    Counter,
    OptimizeResult,
    OptimizeSettings,
    ProgressCallback,
    RunState,
    eval_gradient,
    start_point,
)

__all__ = ["CancelFlag", "Clock", "Run", "Tracker", "cancel_check", "start_gradient_run"]

# Stop reasons that mean "a budget or the caller ended the run", not "it got somewhere".
BUDGET_STOPS = ("max_iterations", "time_budget", "cancelled")


@runtime_checkable
class CancelFlag(Protocol):
    """A flag another thread sets to cancel the fit (``threading.Event`` is one)."""

    def is_set(self) -> bool: ...


def cancel_check(cancel: CancelFlag | Callable[[], bool] | None) -> Callable[[], bool]:
    """The cancel test the runs poll: a flag's ``is_set``, or a callable returning bool."""
    if cancel is None:
        return lambda: False
    if isinstance(cancel, CancelFlag):
        return lambda: bool(cancel.is_set())
    if callable(cancel):
        return lambda: bool(cancel())
    raise TypeError("cancel must be a callable returning bool or an object with is_set()")


class Clock:
    def __init__(self, budget_s: float | None) -> None:
        self.start = time.perf_counter()
        self.budget_s = budget_s

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def over_budget(self) -> bool:
        return self.budget_s is not None and self.elapsed() >= self.budget_s


class Tracker:
    """What all runs of one fit share: the time budget and cancel flag, the evaluation
    counts, the iteration budget (``max_iterations`` accepted steps in all) and the
    progress numbering (0 = the start, then every accepted step of any run)."""

    def __init__(self, settings: OptimizeSettings, progress: ProgressCallback | None, cancel: Any) -> None:
        self.clock = Clock(settings.time_budget_s)
        self.cancelled = cancel_check(cancel)
        self.counter = Counter()
        self.progress = progress
        self.max_iterations = settings.max_iterations
        self.losses: list[float] = []  # every reported loss, in order
        self.steps = 0  # accepted steps over all runs
        self.warnings: list[str] = []

    def interrupted(self) -> str | None:
        """The stop reason if the caller cancelled or the time budget is spent, else None."""
        if self.cancelled():
            return "cancelled"
        if self.clock.over_budget():
            return "time_budget"
        return None

    def out_of_iterations(self) -> bool:
        return self.steps >= self.max_iterations

    def phase(self, name: str, index: int | None = None, count: int | None = None) -> None:
        """Tell the caller the search entered phase ``name`` (k of n), where it hears phases."""
        if isinstance(self.progress, PhaseReporter):
            self.progress.phase(name, index, count)

    def report(self, values: dict[str, float], loss: float) -> None:
        """Tell the caller about an accepted point (index 0 is the fit's start)."""
        self.losses.append(float(loss))
        if self.progress is not None:
            self.progress(len(self.losses) - 1, float(loss), dict(values))


class Run:
    """One optimizer run from one start point: its accepted losses, and its result."""

    def __init__(self, spec: ParameterSpec, tracker: Tracker) -> None:
        self.spec = spec
        self.tracker = tracker
        self.counter = tracker.counter
        self.initial_values: dict[str, float] = {}
        self.history: list[float] = []
        self.warnings = tracker.warnings
        self.held: list[str] = []

    def begin(self, values: dict[str, float], loss: float, report: bool) -> None:
        """Record the run's start point; ``report`` for the fit's first start only."""
        self.initial_values = dict(values)
        self.history.append(float(loss))
        if report:
            self.tracker.report(values, loss)

    def accept(self, values: dict[str, float], loss: float) -> None:
        self.history.append(float(loss))
        self.tracker.steps += 1
        self.tracker.report(values, loss)

    def interrupted(self) -> str | None:
        return self.tracker.interrupted()

    def result(
        self,
        stop: str,
        values: dict[str, float],
        loss: float,
        jacobian: np.ndarray | None = None,
        state: RunState | None = None,
    ) -> OptimizeResult:
        """The result of a run that stopped for ``stop`` at ``values`` (its best point)."""
        counter = self.counter
        return OptimizeResult(
            values=dict(values),
            initial_values=self.initial_values,
            loss_history=self.history,
            iterations=len(self.history) - 1,
            n_residual_evals=counter.residuals,
            n_jacobian_evals=counter.jacobians,
            n_gradient_evals=counter.gradients,
            stop_reason=stop,
            cancelled=stop == "cancelled",
            seconds=self.tracker.clock.elapsed(),
            jacobian=jacobian,
            best_loss=float(loss),
            free_names=list(self.spec.free_names),
            warnings=self.warnings,
            held=list(self.held),
            state=state,
        )


def start_gradient_run(
    objective: Any,
    spec: ParameterSpec,
    settings: OptimizeSettings,
    progress: ProgressCallback | None,
    cancel: Any,
) -> tuple[Run, np.ndarray, dict[str, float], float, np.ndarray]:
    """A first-order optimizer's one run from the spec's start (recovered from a diverging
    one as ``start_point`` does), the start reported: (run, free log values, values, loss,
    log-space gradient)."""
    tracker = Tracker(settings, progress, cancel)
    run = Run(spec, tracker)
    z, values, (loss, g), warnings = start_point(
        spec, settings, lambda v: eval_gradient(objective, spec, v, tracker.counter)
    )
    tracker.warnings += warnings
    run.begin(values, loss, report=True)
    return run, z, values, loss, g
