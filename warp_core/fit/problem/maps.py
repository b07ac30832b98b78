"""The weight maps a fit moves, and how their values become a model's maps and settings.

A map is one of a model's ``map_ranges`` kinds (for Blender's cloth: the structural, shear
and bending stiffness groups). A vertex of weight ``w`` takes ``base + w * (top - base)`` of
the range's parameters, and a spring the mean of its two vertices' weights, so a spring's
stiffness is the mean of its two vertices' *stiffness* ``s_v``. The fit therefore works on
stiffness values, not weights:

* **regions**: the artist names painted memberships ``g_r`` (vertex groups, weights in
  [0, 1]); each region ``r`` has one value ``s_r``, a fit parameter named ``kind:region``,
  and a vertex blends them as painted: ``s_v = (sum_r g_r(v) s_r + max(0, 1 - G_v) s_rest) /
  max(1, G_v)`` with ``G_v = sum_r g_r(v)``, where ``s_rest`` (the range's base parameter, fitted
  or held) is the stiffness outside every region.
* **free**: one value per vertex (``warp_core.fit.free_map``).

The weight-versus-maximum ambiguity (weights times the range give the same springs for many
ranges) is resolved on the way out (:meth:`MapLayout.written`): the base is the smallest
stiffness and the top the largest, so the fitted weights span exactly [0, 1]. Parameters
that follow the first base parameter (compression follows tension) keep their start ratio
to it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...models import get_model
from ...models.base import MapRange, Model, Parameter

__all__ = [
    "DEFAULT_SMOOTHNESS",
    "MapLayout",
    "MapSpec",
    "blend_weights",
    "parameters_set_by",
    "range_settings",
    "region_parameter",
    "start_ratios",
]

# the free map's smoothness prior by default (``free_map``: measured there)
DEFAULT_SMOOTHNESS = 3e-2
# while a fit runs, the range a simulator blends over is at least this wide relative to its
# base, so a weight always says something (a spring's stiffness does not depend on it)
_MIN_SPREAD = 1e-3


def region_parameter(kind: str, region: str) -> str:
    """The fit parameter of one region's value: ``structural:collar``."""
    return f"{kind}:{region}"


@dataclass
class MapSpec:
    """One weight map a fit moves: made by the caller (the add-on, the batch command, the
    benchmarks) into ``FitProblem.maps``; read by :class:`MapLayout` and the free-map fit.

    ``regions``: region name -> painted membership, one value in [0, 1] per vertex; empty for
    a free map (one value per vertex, with ``smoothness`` the strength of its prior on the
    log stiffness, see ``free_map``)."""

    kind: str
    regions: dict[str, np.ndarray] = field(default_factory=dict)
    smoothness: float = DEFAULT_SMOOTHNESS

    @property
    def free(self) -> bool:
        return not self.regions


@dataclass(frozen=True)
class _RegionMap:
    """One region map laid out: its range, parameters and blend matrix."""

    kind: str
    range: MapRange
    names: tuple[str, ...]  # its region parameters
    blend: np.ndarray  # (N, R): s_v = blend @ s_r + rest_share * s_rest
    rest_share: np.ndarray  # (N,)


