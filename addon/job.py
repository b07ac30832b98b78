"""A fit running in a worker thread, reporting through a queue (no bpy here).

The modal operator polls :meth:`FitJob.poll` from a window-manager timer; tests drive the
same class directly. The worker only touches the plain-array :class:`FitProblem`, never
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

from ..warp_core.errors import one_line
from ..warp_core.fit import FitError, FitProblem, FitResult, FitSettings, fit


@dataclass
class JobMessage:
    """``kind`` is "progress" (one per optimizer iteration), "done" or "error" (the last one)."""

    kind: str
    iteration: int = 0
    loss: float = float("nan")
    values: dict[str, float] = field(default_factory=dict)
    elapsed_s: float = 0.0
    result: FitResult | None = None
    error: str = ""


FitFunction = Callable[..., FitResult]


class FitJob:
    """Run ``fit(problem, settings)`` in a daemon thread.

    ``start()`` launches it, ``poll()`` returns the messages that arrived since the last
    call, ``cancel()`` asks the optimizer to stop after its current iteration (the fit then
    ends with ``result.cancelled``). ``result`` / ``error`` are set when the thread ends.
    """

    def __init__(self, problem: FitProblem, settings: FitSettings, fit_function: FitFunction = fit) -> None:
        self.problem = problem
        self.settings = settings
        self._fit = fit_function
        self._queue: queue.Queue[JobMessage] = queue.Queue()
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self.result: FitResult | None = None
        self.error: str | None = None
        self.finished = False  # set by poll() once the last message was delivered
        self.last_progress: JobMessage | None = None

    # -- control (main thread) ---------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the job was already started")
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="fit-to-target", daemon=True)
        self._thread.start()

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
        ``finished`` is True and ``result`` / ``error`` are set."""
        out: list[JobMessage] = []
        while True:
            try:
                msg = self._queue.get_nowait()
            except queue.Empty:
                break
            out.append(msg)
            if msg.kind == "progress":
                self.last_progress = msg
            elif msg.kind == "done":
                self.result = msg.result
                self.finished = True
            elif msg.kind == "error":
                self.error = msg.error
                self.finished = True
        return out

    def wait(self, timeout: float | None = None) -> list[JobMessage]:
        """Block until the worker ends (or ``timeout``); returns the pending messages."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.poll()

    # -- worker thread -------------------------------------------------------------------
    def _progress(self, iteration: int, loss: float, values: dict[str, float]) -> None:
        self._queue.put(
            JobMessage(
                "progress",
                iteration=int(iteration),
                loss=float(loss),
                values=dict(values),
                elapsed_s=time.perf_counter() - self._t0,
            )
        )

    def _run(self) -> None:
        try:
            result = self._fit(self.problem, self.settings, progress=self._progress, cancel=self._cancel)
        except (FitError, ValueError) as e:
            self._queue.put(JobMessage("error", error=one_line(e), elapsed_s=time.perf_counter() - self._t0))
        except Exception as e:  # a bug: keep the traceback for the console, one line for the user
            traceback.print_exc(file=sys.stderr)
            message = f"unexpected error in the fit: {type(e).__name__}: {one_line(e)}"
            self._queue.put(JobMessage("error", error=message, elapsed_s=time.perf_counter() - self._t0))
        else:
            self._queue.put(JobMessage("done", result=result, elapsed_s=time.perf_counter() - self._t0))
