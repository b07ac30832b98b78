"""What a material model is: a parameter table and a way to build a simulator.

The fit engine (``warp_core.fit``) only speaks to these two protocols, so a new model is
a folder under ``warp_core/models/`` that registers a :class:`Model`; nothing in the fit
engine changes. What a fit may do with a model (tape gradients, batches, rollouts side by
side, the contact probe, per-vertex weight maps) the model and its simulators declare here,
so the fit engine never asks for a model by name.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

# Without a ``floor``, a parameter whose hard lower limit is 0 is fitted down to this
# fraction of its default (three decades: far below any value a fit should end at, still
# a finite log value for the optimizer).
DEFAULT_FLOOR_FRACTION = 1e-3
# Without a ``plausible`` range, the global search spreads its start points over this
# factor either side of the default.
DEFAULT_PLAUSIBLE_FACTOR = 10.0


def as_float32(value: float) -> float:
    """``value`` as Blender stores a float setting (float32; inf when out of its range)."""
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def within_bounds(value: float, bounds: tuple[float, float]) -> bool:
    """Is ``value`` within ``bounds`` as Blender stores settings? Compared in float32, so a
    value at a bound stays within it after storage (a Poisson ratio of 0.49 reads back as
    0.49000000953674316, the float32 nearest 0.49)."""
    lo, hi = bounds
    return as_float32(lo) <= as_float32(value) <= as_float32(hi)


def onto_bounds(value: float, bounds: tuple[float, float]) -> float:
    """``value`` within ``bounds`` (:func:`within_bounds`) as a float64 within them: a bound
    read back from float32 is the bound again. Values outside are returned as they are."""
    lo, hi = bounds
    return min(max(value, lo), hi) if within_bounds(value, bounds) else value


@dataclass(frozen=True)
class Parameter:
    """One continuous, fittable parameter of a model.

    The fit works on ``log(value)``, so it needs a positive lower limit: ``floor`` is the
    smallest value it tries where the hard lower limit is 0 (default: 1e-3 of ``default``).
    ``plausible`` is the range where real materials usually lie, which the global search
    samples (default: ``default`` / 10 to ``default`` * 10, within the bounds); it does not
    limit the fit.
    """

    name: str
    label: str
    default: float
    bounds: tuple[float, float]  # hard limits: no simulation runs outside them
    floor: float | None = None
    plausible: tuple[float, float] | None = None

    def fit_bounds(self) -> tuple[float, float]:
        """The bounds the fit keeps to: the hard limits, the lower one raised to the floor."""
        lo, hi = float(self.bounds[0]), float(self.bounds[1])
        if lo > 0.0:
            return lo, hi
        floor = self.floor if self.floor is not None else DEFAULT_FLOOR_FRACTION * float(self.default)
        if not floor > 0.0:
            floor = DEFAULT_FLOOR_FRACTION * hi
        return min(floor, hi), hi

    def plausible_range(self) -> tuple[float, float]:
        """Where the global search looks, clipped to :meth:`fit_bounds`."""
        lo, hi = self.fit_bounds()
        if self.plausible is not None:
            p_lo, p_hi = self.plausible
        else:
            base = float(self.default) if self.default > 0.0 else math.sqrt(lo * hi)
            p_lo, p_hi = base / DEFAULT_PLAUSIBLE_FACTOR, base * DEFAULT_PLAUSIBLE_FACTOR
        p_lo, p_hi = max(p_lo, lo), min(p_hi, hi)
        return (p_lo, p_hi) if p_lo < p_hi else (lo, hi)


@dataclass(frozen=True)
class MapRange:
    """Which of a model's parameters a per-vertex weight map blends between: a vertex of
    weight ``w`` takes ``base + w * (top - base)`` of each pair ``(base[k], top[k])``.
    Declared by a model (``Model.map_ranges``), read by the fit's map layouts: the first
    base parameter is the value a map region or vertex is fitted in; the others follow it
    at their start ratio to it."""

    base: tuple[str, ...]
    top: tuple[str, ...]


@runtime_checkable
class ModelSettings(Protocol):
    """A model's full settings: fittable values plus fixed ones (quality, gravity, ...)."""

    def values(self) -> dict[str, float]: ...

    def replace(self, **changes: float) -> ModelSettings: ...

    def validate(self) -> None: ...

    def as_dict(self) -> dict[str, Any]:
        """The settings as plain JSON data (what ``Model.settings_from_dict`` reads back): how a
        problem file stores them."""


