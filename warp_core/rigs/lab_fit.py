"""Blender cloth settings from any set of a fabric's lab numbers: one entry over the rigs.

Each lab number has the rig that reads it and the setting it moves most; the fit runs them in
an order where each rig's setting is decided before a later rig depends on it:

1. the weight gives the vertex mass (no rig: one quad's area per vertex);
2. the elongation along the grain (the tensile strip) gives the tension, compression equal;
3. the elongation at 45 degrees (the bias strip) gives the shear;
4. the bending length (the cantilever) gives the bending;
5. the drape coefficient (Cusick's rig) gives the bending where no bending length was given,
   else the shear where no bias elongation was given, else it is only read and reported: the
   fabric's other numbers have fixed every setting the drape depends on.

A rig whose number cannot be reached in Blender's ranges says so (``unreachable``) with its
nearest reading, and the fit carries on with the nearest setting: the other numbers are still
met where they can be.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, fields

from ..models.blender_cloth.params import ClothParams
from .fabric import EDGE_RANGE_MM, FabricNumbers, fit_bending, vertex_mass

__all__ = ["FabricFitCancelled", "FabricResult", "RigResult", "fabric_preset", "fit_fabric"]

# a worse outcome of one rig decides the fit's: the first of these that any rig has
OUTCOME_ORDER = ("unreachable", "unsettled", "stalled", "misfit", "matched")


@dataclass(frozen=True)
class RigResult:
    """One rig's part of a fabric fit: made by :func:`fit_fabric`, read by the preset's
    provenance, the command line's summary and the panel's report."""

    rig: str  # "cantilever", "tensile", "bias", "drape"
    number: str  # the FabricNumbers field it reads
    setting: str  # the ClothParams field it set ("" where it only reads)
    requested: float  # the lab's number, in the number's own unit
    reading: float  # the rig's reading at the fitted settings, the same unit (NaN: none)
    outcome: str  # "matched", "misfit" (read only, off), "unreachable", "unsettled", "stalled"
    runs: int
    seconds: float


@dataclass(frozen=True)
class FabricResult:
    """The settings a fabric's lab numbers give on a mesh of ``edge_m`` edges and each rig's
    reading of them: made by :func:`fit_fabric`, read by :func:`fabric_preset`, the command
    line and the panel's Fabric operator (which writes ``settings`` to a Cloth modifier).
    ``outcome``: the worst of the rigs' (``matched`` where every number is read back)."""

    numbers: FabricNumbers
    edge_m: float
    settings: ClothParams
    rigs: tuple[RigResult, ...]
    outcome: str
    seconds: float
    device: str

    @property
    def fitted(self) -> tuple[str, ...]:
        """The settings the fit chose: the vertex mass, then each rig's."""
        return ("mass",) + tuple(r.setting for r in self.rigs if r.setting)


class FabricFitCancelled(Exception):
    """Raised by :func:`fit_fabric` between rig runs when its ``should_stop`` says so."""


def fit_fabric(
    numbers: FabricNumbers,
    edge_m: float = 0.01,
    base: ClothParams | None = None,
    device: str = "cpu",
    precision: str = "float64",
    progress: Callable[[str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> FabricResult:
    """The Blender cloth settings for ``numbers`` on a quad mesh of ``edge_m`` edges, starting
    from ``base`` (default: Blender's defaults at quality 10); settings no number decides stay
    ``base``'s. ``progress(text)`` hears each rig as it starts; ``should_stop()`` is asked
    between rigs and a True raises :class:`FabricFitCancelled` (nothing is kept)."""
    if not EDGE_RANGE_MM[0] <= edge_m * 1e3 <= EDGE_RANGE_MM[1]:
        raise ValueError(
            f"edge_m = {edge_m!r} is outside the plausible range "
            f"[{EDGE_RANGE_MM[0] * 1e-3:g}, {EDGE_RANGE_MM[1] * 1e-3:g}] m"
        )
    if not numbers.measured:
        raise ValueError(
            "give at least one lab number besides the weight: a bending length, a drape "
            "coefficient or an elongation"
        )
    start = time.perf_counter()
    base = base or ClothParams(quality=10)
    settings = base.replace(mass=vertex_mass(numbers.weight_gsm, edge_m))
    results: list[RigResult] = []

    def begin(text: str) -> None:
        if should_stop is not None and should_stop():
            raise FabricFitCancelled("the fabric fit was cancelled")
        if progress is not None:
            progress(text)

    if numbers.bending_length_mm is not None:
        begin(f"cantilever: bending length {numbers.bending_length_mm:g} mm")
        fit = fit_bending(numbers, edge_m, settings, device, precision)
        settings = fit.settings
        results.append(
            RigResult(
                rig="cantilever",
                number="bending_length_mm",
                setting="bending_stiffness",
                requested=numbers.bending_length_mm,
                reading=fit.reading.bending_length_m * 1e3,
                outcome=fit.outcome,
                runs=fit.runs,
                seconds=fit.seconds,
            )
        )
    outcome = next(o for o in OUTCOME_ORDER if o == "matched" or any(r.outcome == o for r in results))
    return FabricResult(
        numbers=numbers,
        edge_m=edge_m,
        settings=settings,
        rigs=tuple(results),
        outcome=outcome,
        seconds=time.perf_counter() - start,
        device=device,
    )


def fabric_preset(result: FabricResult, name: str | None = None) -> dict:
    """A ``blender_cloth`` preset (``warp_core.presets`` format, validated) of the fit: the
    fitted settings (each with its group maximum) and the quality they were fitted at; other
    settings are left out, so applying it leaves them alone. The preset schema's provenance
    has fixed keys and none for lab numbers or rig readings, so those are kept as
    ``key: value`` lines in ``notes``."""
    from ..presets import Preset, validate_preset

    numbers = result.numbers
    lines = ["Fitted from fabric lab numbers with virtual test rigs in Blender's cloth model."]
    lines.append(f"weight_gsm: {numbers.weight_gsm:g}")
    lines += [f"{n}: {getattr(numbers, n):g}" for n in numbers.measured]
    if numbers.elongation_percent is not None or numbers.bias_elongation_percent is not None:
        lines.append(f"load_n_per_m: {numbers.load_n_per_m:g}")
    lines.append(f"mesh_edge_mm: {result.edge_m * 1e3:g}")
    lines.append(f"outcome: {result.outcome}")
    for r in result.rigs:
        lines.append(
            f"rig {r.rig}: reads {r.reading:.4g} for {r.number} {r.requested:g} ({r.outcome}, {r.runs} runs)"
        )
    names = {f.name for f in fields(result.settings)}
    values: dict[str, float | int] = {"quality": result.settings.quality}
    for name in result.fitted:
        # a stiffness's group maximum goes with it: an object with a stiffness group keeps
        # the fabric's value where its weights are 1 too
        for field in (name, f"{name}_max"):
            if field in names:
                values[field] = getattr(result.settings, field)
    label = ", ".join(f"{n} {getattr(numbers, n):g}" for n in numbers.measured)
    preset = Preset(
        name=name or f"Fabric {numbers.weight_gsm:g} gsm, {label}",
        values=values,
        notes="\n".join(lines),
        provenance={
            "date": time.strftime("%Y-%m-%d"),
            "fit_seconds": result.seconds,
            "device": result.device,
            "fit_parameters": [f for f in result.fitted if f != "mass"],
        },
    )
    return validate_preset(preset).to_dict()
