"""A fit running in a worker thread, reporting through a queue (no bpy here).

The modal operator polls :meth:`FitJob.poll` from a window-manager timer; tests drive the
same class directly. A job runs one or several fits (the selected objects, one after
another, or one shared fit of them all). The worker only touches the plain-array :class:`FitProblem`, never
Blender data, so nothing here needs the main thread.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..warp_core.errors import one_line
from ..warp_core.fit import FitError, FitProgress, FitSettings, fit
from ..warp_core.targets.units import Unit


@dataclass
class JobMessage:
    """``kind`` is "progress" (task ``task``'s fit accepted a point or entered a phase), then
    "done" or "error" once (the last message; "error" only for a job of one task). The results
    are on the job (``FitJob.results``). Made by the job's worker; read by the session
    (``FitSession.update``) on the main thread.

    A progress message carries the fit's phase and the RMSE of its latest point in the target's
    unit (see ``warp_core.fit.FitProgress``); a fit function that only calls the plain callback
    ``(iteration, loss, values)`` gives accepted points without a phase, RMSE or unit."""

    kind: str
    iteration: int = 0
    loss: float = float("nan")
    values: dict[str, float] = field(default_factory=dict)
    elapsed_s: float = 0.0  # since the job started
    error: str = ""
    task: int = 0
    phase: str = ""  # one of warp_core.fit.PHASES; "" where the fit function says none
    phase_index: int | None = None  # k of n where the phase counts (the global starts)
    phase_count: int | None = None
    rmse: float = float("nan")  # at the latest point, in ``unit``
    unit: Unit | None = None
    expected_s: float | None = None  # how long the phase takes at most, where known
    accepted: bool = True  # an accepted point (iteration), not only a phase change
    task_elapsed_s: float = 0.0  # since this task's fit began


FitFunction = Callable[..., Any]


@dataclass
class FitTask:
    """One fit of a job: ``fit_function(problem, settings, progress=, cancel=)``, e.g.
    ``warp_core.fit.fit`` on a FitProblem, or ``fit_shared`` on a list of them. ``progress``
    listens to the fit's phases and RMSE, and is also a plain ``(iteration, loss, values)``
    callback for a fit function that calls that."""

    problem: Any
    settings: FitSettings | None
    fit_function: FitFunction = fit


class FitJob:
    """Run fits one after another in a daemon thread.

    ``start()`` launches it, ``poll()`` returns the messages that arrived since the last
    call, ``cancel()`` asks the running fit to stop after its current iteration and skips
    the ones not started (each ends with ``cancelled``). When the thread ends, ``results``
    and ``errors`` hold one entry per task (a result, or the one-line reason it failed);
    ``result`` / ``error`` are the first task's.
    """

    def __init__(self, problem: Any, settings: FitSettings | None, fit_function: FitFunction = fit) -> None:
        self._init([FitTask(problem, settings, fit_function)])

    @classmethod
    def of_tasks(cls, tasks: list[FitTask]) -> FitJob:
        job = cls.__new__(cls)
        job._init(list(tasks))
        return job

    def _init(self, tasks: list[FitTask]) -> None:
        self.tasks = tasks
        self._queue: queue.Queue[JobMessage] = queue.Queue()
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self.results: list[Any] = [None] * len(tasks)
        self.errors: list[str | None] = [None] * len(tasks)
        self.task = 0  # the task running (or last run), as the messages say
        self.finished = False  # set by poll() once the last message was delivered
        self.last_progress: JobMessage | None = None

    @property
    def result(self) -> Any:
        return self.results[0]

    @property
    def error(self) -> str | None:
        return self.errors[0]

    # -- control (main thread) ---------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the job was already started")
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="fit-to-target", daemon=True)
        self._thread.start()

    def run_here(self) -> list[JobMessage]:
        """Run every task on the calling thread (the blocking path); returns the messages."""
        if self._thread is not None:
            raise RuntimeError("the job was already started")
        self._t0 = time.perf_counter()
        self._run()
        return self.poll()

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    @property
    def running(self) -> bool:
        return self._thread is not None and not self.finished

    def poll(self) -> list[JobMessage]:
        """Messages since the last call, oldest first. After the "done" or "error" message
        ``finished`` is True and ``results`` / ``errors`` are set."""
        out: list[JobMessage] = []
        while True:
            try:
                msg = self._queue.get_nowait()
            except queue.Empty:
                break
            out.append(msg)
            self.task = msg.task
            if msg.kind == "progress":
                self.last_progress = msg
            elif msg.kind in ("done", "error"):
                self.finished = True
        return out

    def wait(self, timeout: float | None = None) -> list[JobMessage]:
        """Block until the worker ends (or ``timeout``); returns the pending messages."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.poll()

    # -- worker thread -------------------------------------------------------------------
    def _run(self) -> None:
        for k, task in enumerate(self.tasks):
            if self._cancel.is_set():
                break  # the tasks not started stay None: nothing to write for them
            try:
                progress = _TaskProgress(self._queue, k, self._t0, time.perf_counter())
                self.results[k] = task.fit_function(
                    task.problem, task.settings, progress=progress, cancel=self._cancel
                )
            except (FitError, ValueError) as e:
                self.errors[k] = one_line(e)
            except Exception as e:  # a bug: keep the traceback for the console, one line for the user
                traceback.print_exc(file=sys.stderr)
                self.errors[k] = f"unexpected error in the fit: {type(e).__name__}: {one_line(e)}"
        elapsed = time.perf_counter() - self._t0
        last = len(self.tasks) - 1
        if len(self.tasks) == 1 and self.errors[0] is not None:
            self._queue.put(JobMessage("error", error=self.errors[0], elapsed_s=elapsed, task=0))
        else:
            self._queue.put(JobMessage("done", elapsed_s=elapsed, task=last))


class _TaskProgress:
    """One task's progress, as the fit function reports it (worker thread): a listener of the
    fit's phases and RMSE (``warp_core.fit.ProgressListener``), and the plain callback for a
    fit function that calls that instead. Each report becomes a "progress" message."""

    def __init__(self, messages: queue.Queue[JobMessage], task: int, job_t0: float, task_t0: float) -> None:
        self.messages = messages
        self.task = task
        self.job_t0 = job_t0
        self.task_t0 = task_t0

    def fit_progress(self, report: FitProgress) -> None:
        self._put(
            iteration=int(report.iteration),
            loss=float(report.loss),
            values=dict(report.values),
            phase=report.phase,
            phase_index=report.phase_index,
            phase_count=report.phase_count,
            rmse=float(report.rmse),
            unit=report.unit,
            expected_s=report.expected_s,
            accepted=report.accepted,
        )

    def __call__(self, iteration: int, loss: float, values: dict[str, float]) -> None:
        self._put(iteration=int(iteration), loss=float(loss), values=dict(values))

    def _put(self, **fields: Any) -> None:
        now = time.perf_counter()
        self.messages.put(
            JobMessage(
                "progress",
                elapsed_s=now - self.job_t0,
                task=self.task,
                task_elapsed_s=now - self.task_t0,
                **fields,
            )
        )