class MapLayout:
    """The problem's maps laid out for a fit: made by the objective (and the parameter spec)
    from a problem; read by the simulator wrapper (``objective.mapped``), the verdict (the
    fitted settings and maps) and the reports."""

    def __init__(self, model_name: str, maps: list[MapSpec], vertex_count: int) -> None:
        self.model = get_model(model_name)
        self.specs = list(maps)
        check_specs(self.model, self.specs, vertex_count)
        self.regions = [_region_map(self.model, spec, vertex_count) for spec in self.specs if not spec.free]
        self.region_names: tuple[str, ...] = tuple(n for r in self.regions for n in r.names)

    @property
    def has_regions(self) -> bool:
        return bool(self.regions)

    def region_parameters(self) -> dict[str, Parameter]:
        """Each region value as a parameter: its base parameter's bounds, floor and range."""
        params = {p.name: p for p in self.model.parameters}
        out = {}
        for region in self.regions:
            base = params[region.range.base[0]]
            for name in region.names:
                label = f"{base.label} in {name.split(':', 1)[1]}"
                out[name] = dataclasses.replace(base, name=name, label=label)
        return out

    def start_values(self, start: Mapping[str, float]) -> dict[str, float]:
        """Each region parameter's start: its map's rest value (the map uniform)."""
        return {n: float(start[r.range.base[0]]) for r in self.regions for n in r.names}

    def stiffness(self, values: Mapping[str, float], start: Mapping[str, float]) -> dict[str, np.ndarray]:
        """kind -> each vertex's value of the range's first base parameter, at the region values
        in ``values`` (those absent at the rest value) and the rest value in ``values`` or
        ``start``."""
        out = {}
        for region in self.regions:
            rest = float(values.get(region.range.base[0], start[region.range.base[0]]))
            s_r = np.array([float(values.get(n, rest)) for n in region.names])
            out[region.kind] = region.blend @ s_r + region.rest_share * rest
        return out

    def split(
        self, values: Mapping[str, float], start: Mapping[str, float], exact: bool = False
    ) -> tuple[dict[str, float], dict[str, np.ndarray]]:
        """The model's parameter values and kind -> weights that make the springs ``values``
        asks for. ``exact``: the range is the smallest to the largest stiffness (what is written
        back); else it is at least ``_MIN_SPREAD`` wide, as a simulator runs it."""
        model_values = {k: float(v) for k, v in values.items() if k not in self.region_names}
        weights = {}
        for kind, s in self.stiffness(values, start).items():
            rng = self._range(kind)
            lo, hi = _span(s, exact)
            weights[kind] = blend_weights(s, lo, hi)
            model_values.update(range_settings(rng, start_ratios(rng, start), lo, hi))
        return model_values, weights

    def spread(self, values: Mapping[str, float], start: Mapping[str, float]) -> dict[str, float]:
        """kind -> the width ``top - base`` of the first pair a simulator runs at ``values``."""
        out = {}
        for kind, s in self.stiffness(values, start).items():
            lo, hi = _span(s, exact=False)
            out[kind] = hi - lo
        return out

    def region_gradient(
        self,
        weight_gradients: Mapping[str, np.ndarray],
        values: Mapping[str, float],
        start: Mapping[str, float],
        names: list[str],
    ) -> dict[str, float]:
        """d loss / d value of each region parameter and rest value in ``names``, from the
        gradients with respect to the weights a simulator ran at ``values`` (``split``, not
        exact): a spring's stiffness is the mean of its vertices' ``s_v``, whatever the
        range, so d loss / d s_v = d loss / d w_v / (top - base)."""
        spread = self.spread(values, start)
        out: dict[str, float] = {}
        for region in self.regions:
            by_s = np.asarray(weight_gradients[region.kind], dtype=np.float64) / spread[region.kind]
            for k, name in enumerate(region.names):
                if name in names:
                    out[name] = float(by_s @ region.blend[:, k])
            if region.range.base[0] in names:
                out[region.range.base[0]] = float(by_s @ region.rest_share)
        return out

    def report(
        self,
        values: Mapping[str, float],
        start: Mapping[str, float],
        undetermined: list[str],
        matched: Mapping[str, list[float]],
    ) -> dict[str, dict]:
        """kind -> the report's entry of each region map at the fitted ``values`` (its
        regions' values, whether the targets determine each, and where given in ``matched``
        the factors of the value that still match the targets; the range and the weights)."""
        model_values, weights = self.split(values, start, exact=True)
        out = {}
        for region in self.regions:
            rng = region.range
            out[region.kind] = {
                "kind": region.kind,
                "mode": "regions",
                "base": model_values[rng.base[0]],
                "top": model_values[rng.top[0]],
                "settings": {n: model_values[n] for n in (*rng.base, *rng.top)},
                "regions": {
                    name.split(":", 1)[1]: region_entry(
                        float(values[name]), name not in undetermined, matched.get(name)
                    )
                    for name in region.names
                },
                "weights": weight_stats(weights[region.kind]),
                "vertices": len(weights[region.kind]),
            }
        return out

    def _range(self, kind: str) -> MapRange:
        return self.model.map_ranges[kind]

    def derived(self) -> set[str]:
        """Model parameters the maps set (:func:`parameters_set_by`)."""
        return {n for spec in self.specs for n in parameters_set_by(self.model, spec.kind, spec.free)}


def _span(stiffness: np.ndarray, exact: bool) -> tuple[float, float]:
    """The range a map's weights blend over: its smallest to its largest stiffness, at least
    ``_MIN_SPREAD`` wide unless ``exact``."""
    lo, hi = float(stiffness.min()), float(stiffness.max())
    return (lo, hi) if exact else (lo, max(hi, lo * (1.0 + _MIN_SPREAD)))


