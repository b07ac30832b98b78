"""The fit running in the background: one at a time, as the panel and the status bar show it.

A run fits the selected objects one after another (one task each), or all of them at once
with one shared material (one task)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .errors import FitInputError
from .job import FitJob, JobMessage
from .request import PreparedFit


@dataclass
class FitSession:
    """The running fit's progress, updated from its job's messages on the main thread."""

    prepared: list[PreparedFit]  # one per object, the active object first
    job: FitJob
    shared: bool = False
    started: float = field(default_factory=time.perf_counter)
    iteration: int = 0
    loss: float = float("nan")
    initial_loss: float = float("nan")
    values: dict[str, float] = field(default_factory=dict)
    progress_messages: int = 0
    task: int = 0  # index of the fit under way (an object, or the one shared fit)

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
    def max_iterations(self) -> int:
        return self.prepared[min(self.task, len(self.prepared) - 1)].settings.max_iterations

    @property
    def task_count(self) -> int:
        return 1 if self.shared else len(self.prepared)

    def update(self, messages: list[JobMessage]) -> None:
        for msg in messages:
            if msg.kind != "progress":
                continue
            if msg.task != self.task:  # the next object's fit began
                self.task, self.progress_messages = msg.task, 0
            self.progress_messages += 1
            self.iteration, self.loss, self.values = msg.iteration, msg.loss, msg.values
            if msg.iteration == 0:
                self.initial_loss = msg.loss

    @property
    def factor(self) -> float:
        """Progress 0..1 over all fits: the objects done, plus iterations of the maximum (or the
        time budget if that ends sooner) of the one under way."""
        f = self.iteration / max(self.max_iterations, 1)
        budget = self.prepared[min(self.task, len(self.prepared) - 1)].settings.time_budget_s
        if budget:
            f = max(f, (time.perf_counter() - self.started) / budget)
        f = min(max(f, 0.0), 1.0)
        return (self.task + f) / self.task_count

    @property
    def position(self) -> str:
        """ "object 2 of 3: " while several objects are fitted one after another, else ""."""
        if self.task_count == 1:
            return ""
        return f"object {self.task + 1} of {self.task_count}: "

    def progress_text(self) -> str:
        if self.progress_messages == 0:
            return f"{self.position}{self.object_name}: first simulation..."
        return (
            f"{self.position}{self.object_name}: iteration {self.iteration}/{self.max_iterations}, "
            f"loss {self.loss:.4g}"
        )

    def status_text(self) -> str:
        if self.job.cancel_requested:
            return f"Fit to Target: cancelling {self.object_name} after the current iteration..."
        return f"Fit to Target: {self.progress_text()} (Esc to cancel)"


# One per Blender session: the worker thread and the modal operator that polls it.
_session: FitSession | None = None


def active_session() -> FitSession | None:
    return _session


def begin_session(prepared: list[PreparedFit], job: FitJob, shared: bool = False) -> FitSession:
    global _session
    if _session is not None:
        raise FitInputError("A fit is already running: wait for it or cancel it")
    _session = FitSession(list(prepared), job, shared)
    return _session


def end_session() -> None:
    global _session
    _session = None
