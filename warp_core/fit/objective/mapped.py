"""A model's simulator seen through a problem's region maps.

The fit's parameters include one value per map region (``problem.maps``); the model's
simulator knows only its own parameters and per-vertex weights. :class:`RegionSimulator`
turns the one into the other at every ``set_params`` (``MapLayout.split``), repainting the
weights only when they change, and is otherwise the simulator it wraps. A batch of rollouts
(a Jacobian's, a global phase's, on a GPU) gives each member the weights of its own values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...models.base import Simulator, TangentSimulator
from ..problem.maps import MapLayout

__all__ = ["RegionSimulator"]

# a direction's central difference of the split moves each value by this fraction of itself
SPLIT_STEP = 1e-6


class RegionSimulator:
    """Made by the objective for a problem with region maps (one per simulator it builds);
    read as a :class:`~warp_core.models.base.Simulator` by everything that runs rollouts."""

    _OWN = frozenset({"inner", "layout", "start", "_painted", "region_values", "fit_values"})

    def __init__(self, inner: Simulator, layout: MapLayout, start: Mapping[str, float]) -> None:
        self.inner = inner
        self.layout = layout
        self.start = dict(start)
        self._painted: dict[str, np.ndarray] | None = None
        self.region_values: dict[str, float] = {}
        self.fit_values: dict[str, float] = {}  # the last values set, region values among them

    # everything but the parameters is the wrapped simulator's (its settings as well: the
    # fit sets e.g. ``gradient`` on the simulator it runs)
    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self.inner, name, value)

    def set_params(self, values: Any) -> None:
        if not isinstance(values, Mapping):
            self.inner.set_params(values)
            return
        region_values = {k: float(v) for k, v in values.items() if k in self.layout.region_names}
        self.region_values = {**self.region_values, **region_values}
        full = {**self.region_values, **{k: float(v) for k, v in values.items() if k not in region_values}}
        self.fit_values = {**self.fit_values, **full}
        model_values, weights = self.layout.split(full, self.start)
        painted = self._painted
        if painted is None or any(not np.array_equal(painted[k], w) for k, w in weights.items()):
            self.inner.set_maps(weights)
            self._painted = weights
        self.inner.set_params(model_values)

    def has_tangents(self) -> bool:
        """Whether :meth:`position_tangents` can run: the wrapped simulator has tangents."""
        return isinstance(self.inner, TangentSimulator)

    def position_tangents(
        self,
        frame_end: int,
        output_frames: list[int],
        directions: Sequence[Mapping[str, float]],
        goals: np.ndarray | None = None,
        weight_directions: Any = None,
        max_residual: float | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """The wrapped simulator's tangents along directions of the fit's values (region
        values among them), each turned into the change of the model's values and of the
        painted weights that ``MapLayout.split`` makes of it: central differences of the
        split, exact since every vertex's value is linear in the region values whatever
        range the split picks."""
        if weight_directions is not None:
            raise ValueError("a region map's weights come from its region values, not from the caller")
        if not self.has_tangents():
            raise NotImplementedError(f"{type(self.inner).__name__} has no forward tangents")
        values = self.fit_values
        model_directions, weight_changes = [], []
        for direction in directions:
            moving = {n: float(dv) for n, dv in direction.items() if dv != 0.0}
            ratios = [abs(values[n]) / abs(dv) for n, dv in moving.items() if values[n] != 0.0]
            h = SPLIT_STEP * (min(ratios) if ratios else 1.0)
            sides = [
                self.layout.split(
                    {**values, **{n: values[n] + sign * h * dv for n, dv in moving.items()}}, self.start
                )
                for sign in (1.0, -1.0)
            ]
            (model_plus, weights_plus), (model_minus, weights_minus) = sides
            model_directions.append({k: (model_plus[k] - model_minus[k]) / (2.0 * h) for k in model_plus})
            weight_changes.append({k: (weights_plus[k] - weights_minus[k]) / (2.0 * h) for k in weights_plus})
        return self.inner.position_tangents(
            frame_end, output_frames, model_directions, goals, weight_changes, max_residual
        )

    def batch_width(self, rollouts: int) -> int:
        return self.inner.batch_width(rollouts)

    def rollout_batch(
        self,
        points: list[dict[str, float]],
        frame_end: int,
        output_frames: list[int] | None = None,
        goals: np.ndarray | None = None,
        frozen: Any = None,
        maps: Any = None,
    ) -> Any:
        """The wrapped simulator's batch, each member with the weights its region values
        paint (as :meth:`set_params` would)."""
        if maps is not None:
            raise ValueError("a region map's weights come from its region values, not from the caller")
        split = [
            self.layout.split({**self.region_values, **{k: float(v) for k, v in p.items()}}, self.start)
            for p in points
        ]
        return self.inner.rollout_batch(
            [values for values, _ in split],
            frame_end,
            output_frames,
            goals,
            frozen,
            maps=[weights for _, weights in split],
        )
