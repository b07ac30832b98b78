"""What a running fit says as it goes: its phase, and how close it is in the target's unit.

A caller hears a fit in one of two ways. A plain progress callback, ``(iteration, loss,
values)``, is called once per point the search accepts (0: the start, then every step), as
it always was. A :class:`ProgressListener` (an object with ``fit_progress``) gets a
:class:`FitProgress` for those points and at every change of phase as well, with the RMSE
the loss stands for in the target's unit (``TargetKind.rmse_of_loss``) and the seconds
since the fit began.

The phases, in the order a fit goes through them (:data:`PHASES`): ``compiling`` once per
process for a model's precision and device (its Warp kernels are built on its first
simulation, see :data:`COMPILE_S`), ``start`` (simulating the start values), ``global``
(the global search's space-filling starts, k of n), ``refinement`` (the local search, and a
footage fit's refinement stage), ``rounding`` (the verdict's rounding check) and
``contacts`` (the verdict's contact probe, for a scene with collision objects). A phase the
fit does not need is not reported; a footage fit goes through the verdict's phases after
its search and again after its refinement stage.

The optimizers see a :class:`Reporter` as a plain callback that also hears phases
(:class:`PhaseReporter`); nothing here changes what a fit computes.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..targets.units import Unit

__all__ = [
    "COMPILE_S",
    "PHASES",
    "FitProgress",
    "PhaseReporter",
    "ProgressListener",
    "Reporter",
    "listener",
]

PHASES = ("compiling", "start", "global", "refinement", "rounding", "contacts")

# How long the first simulation of a process takes while Warp builds the model's kernels for
# its precision and device. Measured on the CPU (2 cores, Warp 1.19, an empty kernel cache) for
# the cloth model on an 8x8 sheet: 18.5 s for the float64 kernels of a fit's start, 15 s for
# the float32 ones of its rounding check. From Warp's kernel cache on disk (every later Blender
# session) the same load takes 0.1 s, so this is what to expect at most.
COMPILE_S = 20.0

# The precision a rounding check compares with (``FitObjective.rounding_gap``).
_OTHER_PRECISION = {"float64": "float32", "float32": "float64"}

# (model, precision, device) whose kernels this process has built: their first simulation
# was announced, so no later fit announces it again.
_BUILT: set[tuple[str, str, str]] = set()


@dataclass(frozen=True)
class FitProgress:
    """One report of a running fit. Made by :class:`Reporter` (inside ``fit`` and
    ``fit_shared``); read by a :class:`ProgressListener`: the add-on's job and progress text,
    the batch command's progress lines and log."""

    phase: str  # one of PHASES
    phase_index: int | None  # k of n (1-based) where the phase counts (the global starts)
    phase_count: int | None
    iteration: int  # the latest accepted point (0: the start), numbered as the plain callback does
    loss: float  # at that point (NaN before the start is simulated)
    rmse: float  # the RMS misfit that loss stands for, in ``unit``
    unit: Unit | None  # the target's: metres for meshes, pixels for footage (None while compiling)
    values: dict[str, float] = field(default_factory=dict)  # the parameters at that point
    seconds: float = 0.0  # since the fit began
    expected_s: float | None = None  # how long the phase takes at most, where known (kernels built)
    accepted: bool = False  # a point the search accepted (the plain callback's calls), not a phase change


@runtime_checkable
class ProgressListener(Protocol):
    """A caller that hears every :class:`FitProgress` (phases as well as accepted points); pass
    it as ``fit``'s ``progress``."""

    def fit_progress(self, report: FitProgress) -> None: ...


@dataclass
class _Listener:
    """A function of a :class:`FitProgress` as a :class:`ProgressListener`."""

    function: Callable[[FitProgress], None]

    def fit_progress(self, report: FitProgress) -> None:
        self.function(report)


def listener(function: Callable[[FitProgress], None]) -> ProgressListener:
    """``function`` as a listener: ``fit(problem, progress=listener(print))``."""
    return _Listener(function)


@runtime_checkable
class PhaseReporter(Protocol):
    """A progress callback that is also told when the fit enters a phase: the optimizers and
    the verdict say where they are through it when they are given one."""

    def __call__(self, iteration: int, loss: float, values: dict[str, float]) -> None: ...

    def phase(self, name: str, index: int | None = None, count: int | None = None) -> None: ...