@runtime_checkable
class ModelRollout(Protocol):
    """The positions a rollout produced at its output frames: made by
    ``Simulator.rollout`` (and ``rollout_shifted``), read by the fit's objective."""

    positions: Any  # (frames, N) wp.array of vec3, on the tape when one is recording
    # what else the rollout found, by name, for the fit's report: the blender_cloth model
    # with collision objects puts "contacts" here (where and when the cloth touched them);
    # the soft_body model, once a backward pass ran, "gradient_residual" (how far its solver's
    # steps were from the converged steps its gradient assumes, relative to their forces);
    # empty where a model finds nothing more
    extras: dict[str, Any]

    @property
    def frozen(self) -> Any:
        """What ``Simulator.rollout(frozen=...)`` takes to repeat this rollout's discrete
        choices (for the blender_cloth model: the CG iteration count of every substep)."""

    @property
    def repeated(self) -> Any:
        """As :attr:`frozen`, every choice exactly as made, whatever a model would otherwise
        reconsider (the slope the tape's gradient gives: a line search's smooth line)."""

    def numpy(self) -> np.ndarray: ...


@runtime_checkable
class ModelBatchRollout(Protocol):
    """Several forward rollouts run together: made by ``Simulator.rollout_batch``, read by
    the fit's tangents and global phase."""

    positions: np.ndarray  # (B, frames, N, 3) float64: member b is the rollout at points[b]


@runtime_checkable
class Simulator(Protocol):
    """One mesh of one model on one Warp device: made by ``Model.build``, driven by the fit
    engine (its objective, tangents and probes).

    Gradient hook: ``params`` is a Warp array of the model's continuous parameters in
    ``Model.parameters`` order with ``requires_grad``; a rollout made inside the caller's
    ``wp.Tape`` records its backward pass there, so ``params.grad`` holds d loss / d value
    after ``tape.backward``.
    """

    device: str
    dtype: Any  # wp.float32 or wp.float64
    vec3: Any  # the matching Warp vector type
    params: Any  # wp.array, see above

    def set_params(self, values: dict[str, float]) -> None: ...

    def rollout(
        self,
        frame_end: int,
        output_frames: list[int] | None = None,
        goals: np.ndarray | None = None,
        frozen: Any = None,
    ) -> ModelRollout: ...

    def max_stretch(self, positions: np.ndarray) -> float:
        """Largest edge length over rest length in ``positions`` (frames, N, 3): how the fit
        tells a torn-apart (diverged) rollout from a real one."""

    @property
    def parallel_rollouts(self) -> bool:
        """Whether several simulators built for the same problem may run rollouts at the
        same time on threads, each on its own: read by the fit's tangents and global phase,
        which run them side by side on the CPU's cores where True, one after the other
        otherwise."""

    @property
    def stream_rollouts(self) -> bool:
        """Whether a rollout on a CUDA device may be issued on a stream of its own and read
        later: everything it launches, copies and captures goes to the device's current
        stream. Read by the fit's tangents and global phase, which run two simulators' rollouts
        at once on a GPU where True and the model runs no batches there
        (``fit.objective.rollout_pool``)."""

    def batch_width(self, rollouts: int) -> int:
        """How many of ``rollouts`` forward rollouts (at different parameter values) one
        :meth:`rollout_batch` call runs together; 0 where this simulator runs no batches.
        Read by the fit's tangents and global phase before they call :meth:`rollout_batch`."""

    def rollout_batch(
        self,
        points: list[dict[str, float]],
        frame_end: int,
        output_frames: list[int] | None = None,
        goals: np.ndarray | None = None,
        frozen: Any = None,
        maps: Sequence[Mapping[str, np.ndarray]] | None = None,
    ) -> ModelBatchRollout:
        """Forward rollouts at each of ``points`` (continuous parameter values over the
        current settings) as one batch, each the same as :meth:`rollout` at its values;
        ``goals`` and ``frozen`` as :meth:`rollout`'s, for every member; ``maps`` each
        member's weight maps (kind -> (N,) weights, as ``set_maps`` takes them), where the
        model has ``Model.map_ranges``. Called only where :meth:`batch_width` is at least 2;
        NotImplementedError where it is always 0."""

    def tape_gradient_refusal(self) -> str | None:
        """None where a rollout inside a ``wp.Tape`` records the gradient of ``params``;
        otherwise the subject of the sentence saying why not (e.g. ``"object collisions
        have no tape gradient"``), which the fit engine completes when it refuses a
        gradient-based optimizer for this simulator."""

    @property
    def contact_probe(self) -> bool:
        """Whether contacts with collision objects may decide the motion, so that the fit
        measures how far the same rollout from a start moved by far less than any scene
        setting could ends up (the start-gap probe, :meth:`rollout_shifted`) and reports it
        with the fitted values."""

    def rollout_shifted(
        self, shift_m: np.ndarray, frame_end: int, output_frames: list[int], goals: np.ndarray | None
    ) -> ModelRollout:
        """A forward rollout at the current parameters from the rest positions moved by
        ``shift_m`` ((3,) metres): the start-gap probe. Called only where
        :meth:`contact_probe` is True; NotImplementedError where it is always False."""

    # per-vertex weight maps: called only where ``Model.map_kinds`` is not empty, with some of
    # its kinds; NotImplementedError where it is empty
    def record_maps(self, kinds: Sequence[str]) -> None:
        """From now on a rollout inside a ``wp.Tape`` also records the loss's gradient with
        respect to the per-vertex weights of ``kinds`` (:meth:`map_gradients`)."""

    def map_gradients(self) -> dict[str, np.ndarray]:
        """kind -> d loss / d weight of each vertex ((N,) float64) of every recorded map, from
        the last backward pass of a rollout recorded with them."""

    def set_maps(self, maps: Mapping[str, np.ndarray]) -> None:
        """New per-vertex weights (kind -> (N,) in [0, 1]) for the rollouts that follow (not
        between a rollout on a tape and its backward pass, which recomputes with the weights
        it finds); ValueError for a map the simulator cannot change (build a new one then)."""


