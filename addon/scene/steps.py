"""Long scene work in slices: main-thread work written as a generator that yields its progress.

Blender data may only be touched on the main thread, and a long export (stepping the scene
through hundreds of frames) freezes the interface when done in one go. Written as a
generator, the same work runs either in one go or a slice at a time:

- each ``yield Step(done, total, what)`` marks a point where the work may pause (one frame
  of an export); ``what`` says where it is ("frame 37 of 250");
- ``result = yield OffMainThread(fn, what)`` hands ``fn`` (pure numpy/Warp, no bpy) to a
  daemon thread; the generator resumes with its return value, or with its exception raised
  at the ``yield``;
- the generator's return value is the result of the work; a ``finally`` in it restores what
  it changed in the scene (the frame, modifier flags), so closing it halfway is a clean
  cancel.

:func:`run_blocking` runs such a generator to its end on the calling thread (scripts, the
batch command, an operator's ``execute``). :class:`SteppedRun` runs it from a modal
operator, a slice per window-manager timer event::

    def invoke(self, context, event):
        self._run = SteppedRun(prepare_fit_steps(context.scene, ob, request))
        self._timer = context.window_manager.event_timer_add(0.01, window=context.window)
        context.window_manager.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def modal(self, context, event):
        run = self._run
        if event.type == "ESC" and event.value == "PRESS":
            run.cancel()  # the scene is as it was, at once
        elif event.type == "TIMER":
            run.advance(0.05)  # ~50 ms of main-thread work, then the interface redraws
        if run.finished:
            context.window_manager.event_timer_remove(self._timer)
            ...  # run.value (the result), run.error (an exception) or run.cancelled
            return {"FINISHED"}
        context.workspace.status_text_set(run.text)  # and run.factor for a progress bar
        # mid-export the scene sits at another frame: no edits until the export is done
        return {"PASS_THROUGH"} if run.off_main_thread or event.type == "TIMER" else {"RUNNING_MODAL"}
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Step:
    """Progress of stepped work, yielded by its generator after each slice (a frame): ``done``
    of ``total`` units, ``what`` in words ("frame 37 of 250"). Read by the runners for
    :attr:`SteppedRun.factor` and :attr:`SteppedRun.text`."""

    done: int
    total: int
    what: str = ""

    @property
    def factor(self) -> float:
        return min(max(self.done / self.total, 0.0), 1.0) if self.total > 0 else 0.0


@dataclass(frozen=True)
class OffMainThread:
    """A request from stepped work to run ``fn()`` (no bpy) off the main thread; ``what``
    says what it does meanwhile ("simulating 250 frames"). Yielded by the generator, run by
    the runner, whose answer (the return value, or the exception raised at the ``yield``)
    resumes the generator."""

    fn: Callable[[], Any]
    what: str = ""


StepGenerator = Generator["Step | OffMainThread", Any, T]


def run_blocking(gen: StepGenerator[T]) -> T:
    """Run stepped work to its end on this thread (off-thread requests included) and return
    its value; its exceptions propagate. The generator is closed whatever happens."""
    reply: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                item = gen.throw(error) if error is not None else gen.send(reply)
            except StopIteration as stop:
                return stop.value
            reply, error = None, None
            if isinstance(item, OffMainThread):
                try:
                    reply = item.fn()
                except Exception as e:  # back into the generator, as the stepped runner does
                    error = e
    finally:
        gen.close()


def within(gen: StepGenerator[T], offset: int, span: int, total: int, label: str = "") -> StepGenerator[T]:
    """``gen``'s work as part of a larger one: its steps mapped onto ``offset`` to
    ``offset + span`` of ``total`` units, ``label`` put before their text; off-thread
    requests and their answers go through unchanged. Use as ``yield from within(...)``."""
    reply: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                item = gen.throw(error) if error is not None else gen.send(reply)
            except StopIteration as stop:
                return stop.value
            reply, error = None, None
            if isinstance(item, Step):
                item = Step(offset + round(span * item.factor), total, label + item.what)
            try:
                reply = yield item
            except Exception as e:  # an off-thread request's: into ``gen``, at its own yield
                error = e
    finally:
        gen.close()


class SteppedRun(Generic[T]):
    """Stepped work driven from a modal operator: :meth:`advance` on each timer event runs
    steps on the main thread for about ``budget_s`` and starts off-thread requests in a
    daemon thread; :meth:`cancel` (Esc) closes the generator, whose ``finally`` restores the
    scene. ``finished`` once it ended: then ``value`` (its result), ``error`` (the exception
    it raised) or ``cancelled``. ``factor`` (0..1) and ``text`` are the latest progress."""

    def __init__(self, gen: StepGenerator[T]) -> None:
        self._gen = gen
        self._reply: Any = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None  # the latest off-thread request's
        self._answer: list[tuple[Any, BaseException | None]] = []  # its answer, once it ended
        self._waiting = False  # for that answer
        self.finished = False
        self.cancelled = False
        self.value: T | None = None
        self.error: BaseException | None = None
        self.factor = 0.0
        self.text = ""
        self.steps = 0  # the steps run so far

    @property
    def off_main_thread(self) -> bool:
        """Whether the work waits for an off-thread request (the main thread is free)."""
        return self._waiting and not self.finished

    def advance(self, budget_s: float) -> None:
        """Run steps until about ``budget_s`` of main-thread time passed (at least one step
        when one can run), the work waits for its thread, or it ended."""
        deadline = time.perf_counter() + budget_s
        while not self.finished:
            if self._waiting:
                if not self._answer:
                    return  # still running: the interface goes on meanwhile
                self._waiting = False
                self._reply, self._error = self._answer.pop()
            self._resume()
            if self._waiting or time.perf_counter() >= deadline:
                return

    def _resume(self) -> None:
        reply, error = self._reply, self._error
        self._reply, self._error = None, None
        try:
            item = self._gen.throw(error) if error is not None else self._gen.send(reply)
        except StopIteration as stop:
            self.finished, self.value, self.factor = True, stop.value, 1.0
            return
        except Exception as e:
            self.finished, self.error = True, e
            return
        self.steps += 1
        if isinstance(item, Step):
            self.factor, self.text = item.factor, item.what or self.text
        elif isinstance(item, OffMainThread):
            self.text = item.what or self.text
            self._start(item.fn)
        else:
            self._error = TypeError(f"stepped work yielded {item!r}, not a Step or an OffMainThread")

    def _start(self, fn: Callable[[], Any]) -> None:
        answer: list[tuple[Any, BaseException | None]] = []

        def work() -> None:
            try:
                result = (fn(), None)
            except Exception as e:
                result = (None, e)
            answer.append(result)  # list.append is atomic: the main thread reads it once there

        self._answer, self._waiting = answer, True
        self._thread = threading.Thread(target=work, name="fit-to-target-steps", daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        """Stop the work now: the generator is closed (its ``finally`` restores the scene) and
        a running thread's answer is dropped. Nothing once it has finished."""
        if self.finished:
            return
        self.finished, self.cancelled, self._waiting = True, True, False
        try:
            self._gen.close()
        except Exception as e:  # its restore failed: the caller says so
            self.error = e

    def wait_for_thread(self, timeout_s: float | None = None) -> bool:
        """Block until the latest off-thread request ended, also one whose answer a cancel
        dropped (tests; never from the interface). True when none runs any more."""
        if self._thread is not None:
            self._thread.join(timeout_s)
            return not self._thread.is_alive()
        return True


class ShownRun:
    """Stepped work as the panel (a bar) and the status bar show it: its :meth:`title`, then
    the run's own text ("Baking 'Flag': frame 37 of 250"). A dataclass of each kind of work
    (the fit's scene read, a bake) mixes it in with its ``run``; the modal operator that
    drives the run makes it, the panel and the operator read it."""

    run: SteppedRun
    status_prefix = ""  # before the text in the status bar

    def title(self) -> str:
        raise NotImplementedError

    @property
    def factor(self) -> float:
        return self.run.factor

    @property
    def text(self) -> str:
        return f"{self.title()}: {self.run.text or 'starting...'}"

    def status_text(self) -> str:
        return f"{self.status_prefix}{self.text} (Esc to cancel)"

    def cancel(self) -> None:
        """Stop now: the scene is as it was, no file is written."""
        self.run.cancel()