class Reporter:
    """The caller's progress callback or listener as the fit's stages report to it. Made by
    ``fit`` and ``fit_shared`` for each fit (``kernels``: the model, precision and device it
    simulates; ``t0``: when it began); the stages pass it to the optimizers as their callback
    and tell it their phases. :meth:`preparing` comes before the objective is built,
    :meth:`measure` after, with the target's unit and RMSE."""

    def __init__(self, progress: Any, t0: float, kernels: tuple[str, str, str]) -> None:
        self.listener = progress if isinstance(progress, ProgressListener) else None
        self.callback = None if self.listener is not None else progress
        self.t0 = t0
        self.kernels = kernels
        self.offset = 0  # added to the optimizers' iteration numbers (a second stage's)
        self.unit: Unit | None = None
        self.rmse_of_loss: Callable[[float], float] = lambda loss: math.nan
        self.first_report_s: float | None = None  # when the start's loss was reported
        self._phase: tuple[str, int | None, int | None] | None = None
        self._latest: tuple[int, float, dict[str, float]] = (0, math.nan, {})

    def preparing(self) -> None:
        """Before the objective is built: ``compiling`` where this process has not simulated
        the model in this precision on this device yet (its kernels are built while the
        simulator is and while the start is simulated)."""
        if self.kernels not in _BUILT:
            _BUILT.add(self.kernels)
            self._emit("compiling", None, None, expected_s=COMPILE_S)

    def measure(self, unit: Unit, rmse_of_loss: Callable[[float], float]) -> None:
        """The objective is built: the unit of its target and how its loss maps to an RMSE in
        it. The start is simulated next (said unless the kernels are still being compiled)."""
        self.unit, self.rmse_of_loss = unit, rmse_of_loss
        if self._phase is None:
            self.phase("start")

    def phase(self, name: str, index: int | None = None, count: int | None = None) -> None:
        """The fit enters phase ``name`` (k of n where ``index`` and ``count`` say so); said
        once, however often a stage repeats it. A rounding check that builds the kernels of
        its precision for the first time in the process says how long that may take."""
        if self._phase == (name, index, count):
            return
        expected = None
        if name == "rounding":
            model, precision, device = self.kernels
            other = (model, _OTHER_PRECISION.get(precision, precision), device)
            if other not in _BUILT:
                _BUILT.add(other)
                expected = COMPILE_S
        self._emit(name, index, count, expected_s=expected)

    def __call__(self, iteration: int, loss: float, values: dict[str, float]) -> None:
        """A point the search accepted: the plain callback's call. The fit's first is its
        start; the local search refines from there."""
        iteration += self.offset
        self._latest = (iteration, loss, values)
        first = self.first_report_s is None
        if first:
            self.first_report_s = time.perf_counter() - self.t0
            self._phase = ("start", None, None)
        if self.listener is not None:
            self.listener.fit_progress(self._report(*self._phase, accepted=True))
        elif self.callback is not None:
            self.callback(iteration, loss, values)
        if first:
            self.phase("refinement")

    def shifted(self, offset: int) -> Reporter:
        """The same reporter for a later stage whose iterations follow ``offset`` earlier ones."""
        later = copy.copy(self)
        later.offset = offset
        return later

    def _emit(self, name: str, index: int | None, count: int | None, expected_s: float | None) -> None:
        self._phase = (name, index, count)
        if self.listener is not None:
            self.listener.fit_progress(self._report(name, index, count, expected_s=expected_s))

    def _report(
        self,
        name: str,
        index: int | None,
        count: int | None,
        expected_s: float | None = None,
        accepted: bool = False,
    ) -> FitProgress:
        iteration, loss, values = self._latest
        return FitProgress(
            phase=name,
            phase_index=index,
            phase_count=count,
            iteration=iteration,
            loss=float(loss),
            rmse=self.rmse_of_loss(float(loss)) if math.isfinite(loss) else math.nan,
            unit=self.unit,
            values=dict(values),
            seconds=time.perf_counter() - self.t0,
            expected_s=expected_s,
            accepted=accepted,
        )
