"""The fit running in the background: one at a time, as the panel and the status bar show it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .errors import FitInputError
from .job import FitJob, JobMessage
from .request import PreparedFit


@dataclass
class FitSession:
    """The running fit's progress, updated from its job's messages on the main thread."""

    prepared: PreparedFit
    job: FitJob
    started: float = field(default_factory=time.perf_counter)
    iteration: int = 0
    loss: float = float("nan")
    initial_loss: float = float("nan")
    values: dict[str, float] = field(default_factory=dict)
    progress_messages: int = 0

    @property
    def object_name(self) -> str:
        return self.prepared.request.object_name

    @property
    def max_iterations(self) -> int:
        return self.prepared.settings.max_iterations

    def update(self, messages: list[JobMessage]) -> None:
        for msg in messages:
            if msg.kind != "progress":
                continue
            self.progress_messages += 1
            self.iteration, self.loss, self.values = msg.iteration, msg.loss, msg.values
            if msg.iteration == 0:
                self.initial_loss = msg.loss

    @property
    def factor(self) -> float:
        """Progress 0..1: iterations of the maximum, or the time budget if that ends sooner."""
        f = self.iteration / max(self.max_iterations, 1)
        budget = self.prepared.settings.time_budget_s
        if budget:
            f = max(f, (time.perf_counter() - self.started) / budget)
        return min(max(f, 0.0), 1.0)

    def status_text(self) -> str:
        if self.job.cancel_requested:
            return f"Fit to Target: cancelling {self.object_name} after the current iteration..."
        if self.progress_messages == 0:
            return f"Fit to Target: {self.object_name}: first simulation... (Esc to cancel)"
        return (
            f"Fit to Target: {self.object_name}: iteration {self.iteration}/{self.max_iterations}, "
            f"loss {self.loss:.4g} (Esc to cancel)"
        )


# One per Blender session: the worker thread and the modal operator that polls it.
_session: FitSession | None = None


def active_session() -> FitSession | None:
    return _session


def begin_session(prepared: PreparedFit, job: FitJob) -> FitSession:
    global _session
    if _session is not None:
        raise FitInputError("A fit is already running: wait for it or cancel it")
    _session = FitSession(prepared, job)
    return _session


def end_session() -> None:
    global _session
    _session = None