def start_ratios(rng: MapRange, start: Mapping[str, float]) -> dict[str, float]:
    """Each base parameter's start ratio to the first (compression to tension), which it keeps."""
    first = float(start[rng.base[0]])
    return {b: (float(start[b]) / first if b != rng.base[0] else 1.0) for b in rng.base}


def range_settings(rng: MapRange, ratios: Mapping[str, float], low: float, high: float) -> dict[str, float]:
    """The range's parameter values for a blend from ``low`` (weight 0) to ``high`` (weight 1)
    of the first base parameter, the others at their ``ratios``."""
    out = {}
    for base, top in zip(rng.base, rng.top, strict=True):
        out[base], out[top] = low * ratios[base], high * ratios[base]
    return out


def blend_weights(stiffness: np.ndarray, low: float, high: float) -> np.ndarray:
    """The weights in [0, 1] that blend ``low`` to ``high`` into ``stiffness`` (0 where the
    range is one value)."""
    if not high > low:
        return np.zeros_like(stiffness)
    return np.clip((stiffness - low) / (high - low), 0.0, 1.0)


def parameters_set_by(model: Model, kind: str, free: bool) -> set[str]:
    """The model parameters a fitted ``kind`` map sets: its range's, but for a region map its
    first base (the stiffness outside its regions, which may be fitted); none for a kind the
    model does not fit."""
    rng = model.map_ranges.get(kind)
    if rng is None:
        return set()
    return {*rng.base[1:], *rng.top} | ({rng.base[0]} if free else set())


def region_entry(value: float, determined: bool, matched: list[float] | None) -> dict[str, Any]:
    """One region's value in a map's report entry, with the factors of it that still match
    the targets (the identifiability's ``matched_range``) where measured."""
    entry: dict[str, Any] = {"value": value, "determined": determined}
    if matched is not None:
        entry["matched_range"] = [float(matched[0]), float(matched[1])]
    return entry


def weight_stats(weights: np.ndarray) -> dict[str, float]:
    """The smallest, largest and mean weight of a fitted map, for its report entry."""
    return {"min": float(weights.min()), "max": float(weights.max()), "mean": float(weights.mean())}


def check_specs(model: Model, specs: list[MapSpec], vertex_count: int) -> None:
    """ValueError naming what is wrong with a problem's maps."""
    ranges = model.map_ranges
    kinds = [s.kind for s in specs]
    for kind in kinds:
        if kind not in ranges:
            fitted = ", ".join(ranges) or "none"
            raise ValueError(f"the {model.label} model cannot fit a {kind!r} map (maps it fits: {fitted})")
    if len(set(kinds)) != len(kinds):
        raise ValueError(f"each map kind once: {', '.join(kinds)}")
    free = [s.kind for s in specs if s.free]
    if free and len(specs) > 1:
        raise ValueError(f"a free map ({free[0]}) is fitted alone, not with other maps")
    for spec in specs:
        if not spec.smoothness >= 0.0:
            raise ValueError(f"the {spec.kind} map's smoothness must be >= 0, got {spec.smoothness}")
        for name, g in spec.regions.items():
            g = np.asarray(g, dtype=np.float64)
            if not name or ":" in name:
                raise ValueError(f"region name {name!r}: give a non-empty name without ':'")
            if g.shape != (vertex_count,) or not np.isfinite(g).all() or g.min() < 0.0 or g.max() > 1.0:
                raise ValueError(
                    f"region {name!r} of the {spec.kind} map: one weight in [0, 1] per vertex "
                    f"({vertex_count}) is needed"
                )
            if not g.any():
                raise ValueError(f"region {name!r} of the {spec.kind} map holds no vertex: paint it first")


def _region_map(model: Model, spec: MapSpec, n: int) -> _RegionMap:
    names = tuple(region_parameter(spec.kind, r) for r in spec.regions)
    g = np.stack([np.asarray(v, dtype=np.float64) for v in spec.regions.values()], axis=1)
    total = g.sum(axis=1)
    scale = np.maximum(total, 1.0)
    return _RegionMap(
        kind=spec.kind,
        range=model.map_ranges[spec.kind],
        names=names,
        blend=g / scale[:, None],
        rest_share=np.maximum(1.0 - total, 0.0) / scale,
    )
