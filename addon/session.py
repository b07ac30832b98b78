"""The fit running in the background: one at a time, as the panel and the status bar show it.

A run fits the selected objects one after another (one task each), or all of them at once
with one shared material (one task). Its progress reads as the fit's phase, the RMSE it has
reached in the target's unit, the time it has taken and, where there is a basis for one, an
estimate of the time left; the bar covers the whole run."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..warp_core.fit import FitSettings
from ..warp_core.targets.units import Unit
from .errors import FitInputError
from .job import FitJob, JobMessage
from .request import PreparedFit
from .scene.steps import ShownRun, SteppedRun

# An estimate of the time left below this is not worth saying (the fit is about to end).
MIN_LEFT_S = 1.0


@dataclass
class FitSession:
    """The running fit's progress, updated from its job's messages on the main thread. Made by
    :func:`begin_session` (the Fit operator's invoke); read by the panel (``progress_text``,
    ``factor``) and the operator (``status_text``). ``clock`` is the time the bar and the
    estimates are measured by (``time.perf_counter``)."""

    prepared: list[PreparedFit]  # one per object, the active object first
    job: FitJob
    shared: bool = False
    clock: Callable[[], float] = time.perf_counter
    started: float | None = None  # on ``clock``; when the session began
    iteration: int = 0
    loss: float = float("nan")
    initial_loss: float = float("nan")
    values: dict[str, float] = field(default_factory=dict)
    progress_messages: int = 0  # accepted points of the task under way (0: its start not simulated yet)
    task: int = 0  # index of the fit under way (an object, or the one shared fit)
    phase: str = ""  # the fit's phase (warp_core.fit.PHASES); "" before it says one
    phase_index: int | None = None
    phase_count: int | None = None
    expected_s: float | None = None  # how long the phase takes at most, where the fit says
    unit: Unit | None = None  # the target's, once the fit has said it
    best_rmse: float = float("nan")  # the lowest RMSE of the task so far, in ``unit``
    initial_rmse: float = float("nan")  # at the task's start values
    task_started: float = 0.0  # on ``clock``; when the task under way began
    # (seconds into the task, iteration) of its first and latest accepted points: the pace
    first_point: tuple[float, int] | None = None
    last_point: tuple[float, int] | None = None
    heard_task: bool = False  # whether a message of the task under way has arrived
    rmse_points: list[float] = field(default_factory=list)  # per accepted point of the task: the curve

    def __post_init__(self) -> None:
        if self.started is None:
            self.started = self.clock()
        self.task_started = self.started

    @property
    def object_names(self) -> list[str]:
        return [p.request.object_name for p in self.prepared]

    @property
    def object_name(self) -> str:
        """What the progress is about: the object being fitted, or the shared fit's objects."""
        if self.shared:
            return "shared fit of " + ", ".join(self.object_names)
        return self.object_names[min(self.task, len(self.prepared) - 1)]

    @property
    def _settings(self) -> FitSettings:
        return self.prepared[min(self.task, len(self.prepared) - 1)].settings

    @property
    def max_iterations(self) -> int:
        return self._settings.max_iterations

    @property
    def task_count(self) -> int:
        return 1 if self.shared else len(self.prepared)

    @property
    def task_elapsed_s(self) -> float:
        """Seconds since the fit under way began."""
        return max(self.clock() - self.task_started, 0.0)

    def update(self, messages: list[JobMessage]) -> None:
        for msg in messages:
            if msg.kind != "progress":
                continue
            if msg.task != self.task:  # the next object's fit began
                self._next_task(msg.task)
            if not self.heard_task:
                self.heard_task = True
                self.task_started = self.clock() - msg.task_elapsed_s
            self.iteration, self.loss, self.values = msg.iteration, msg.loss, msg.values
            self.phase, self.phase_index, self.phase_count = msg.phase, msg.phase_index, msg.phase_count
            self.expected_s = msg.expected_s
            self.unit = msg.unit or self.unit
            if math.isfinite(msg.rmse) and not msg.rmse >= self.best_rmse:
                self.best_rmse = msg.rmse
            if msg.accepted:
                self._accepted(msg)

    def _next_task(self, task: int) -> None:
        self.task, self.progress_messages, self.heard_task = task, 0, False
        self.best_rmse = self.initial_rmse = self.initial_loss = float("nan")
        self.first_point = self.last_point = None
        self.unit, self.phase = None, ""
        self.rmse_points = []

    def _accepted(self, msg: JobMessage) -> None:
        self.progress_messages += 1
        point = (msg.task_elapsed_s, msg.iteration)
        self.first_point = self.first_point or point
        self.last_point = point
        if msg.iteration == 0:
            self.initial_loss, self.initial_rmse = msg.loss, msg.rmse
        if math.isfinite(msg.rmse):
            self.rmse_points.append(msg.rmse)

    @property
    def factor(self) -> float:
        """Progress 0..1 over all fits: the objects done, plus the share of the one under way:
        its iterations of the maximum, or of its time budget (counted from its own start) if
        that ends sooner."""
        f = self.iteration / max(self.max_iterations, 1)
        budget = self._settings.time_budget_s
        if budget:
            f = max(f, self.task_elapsed_s / budget)
        f = min(max(f, 0.0), 1.0)
        return (self.task + f) / self.task_count

    def time_left_s(self) -> float | None:
        """About how long the fit under way has left: what is left of its time budget, or of
        its iterations at the pace of those done so far (while it refines), whichever is
        sooner; None where neither gives a basis."""
        elapsed = self.task_elapsed_s
        estimates = []
        budget = self._settings.time_budget_s
        if budget:
            estimates.append(budget - elapsed)
        if self.phase == "refinement" and self.first_point and self.last_point:
            (t0, k0), (t1, k1) = self.first_point, self.last_point
            if k1 > k0:
                per_iteration = (t1 - t0) / (k1 - k0)
                remaining = max(self.max_iterations - self.iteration, 0)
                estimates.append(per_iteration * remaining - (elapsed - t1))
        left = min(estimates, default=None)
        return left if left is not None and left >= MIN_LEFT_S else None

    @property
    def position(self) -> str:
        """ "object 2 of 3: " while several objects are fitted one after another, else ""."""
        if self.task_count == 1:
            return ""
        return f"object {self.task + 1} of {self.task_count}: "

    def progress_text(self) -> str:
        """ "Flag: global search 3 of 8 · RMSE 4.21 mm · 0:12 elapsed, about 0:30 left"."""
        head = f"{self.position}{self.object_name}: "
        if not self.phase:
            if self.progress_messages == 0:
                return head + "starting..."
            # a fit function that reports only its iterations and losses (no phase, no unit)
            return head + f"iteration {self.iteration}/{self.max_iterations}, loss {self.loss:.4g}"
        parts = [self.phase_text()]
        if self.unit is not None and math.isfinite(self.best_rmse):
            parts.append(f"RMSE {self.unit.format_progress(self.best_rmse)}")
        times = f"{clock_text(self.task_elapsed_s)} elapsed"
        left = self.time_left_s()
        if left is not None:
            times += f", about {clock_text(left)} left"
        return head + " · ".join([*parts, times])

    def phase_text(self) -> str:
        """What the fit is doing, in words."""
        phase = self.phase
        if phase == "compiling":
            return f"compiling kernels (first fit in this Blender session{_at_most(self.expected_s)})"
        if phase == "start":
            return "simulating the start values"
        if phase == "global":
            counted = f" {self.phase_index} of {self.phase_count}" if self.phase_count else ""
            return "global search" + counted
        if phase == "refinement":
            return f"refinement, iteration {self.iteration} of {self.max_iterations}"
        if phase == "rounding":
            building = f" (building its kernels{_at_most(self.expected_s)})" if self.expected_s else ""
            return "rounding check" + building
        if phase == "contacts":
            return "contact probe"
        return phase

    def status_text(self) -> str:
        if self.job.cancel_requested:
            return f"Fit to Target: cancelling {self.object_name} after the current iteration..."
        return f"Fit to Target: {self.progress_text()} (Esc to cancel)"


