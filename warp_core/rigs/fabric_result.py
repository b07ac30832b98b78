"""What a fabric fit gives: each rig's reading and outcome, the settings, where the rigs ran
(made by ``lab_fit.fit_fabric``; read by the preset, the command line and the panel)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..models.blender_cloth.params import ClothParams
from .fabric import FabricNumbers

__all__ = ["OUTCOME_ORDER", "TIED", "FabricResult", "RigResult", "devices_text"]

# a rig's setting that the fit sets another equal to (``fit_tension``'s compression)
TIED = {"tension_stiffness": ("tension_stiffness", "compression_stiffness")}

# a worse outcome of one rig decides the fit's: the first of these that any rig has
OUTCOME_ORDER = ("unreachable", "coarse", "unsettled", "stalled", "misfit", "matched")


@dataclass(frozen=True)
class RigResult:
    """One rig's part of a fabric fit: made by :func:`fit_fabric`, read by the preset's
    provenance, the command line's summary and the panel's report."""

    rig: str  # "cantilever", "tensile", "bias", "drape"
    number: str  # the FabricNumbers field it reads
    setting: str  # the ClothParams field it set ("" where it only reads)
    requested: float  # the lab's number, in the number's own unit
    reading: float  # the rig's reading at the fitted settings, the same unit (NaN: none)
    # "matched", "misfit" (read only, off), "unreachable", "coarse" (the mesh is too coarse for
    # the cantilever to read it), "unsettled", "stalled"
    outcome: str
    runs: int
    seconds: float
    # each start's reading at the fitted settings where the rig has several (the drape's,
    # whose ``reading`` is their mean: ``DrapeRig.lifts_m``); () for the strips
    starts: tuple[float, ...] = ()
    device: str = "cpu"  # where its runs ran (``fit_fabric``'s device "auto": by the rig's size)

    @property
    def spread(self) -> float:
        """How far the rig's starts read apart (0 for one start)."""
        return max(self.starts) - min(self.starts) if self.starts else 0.0

    @property
    def spread_text(self) -> str:
        """The spread in a report's words ("" where the rig has one start)."""
        return f" (the mean of starts {self.spread:.2f} apart)" if self.spread > 0.0 else ""


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
    device: str  # where the rigs ran: one device, or each rig's ("cuda:0 (drape), cpu (tensile)")

    @property
    def fitted(self) -> tuple[str, ...]:
        """The settings the fit chose: the vertex mass, then each rig's (the tensile strip's
        tension with the compression it sets equal)."""
        chosen = [r.setting for r in self.rigs if r.setting]
        return ("mass",) + tuple(name for s in chosen for name in TIED.get(s, (s,)))

    def cloth_values(self) -> dict[str, float | int]:
        """What to write to a Cloth modifier or a preset: the quality the rigs ran at and each
        fitted setting with its group maximum (an object with a stiffness group keeps the
        fabric's value where its weights are 1 too)."""
        names = {f.name for f in fields(self.settings)}
        values: dict[str, float | int] = {"quality": self.settings.quality}
        for fitted in self.fitted:
            values[fitted] = getattr(self.settings, fitted)
            if f"{fitted}_max" in names:
                values[f"{fitted}_max"] = values[fitted]
        return values


def devices_text(results: list[RigResult]) -> str:
    """Where the rigs ran: "cpu", or each device with its rigs ("cuda:0 (drape), cpu (...)")."""
    by_device: dict[str, list[str]] = {}
    for r in results:
        by_device.setdefault(r.device, []).append(r.rig)
    if len(by_device) == 1:
        return next(iter(by_device))
    return ", ".join(f"{d} ({', '.join(rigs)})" for d, rigs in by_device.items())
