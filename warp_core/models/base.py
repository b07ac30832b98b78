"""What a material model is: a parameter table and a way to build a simulator.

The fit engine (``warp_core.fit``) only speaks to these two protocols, so a new model is
a folder under ``warp_core/models/`` that registers a :class:`Model`; nothing in the fit
engine changes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
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


@runtime_checkable
class ModelSettings(Protocol):
    """A model's full settings: fittable values plus fixed ones (quality, gravity, ...)."""

    def values(self) -> dict[str, float]: ...

    def replace(self, **changes: float) -> ModelSettings: ...

    def validate(self) -> None: ...


@runtime_checkable
class ModelRollout(Protocol):
    """The positions a rollout produced at its output frames."""

    positions: Any  # (frames, N) wp.array of vec3, on the tape when one is recording

    @property
    def frozen(self) -> Any:
        """What ``Simulator.rollout(frozen=...)`` takes to repeat this rollout's discrete
        choices (for the blender_cloth model: the CG iteration count of every substep)."""

    def numpy(self) -> np.ndarray: ...


@runtime_checkable
class Simulator(Protocol):
    """One mesh of one model on one Warp device.

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


@runtime_checkable
class Model(Protocol):
    """A material model: its parameters and how to simulate a mesh with them."""

    name: str  # registry key, e.g. "blender_cloth"
    label: str  # shown to users
    parameters: Sequence[Parameter]  # the fittable ones, in gradient order

    def default_settings(self) -> ModelSettings: ...

    def settings_from_dict(self, values: dict[str, Any]) -> ModelSettings:
        """Settings from their plain-dict form (``dataclasses.asdict`` of the settings)."""

    def build(
        self, geometry: Any, settings: ModelSettings, device: str, precision: str, start_frame: int = 1
    ) -> Simulator: ...