def clock_text(seconds: float) -> str:
    """Seconds as a clock reads: 0:07, 12:30, 1:02:03."""
    total = max(round(seconds), 0)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _at_most(seconds: float | None) -> str:
    return f", up to about {seconds:.0f} s" if seconds else ""


@dataclass
class ExportProgress(ShownRun):
    """The scene read of a modal fit before its worker starts (its export: the scene stepped
    through every frame up to the last target), read as "Reading the scene: 'Flag': frame 37
    of 250". Made by the Fit operator's invoke, which advances ``run`` a slice per timer
    event; read by the panel (a bar) and the status bar. Only Esc stops it: while the scene
    sits at another frame, no other event reaches it."""

    object_names: list[str]
    run: SteppedRun
    status_prefix = "Fit to Target: "

    def title(self) -> str:
        return "Reading the scene"


# One per Blender session: the worker thread and the modal operator that polls it, and
# before it the scene read of that operator.
_session: FitSession | None = None
_export: ExportProgress | None = None
# the object whose fabric fit (the Fabric sub-panel's rigs) runs now: it writes the same
# Cloth settings a fit or bake reads, so neither starts beside it
_fabric_object: str | None = None


def active_export() -> ExportProgress | None:
    return _export


def begin_export(object_names: list[str], run: SteppedRun) -> ExportProgress:
    global _export
    if busy_with() is not None:
        raise FitInputError(f"{busy_with()}: wait for it or cancel it")
    _export = ExportProgress(list(object_names), run)
    return _export


def end_export() -> None:
    global _export
    _export = None


def busy_with() -> str | None:
    """Why no fit, fabric fit or bake can start now (a fit reading the scene or running, a
    fabric fit running), or None."""
    if _session is not None or _export is not None:
        return "A fit is already running"
    if _fabric_object is not None:
        return f"A fabric fit of '{_fabric_object}' is running"
    return None


def begin_fabric_fit(object_name: str) -> None:
    """Mark a fabric fit of ``object_name`` as running (FitInputError where other work is)."""
    global _fabric_object
    busy = busy_with()
    if busy is not None:
        raise FitInputError(f"{busy}: wait for it or cancel it")
    _fabric_object = object_name


def end_fabric_fit() -> None:
    global _fabric_object
    _fabric_object = None


def active_session() -> FitSession | None:
    return _session


def begin_session(prepared: list[PreparedFit], job: FitJob, shared: bool = False) -> FitSession:
    global _session
    if _session is not None:
        raise FitInputError("A fit is already running: wait for it or cancel it")
    end_export()  # the scene read ends where the fit begins
    _session = FitSession(list(prepared), job, shared)
    return _session


def end_session() -> None:
    global _session
    _session = None