@runtime_checkable
class TangentSimulator(Protocol):
    """A :class:`Simulator` whose rollouts have forward tangents (the soft body's, by the
    implicit-function theorem): read by the fit's Levenberg-Marquardt Jacobian
    (``FitSettings.jacobian``): one recorded rollout and its tangents instead of two
    rollouts a parameter."""

    # while True, every rollout off a tape keeps its recording, so that tangents at the point
    # just simulated do not run it again (set by the fit where its Jacobians may be tangents)
    keep_recording: bool

    def holds_recording(
        self, frame_end: int, output_frames: list[int], goals: np.ndarray | None = None
    ) -> bool:
        """Whether :meth:`position_tangents` with these arguments, now, reads a kept
        recording (``keep_recording``) instead of running a rollout."""

    def position_tangents(
        self,
        frame_end: int,
        output_frames: list[int],
        directions: Sequence[Mapping[str, float]],
        goals: np.ndarray | None = None,
        weight_directions: Sequence[Mapping[str, np.ndarray]] | None = None,
        max_residual: float | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """A rollout at the current parameters: its positions at ``output_frames`` ((F, N,
        3)) and their derivatives along each direction (parameter -> d value; with
        ``weight_directions``, each direction's change of the painted weights too, kind ->
        (N,), for a model with ``map_kinds``), (D, F, N, 3). The derivatives are None where
        a step of the rollout ends further than ``max_residual`` (relative) from the root of
        the equations it solves: the tangents, which differentiate the root, would not be
        the rollout's."""


@runtime_checkable
class Model(Protocol):
    """A material model: its parameters and how to simulate a mesh with them. Registered in
    ``warp_core.models`` (``get_model``), read by the fit engine and the add-on."""

    name: str  # registry key, e.g. "blender_cloth"
    label: str  # shown to users
    parameters: Sequence[Parameter]  # the fittable ones, in gradient order

    @property
    def differentiable(self) -> bool:
        """Whether a rollout made inside a ``wp.Tape`` records its backward pass (see
        :class:`Simulator`), so that gradient-based optimizers (Adam, L-BFGS) can fit this
        model: read by the fit engine before it runs one. False: finite differences only."""

    @property
    def gradient_kinds(self) -> tuple[str, ...]:
        """The kinds of tape gradient a fit may ask for (``FitSettings.gradient``); empty
        where the model is not :attr:`differentiable`. Read by the fit engine to check a
        fit's settings."""

    @property
    def map_kinds(self) -> tuple[str, ...]:
        """The per-vertex weight maps (for Blender's cloth: its stiffness and shrink vertex
        groups) whose loss gradient a rollout on a tape can record
        (:meth:`Simulator.record_maps`); empty where none. Read by the fit's map gradient
        (``FitObjective.map_gradient``) before it asks a simulator for one."""

    @property
    def map_ranges(self) -> Mapping[str, MapRange]:
        """kind -> the parameters each of the :attr:`map_kinds` that a fit can move blends
        between (a kind not here has a gradient but is not fitted). Read by the fit's map
        layouts (``warp_core.fit.problem.maps``)."""

    def default_settings(self) -> ModelSettings: ...

    def settings_from_dict(self, values: dict[str, Any]) -> ModelSettings:
        """Settings from their plain-dict form (``dataclasses.asdict`` of the settings)."""

    def build(
        self, geometry: Any, settings: ModelSettings, device: str, precision: str, start_frame: int = 1
    ) -> Simulator: ...
